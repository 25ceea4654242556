"""Core end-to-end tests: loader, hidden arguments, SALU/VALU, EXEC masking, loops, LDS + barriers."""
import numpy as np
import pytest
import torch
from _emu_build import kernel_source

import moonmath_emu as emu


@pytest.fixture
def basic(build, arch):
    return emu.Module(build(kernel_source("basic.hip"), arch))


def test_loader_and_kernel_info(basic, arch):
    assert basic.arch == arch
    assert {"vadd", "dims", "collatz", "block_sum"} <= set(basic.kernels)
    info = basic.kernel_info("vadd")
    assert info["wavefront_size"] == 64
    kinds = [a["value_kind"] for a in info["args"]]
    assert kinds[:4] == ["global_buffer", "global_buffer", "global_buffer", "by_value"]
    assert "hidden_block_count_x" in kinds and "hidden_group_size_x" in kinds
    assert info["args"][3]["offset"] == 24 and info["args"][3]["size"] == 4
    assert info["vgpr"] >= 1 and info["sgpr"] >= 1 and info["lds"] == 0 and info["scratch"] == 0
    assert basic.kernel_info("block_sum")["lds"] == 1024
    with pytest.raises(emu.EmuError):
        basic.kernel_info("nope")


def test_bad_code_object():
    with pytest.raises(emu.EmuError):
        emu.Module(b"not an elf at all, just bytes......................................")


@pytest.mark.parametrize("n", [1, 63, 64, 1000])
def test_vadd(basic, n):
    a, b = torch.rand(n), torch.rand(n)
    c = torch.full((n,), -7.0)
    cnt = basic.launch("vadd", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=[a, b, c, n])
    assert torch.equal(c, a + b)
    assert cnt["workgroups"] == (n + 255) // 256 and cnt["waves"] == 4 * cnt["workgroups"]
    classified = sum(cnt[k] for k in ("valu", "salu", "smem", "vmem", "ds", "waitcnt", "barrier", "mfma", "branch"))
    # s_endpgm (one per wave), s_nop, s_setprio ... are counted in the total but in no class
    assert cnt["waves"] <= cnt["wave_instructions"] - classified


def test_vadd_numpy(basic):
    a = np.arange(128, dtype=np.float32)
    b = np.ones(128, dtype=np.float32)
    c = np.zeros(128, dtype=np.float32)
    basic.launch("vadd", grid=2, block=64, args=[a, b, c, 128])
    np.testing.assert_array_equal(c, a + 1)


def test_hidden_args_and_ids(basic):
    bx, by, bz = 8, 4, 2
    gx, gy, gz = 3, 2, 2
    nthreads = bx * by * bz * gx * gy * gz
    out = torch.full((nthreads * 8,), -1, dtype=torch.int32)
    basic.launch("dims", grid=(gx, gy, gz), block=(bx, by, bz), args=[out])
    o = out.view(gx * gy * gz, bz, by, bx, 8)
    for g in range(gx * gy * gz):
        for z in range(bz):
            for y in range(by):
                for x in range(bx):
                    assert o[g, z, y, x].tolist() == [x, y, z, bx, by, bz, g, gx]


def test_loop_divergence(basic):
    n = 200
    vals = torch.randint(1, 5000, (n,), dtype=torch.int32)
    steps = torch.zeros(n, dtype=torch.int32)
    basic.launch("collatz", grid=((n + 63) // 64,), block=(64,), args=[vals, steps, n])

    def ref(v):
        s = 0
        while v != 1 and s < 1000:
            v = 3 * v + 1 if v & 1 else v >> 1
            s += 1
        return s

    assert steps.tolist() == [ref(int(v)) for v in vals]


def test_block_sum_lds_barrier(basic):
    x = torch.randn(3 * 256)
    out = torch.zeros(3)
    cnt = basic.launch("block_sum", grid=(3,), block=(256,), args=[x, out])
    torch.testing.assert_close(out, x.view(3, 256).sum(1), rtol=1e-5, atol=1e-5)
    assert cnt["barrier"] > 0 and cnt["ds"] > 0


def test_bpermute(basic):
    x = torch.randn(64)
    out = torch.zeros(64)
    basic.launch("wave_sum_bpermute", grid=1, block=64, args=[x, out])
    torch.testing.assert_close(out, torch.full((64,), float(x.sum())), rtol=1e-5, atol=1e-5)


def test_mathops(basic):
    n = 128
    x = (torch.rand(n) * 4 - 2)
    x[x.abs() < 0.05] = 0.5
    out = torch.zeros(n * 6)
    basic.launch("mathops", grid=2, block=64, args=[x, out, n])
    o = out.view(n, 6)
    torch.testing.assert_close(o[:, 0], torch.exp2(x))
    torch.testing.assert_close(o[:, 1], 1 / x)
    torch.testing.assert_close(o[:, 2], torch.rsqrt(x.abs()))
    torch.testing.assert_close(o[:, 3], x / (x + 3))
    torch.testing.assert_close(o[:, 4], (x * 100).to(torch.int32).float())
    torch.testing.assert_close(o[:, 5], x * x + 1)


def test_wrong_arg_count(basic):
    with pytest.raises(emu.EmuError, match="takes 4 arguments"):
        basic.launch("vadd", grid=1, block=64, args=[None])


def test_supported_covers_test_kernels(basic, build, arch):
    data = build(kernel_source("basic.hip"), arch)
    missing = emu.opcodes_in(data) - emu.supported_opcodes(arch)
    assert not missing


def test_scratch_and_call(basic):
    idx = torch.randint(0, 32, (64,), dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    assert basic.kernel_info("scratch_call")["scratch"] >= 132
    cnt = basic.launch("scratch_call", grid=1, block=64, args=[idx, out])
    t = torch.arange(64)
    assert torch.equal(out, (t * 100 + idx + 3 * (t * 100 + (idx ^ 1))).to(torch.int32))
    assert cnt["branch"] >= 2  # s_swappc into the callee, s_setpc back


def test_cli(build, arch, tmp_path):
    import json
    import subprocess
    import sys

    p = tmp_path / "k.hsaco"
    p.write_bytes(build(kernel_source("basic.hip"), arch))
    run = lambda *a: subprocess.run([sys.executable, "-m", "moonmath_emu", *a], capture_output=True, text=True)  # noqa: E731
    r = run("info", str(p))
    assert r.returncode == 0 and f"arch: {arch}" in r.stdout and "kernel vadd:" in r.stdout
    r = run("disasm", str(p), "--kernel", "vadd")
    assert r.returncode == 0 and "global_load_dword" in r.stdout and "s_endpgm" in r.stdout
    r = run("run", str(p), "--kernel", "vadd", "--grid", "2,1,1", "--block", "64,1,1", "f32:128", "f32:128", "f32:128", "128")
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    assert c["workgroups"] == 2 and c["waves"] == 2 and c["vmem"] > 0
    r = run("run", str(p), "--kernel", "vadd", "--grid", "2,1,1", "--block", "64,1,1", "f32:100", "f32:128", "f32:128", "128")
    assert r.returncode == 1 and "MemoryViolation" in r.stderr


def _edge_pairs(dtype):
    fi = np.finfo(dtype)
    vals = [1.0, -3.0, 7.0, 1e-3, fi.max, -fi.max, fi.tiny, fi.tiny / 8, fi.smallest_subnormal, 0.0, -0.0,
            np.inf, -np.inf, np.nan, 3.0e30, 1.5e-30, 2.0 ** 60, 2.0 ** -60, 0.1, 123456.789]
    rng = np.random.default_rng(7)
    a = np.array([vals[i % len(vals)] for i in range(64)], dtype=dtype)
    b = np.array([vals[(i * 7 + 3) % len(vals)] for i in range(64)], dtype=dtype)
    a[40:] = (rng.standard_normal(24) * 10.0 ** rng.integers(-30, 30, 24)).astype(dtype)
    b[40:] = (rng.standard_normal(24) * 10.0 ** rng.integers(-30, 30, 24)).astype(dtype)
    return a, b


@pytest.mark.parametrize("kernel,dtype", [("fdiv32", np.float32), ("fdiv64", np.float64)])
def test_ieee_division_sequence(basic, kernel, dtype):
    a, b = _edge_pairs(dtype)
    out = np.zeros(64, dtype=dtype)
    basic.launch(kernel, grid=1, block=64, args=[a, b, out])
    with np.errstate(all="ignore"):
        want = a / b
    same = (out == want) | (np.isnan(out) & np.isnan(want))
    assert same.all(), [(x, y, o, wv) for x, y, o, wv, s in zip(a, b, out, want, same) if not s][:8]
    assert (np.signbit(out) == np.signbit(want))[~np.isnan(want)].all()


@pytest.mark.parametrize("kernel,dtype,emax", [("fdiv32", np.float32, 38), ("fdiv64", np.float64, 308)])
def test_ieee_division_wide_exponent_sweep(basic, kernel, dtype, emax):
    rng = np.random.default_rng(11)
    for _ in range(6):
        a = (rng.uniform(1, 10, 64) * 10.0 ** rng.integers(-emax - 6, emax, 64) * rng.choice([-1, 1], 64)).astype(dtype)
        b = (rng.uniform(1, 10, 64) * 10.0 ** rng.integers(-emax - 6, emax, 64)).astype(dtype)
        out = np.zeros(64, dtype=dtype)
        basic.launch(kernel, grid=1, block=64, args=[a, b, out])
        with np.errstate(all="ignore"):
            want = a / b
        assert ((out == want) | (np.isnan(out) & np.isnan(want))).all(), [(x, y, o, w) for x, y, o, w in zip(a, b, out, want) if o != w][:5]


def test_fences_and_scoped_atomics(basic):
    p = torch.zeros(130, dtype=torch.int32)
    p[65] = 40
    basic.launch("fences", grid=1, block=64, args=[p])
    t = torch.arange(64)
    assert torch.equal(p[:64], (t + 1).int()) and p[64] == 5
    assert torch.equal(p[66:130], (40 + (((t + 1) & 63) + 1)).int())


def test_spin_wait_is_stopped_by_the_watchdog(build, arch, tmp_path):
    import subprocess
    import sys

    p = tmp_path / "k.hsaco"
    p.write_bytes(build(kernel_source("basic.hip"), arch))
    code = ("import sys, numpy as np, moonmath_emu as emu\n"
            f"m = emu.Module(open({str(p)!r}, 'rb').read())\n"
            "try:\n    m.launch('spin', grid=1, block=64, args=[np.zeros(1, np.int32)])\n"
            "except emu.EmuError as e:\n    print('stopped:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "MOONMATH_EMU_WAVE_BUDGET": "200000"})
    assert "stopped: wave ran 200000 instructions" in r.stdout, r.stderr
