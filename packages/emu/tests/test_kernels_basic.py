"""Whole HIP kernels from tests/corpus run in the emulator: vector add, wave reductions (DPP,
ds_swizzle, ds_bpermute/permute), loops with divergent branches. Results against numpy."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_util import ARCHS, session_corpus  # noqa: E402

import moonmath_emu as emu  # noqa: E402


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return session_corpus(tmp_path_factory)


pytestmark = pytest.mark.parametrize("arch", ARCHS)


def test_module_metadata(corpus, arch):
    mod = corpus.module("vector_add", arch)
    assert mod.arch == arch
    assert set(mod.kernels) == {"vadd", "vadd_grid_stride", "fill_index"}
    info = mod.kernel_info("vadd")
    assert info["wavefront_size"] == 64
    assert [a["size"] for a in info["args"] if not a["value_kind"].startswith("hidden")] == [8, 8, 8, 4]


@pytest.mark.parametrize("n", [1, 63, 64, 1000, 4096])
def test_vector_add(corpus, arch, n):
    g = torch.Generator().manual_seed(n)
    a = torch.randn(n, generator=g)
    b = torch.randn(n, generator=g)
    c = torch.full((n,), -7.0)
    mod = corpus.module("vector_add", arch)
    blocks = (n + 255) // 256
    counters = mod.launch("vadd", grid=(blocks, 1, 1), block=(256, 1, 1), args=[a, b, c, n])
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    assert counters["workgroups"] == blocks
    assert counters["waves"] == blocks * 4
    assert counters["vmem"] > 0 and counters["wave_instructions"] > counters["vmem"]


def test_vector_add_grid_stride_reads_hidden_grid_size(corpus, arch):
    n = 5000
    a = torch.arange(n, dtype=torch.float32)
    b = torch.ones(n)
    c = torch.zeros(n)
    mod = corpus.module("vector_add", arch)
    # 3 blocks of 128: each work-item strides by grid size 384 (read from the hidden block_count_x)
    mod.launch("vadd_grid_stride", grid=(3, 1, 1), block=(128, 1, 1), args=[a, b, c, n])
    torch.testing.assert_close(c, 2 * a + b, rtol=0, atol=0)


def test_out_of_bounds_store_is_caught(corpus, arch):
    mod = corpus.module("vector_add", arch)
    out = torch.zeros(100, dtype=torch.int32)
    mod.launch("fill_index", grid=(1, 1, 1), block=(128, 1, 1), args=[out, 100])  # correct: clean
    assert torch.equal(out, torch.arange(100, dtype=torch.int32))
    with pytest.raises(emu.MemoryViolation) as ei:
        mod.launch("fill_index", grid=(1, 1, 1), block=(128, 1, 1), args=[out, 128])  # planted: 28 past the end
    msg = str(ei.value)
    assert "fill_index" in msg and "store" in msg.lower()


def _waves_input(n_waves: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1000, 1000, (n_waves * 64,), generator=g, dtype=torch.int32)


def test_reduce_dpp(corpus, arch):
    x = _waves_input(8, 1)
    out = torch.zeros(8, dtype=torch.int32)
    steps = torch.zeros(8 * 64 * 4, dtype=torch.int32)
    mod = corpus.module("wave_reduce", arch)
    mod.launch("reduce_dpp", grid=(2, 1, 1), block=(256, 1, 1), args=[x, out, steps])
    xv = x.view(8, 64).numpy().astype(np.int64)
    assert np.array_equal(out.numpy(), xv.sum(1))
    st = steps.view(8, 64, 4).numpy()
    lane = np.arange(64)
    # step 0: quad_perm [1,0,3,2] -> v + v[lane^1]
    s0 = xv + xv[:, lane ^ 1]
    assert np.array_equal(st[:, :, 0], s0)
    # step 1: quad_perm [2,3,0,1] -> + [lane^2]
    s1 = s0 + s0[:, lane ^ 2]
    assert np.array_equal(st[:, :, 1], s1)
    # step 2: row_ror:4 (rotate right within a row of 16: data moves to higher lanes, so lane l
    # reads lane (l - 4) mod 16 of its row, as row_shr:n reads l - n)
    src = (lane & ~15) | ((lane - 4) & 15)
    s2 = s1 + s1[:, src]
    assert np.array_equal(st[:, :, 2], s2)
    src = (lane & ~15) | ((lane - 8) & 15)
    assert np.array_equal(st[:, :, 3], s2 + s2[:, src])


def test_scan_row_dpp_bound_ctrl(corpus, arch):
    x = _waves_input(2, 2)
    out = torch.zeros_like(x)
    corpus.module("wave_reduce", arch).launch("scan_row_dpp", grid=(1, 1, 1), block=(128, 1, 1), args=[x, out])
    want = np.cumsum(x.view(-1, 16).numpy().astype(np.int64), axis=1).reshape(-1)
    assert np.array_equal(out.numpy(), want)


def test_reduce_swizzle(corpus, arch):
    x = _waves_input(4, 3)
    out = torch.zeros(4, dtype=torch.int32)
    corpus.module("wave_reduce", arch).launch("reduce_swizzle", grid=(1, 1, 1), block=(256, 1, 1), args=[x, out])
    assert np.array_equal(out.numpy(), x.view(4, 64).numpy().astype(np.int64).sum(1))


def test_reduce_bpermute(corpus, arch):
    x = _waves_input(4, 4)
    out = torch.zeros(4, dtype=torch.int32)
    first = torch.zeros_like(x)
    mod = corpus.module("wave_reduce", arch)
    mod.launch("reduce_bpermute", grid=(2, 1, 1), block=(128, 1, 1), args=[x, out, first])
    xv = x.view(4, 64).numpy().astype(np.int64)
    assert np.array_equal(out.numpy(), xv.sum(1))
    assert np.array_equal(first.view(4, 64).numpy(), xv + xv[:, np.arange(64) ^ 32])


def test_reverse_permute(corpus, arch):
    x = _waves_input(2, 5)
    out = torch.zeros_like(x)
    corpus.module("wave_reduce", arch).launch("reverse_permute", grid=(1, 1, 1), block=(128, 1, 1), args=[x, out])
    assert np.array_equal(out.view(2, 64).numpy(), x.view(2, 64).numpy()[:, ::-1])


def _collatz(v: int) -> tuple[int, int]:
    s, p = 0, v
    while v != 1 and s < 500:
        v = 3 * v + 1 if v & 1 else v >> 1
        v &= 0xFFFFFFFF
        p = max(p, v)
        s += 1
    return s, p


def test_collatz_loop_divergence(corpus, arch):
    n = 300
    g = torch.Generator().manual_seed(6)
    x = torch.randint(1, 5000, (n,), generator=g, dtype=torch.int32)
    steps = torch.full((n,), -1, dtype=torch.int32)
    peak = torch.full((n,), -1, dtype=torch.int32)
    counters = corpus.module("branches", arch).launch(
        "collatz", grid=(2, 1, 1), block=(256, 1, 1), args=[x, steps, peak, n])
    want = [_collatz(int(v)) for v in x]
    assert steps.tolist() == [s for s, _ in want]
    assert [p & 0xFFFFFFFF for p in peak.tolist()] == [p for _, p in want]
    assert counters["branch"] > 0


def test_classify_nested_branches(corpus, arch):
    n = 777
    g = torch.Generator().manual_seed(7)
    x = torch.randint(-50, 200, (n,), generator=g, dtype=torch.int32)
    out = torch.zeros(n, dtype=torch.int32)
    fout = torch.zeros(n)
    corpus.module("branches", arch).launch("classify", grid=(4, 1, 1), block=(256, 1, 1), args=[x, out, fout, n])
    want = []
    for i, v in enumerate(x.tolist()):
        if v < 0:
            r = -v if (i & 3) == 0 else v * 3
        elif v % 7 == 0:
            r = 1000 + (i & 15)
        else:
            r = [v >> 1, v ^ 0x55, v + i, -1][v & 3]
        want.append(r)
    assert out.tolist() == want
    xf = x.numpy().astype(np.float32)
    wf = np.where(np.arange(n) & 1, xf * np.float32(0.5), xf + np.float32(0.25))
    assert np.array_equal(fout.numpy(), wf)
