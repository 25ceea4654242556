"""The one-part fp8-Q x MXFP4-KV decode (csrc/device/gfx950/mla_q8_mxfp4_fwd.hip: H 16, q_len 1, no split, no DCP;
no public op) on the emulator: against its definition (reference.mla_decode_q8_mxfp4), against float64 over the
exact MXFP4 KV, the GPU MODE amd-mixed-mla check, ragged and empty requests, determinism, its code object."""
from __future__ import annotations

import torch
from _mla_formats import gpumode_check, gpumode_exact, gpumode_inputs, gpumode_run, quantize_mxfp4

from moonmath_common import use_backend
from moonmath_mla_decode import kernel as mk
from moonmath_mla_decode import reference as R

SCALE = 576 ** -0.5


def _case(lens, seed, slots=None):
    g = torch.Generator().manual_seed(seed)
    slots = slots or sum(lens) + 7
    codes, scales = quantize_mxfp4(torch.randn(slots, 576, generator=g))
    B = len(lens)
    return dict(q_lat=torch.randn(B, 16, 512, generator=g).bfloat16(),
                q_pe=torch.randn(B, 16, 64, generator=g).bfloat16(), pool=codes.view(-1, 1, 288).contiguous(),
                scales=scales.view(-1, 1, 18).contiguous(),
                seq_lens=torch.tensor(lens, dtype=torch.int32),
                kv_indices=torch.randperm(slots, generator=g)[:sum(lens)].to(torch.int32),
                kv_indptr=torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32))


def _run(x):
    """The kernel with the definition's Q quantisation (reference.quantize_q_a8w8: the a8w8 decode's rule)."""
    q8, q_scale = R.quantize_q_a8w8(x["q_lat"], x["q_pe"])
    B = x["seq_lens"].numel()
    o = torch.full((B, 16, 512), float("nan"), dtype=torch.bfloat16)
    lse = torch.full((B, 16), float("nan"))
    c_no_q = float(torch.tensor(SCALE * R.LOG2E, dtype=torch.float32))
    with use_backend("emu"):
        c = mk.KERNELS.launch("q8_mxfp4_fwd", "gfx950", "mla_q8_mxfp4_fwd", "mla_q8_mxfp4_fwd", grid=B, block=64,
                              args=[q8.to(torch.float8_e4m3fn).view(torch.uint8).contiguous(),
                                    torch.tensor([q_scale], dtype=torch.float32), x["pool"], x["scales"],
                                    x["kv_indices"], x["kv_indptr"], x["seq_lens"], o.view(torch.int16), lse,
                                    x["pool"].shape[0], 18, x["scales"].numel(), c_no_q])
    return o, lse, c


def _definition(x):
    return R.mla_decode_q8_mxfp4(x["q_lat"], x["q_pe"], x["pool"], x["scales"], x["seq_lens"], x["kv_indices"],
                                 x["kv_indptr"], SCALE, None, 0, 1)


def rel_fro(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def test_matches_its_definition(gfx950, lanes_checked):
    """Ragged lengths (several tiles, a partial tile, exactly one tile, shorter than a 32-token block, empty)."""
    lens = [300, 128, 17, 0, 257]
    x = _case(lens, seed=1)
    o, lse, c = _run(x)
    ro, rl = _definition(x)
    for b, n in enumerate(lens):
        if n == 0:
            assert torch.all(o[b] == 0) and torch.isneginf(lse[b]).all()
            continue
        # the scores differ from the float64 ones by fp32 accumulation only: measured bit-equal bf16 outputs
        assert rel_fro(o[b], ro[b]) < 1e-3, (b, rel_fro(o[b], ro[b]))
        assert (lse[b] - rl[b]).abs().max() < 1e-5
    tiles = sum(-(-n // 128) for n in lens)
    assert c["mfma_by_opcode"] == {"v_mfma_scale_f32_16x16x128_f8f6f4": tiles * (8 * 5 + 32)}


def test_close_to_float64_over_the_exact_kv(gfx950):
    x = _case([400, 96], seed=2)
    o, lse, _ = _run(x)
    ex, exl = R.mla_decode_mxfp4(x["q_lat"], x["q_pe"], x["pool"], x["scales"], x["seq_lens"], x["kv_indices"],
                                 x["kv_indptr"], SCALE, None, 0, 1)
    err = rel_fro(o, ex)  # fp8 Q and P against bf16 Q and fp32 P over the same KV: the a8w8 format's error level
    assert 5e-3 < err < 0.05, err
    assert (lse - exl).abs().max() < 0.05


def test_deterministic(gfx950):
    x = _case([200, 50], seed=3)
    o1, l1, _ = _run(x)
    o2, l2, _ = _run(x)
    assert torch.equal(o1, o2) and torch.equal(l1, l2)


def test_gpumode_check(gfx950):
    y = gpumode_inputs(2, 1024, 5412)
    ref = gpumode_run("a8w8", y, "reference")
    x = dict(q_lat=y["q_lat"], q_pe=y["q_pe"], pool=y["kv_mxfp4"].contiguous(),
             scales=y["kv_mxfp4_scales"].view(-1, 1, 18).contiguous(), seq_lens=y["seq_lens"],
             kv_indices=y["kv_indices"], kv_indptr=y["kv_indptr"])
    o, _, _ = _run(x)
    ok, worst = gpumode_check(o, ref)
    assert ok, worst
    ex = gpumode_exact(y)
    err, mx_err = rel_fro(o, ex), rel_fro(gpumode_run("mxfp4", y, "reference"), ex)
    print(f"GPU MODE B2 KV1024: check ratio {worst:.3f}, rel. error {err:.4f} (bf16-Q mxfp4 {mx_err:.4f})")
    assert err < 1.1 * mx_err


def test_code_object(gfx950):
    import moonmath_emu

    m = moonmath_emu.Module(mk.KERNELS.path("q8_mxfp4_fwd", "gfx950", "mla_q8_mxfp4_fwd").read_bytes())
    info = m.kernel_info("mla_q8_mxfp4_fwd")
    assert info["scratch"] == 0 and info["accum_offset"] + info["agpr"] <= 512 and info["lds"] <= 160 * 1024
