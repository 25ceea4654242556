"""The PV stage of the planned fp8-Q x MXFP4-KV decode (csrc/device/gfx950/mla_q8_mxfp4_pv.hip, no public op) on the
emulator: V re-expressed in fp8 per 32 tokens x 32 columns (reference.mxfp4_v_as_fp8) and P (fp8 with an E8M0 byte
per 32 tokens) x V' on v_mfma_scale_f32_16x16x128_f8f6f4, against float64; and the two stages chained with the
softmax on the host against the definition (reference.mla_decode_q8_mxfp4)."""
from __future__ import annotations

import math

import pytest
import torch
from _mla_formats import quantize_mxfp4
from test_q8_mxfp4_qk_stage import _stage as qk_stage

from moonmath_common import use_backend
from moonmath_common.numerics import e4m3fn_to_f32, e8m0_to_f32
from moonmath_mla_decode import kernel as mk
from moonmath_mla_decode import reference as R

TILE = 128


def _pool(slots, seed, spread=False):
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(slots, 576, generator=g)
    if spread:  # block scales 2^-14 .. 2^3 apart: some elements are rounded by the re-expression
        kv = kv * torch.exp2(torch.randint(-14, 4, (slots, 18), generator=g).float()).repeat_interleave(32, -1)
    codes, scales = quantize_mxfp4(kv)
    return codes.contiguous(), scales.contiguous(), g


def _pv(p8, p_scales, codes, scales, idx):
    """The stage's partial outputs summed (float64) for P fp8 [16, n_pad], its E8M0 bytes [16, n_pad / 32]."""
    n, n_pad = idx.numel(), p8.shape[1]
    tiles = n_pad // TILE
    out = torch.full((tiles, 16, 512), float("nan"))
    with use_backend("emu"):
        c = mk.KERNELS.launch("q8_mxfp4_pv_stage", "gfx950", "mla_q8_mxfp4_pv", "mla_q8_mxfp4_pv", grid=tiles,
                              block=64, args=[p8.view(torch.uint8).contiguous(), p_scales.contiguous(), codes, scales,
                                              idx, out, n, n_pad, codes.shape[0], scales.shape[-1], scales.numel()])
    return out.double().sum(0), c


@pytest.mark.parametrize("n,spread", [(128, False), (200, True)])
def test_pv_stage_matches_float64(gfx950, lanes_checked, n, spread):
    codes, scales, g = _pool(300, seed=n, spread=spread)
    idx = torch.randperm(300, generator=g)[:n].to(torch.int32)
    n_pad = TILE * math.ceil(n / TILE)
    p = torch.rand(16, n_pad, generator=g) * 256
    p[:, n:] = 0
    p8 = p.to(torch.float8_e4m3fn)
    ps = torch.randint(110, 128, (16, n_pad // 32), generator=g, dtype=torch.uint8)
    o, c = _pv(p8, ps, codes, scales, idx)
    v = R.mxfp4_v_as_fp8(codes.view(-1, 1, 288), scales.view(-1, 1, 18), idx.long())
    exact_v = R.mxfp4_rows(codes.view(-1, 1, 288), scales.view(-1, 1, 18))(idx.long())[:, :512].double()
    assert torch.equal(v, exact_v) != spread  # the spread pool exercises the re-expression's rounding
    w = (e4m3fn_to_f32(p8).double() * e8m0_to_f32(ps).double().repeat_interleave(32, -1))[:, :n]
    ref = w @ v
    assert ((o - ref).norm() / ref.norm()).item() < 1e-6
    assert c["mfma_by_opcode"] == {"v_mfma_scale_f32_16x16x128_f8f6f4": 32 * (n_pad // TILE)}


def test_stages_chained_reproduce_the_definition(gfx950, lanes_checked):
    """QK stage -> the definition's P on the host (E_b, fp8 p~, E8M0 bytes per 32 tokens) -> PV stage -> the
    normaliser: the definition's o within bf16 rounding (the scores differ from the float64 ones by fp32
    accumulation, which can move a p~ by one fp8 step)."""
    S, slots = 300, 400
    codes, scales, g = _pool(slots, seed=11)
    q_lat = torch.randn(1, 16, 512, generator=g).bfloat16()
    q_pe = torch.randn(1, 16, 64, generator=g).bfloat16()
    idx = torch.randperm(slots, generator=g)[:S].to(torch.int32)
    q8, q_scale = R.quantize_q_a8w8(q_lat, q_pe)
    s, _ = qk_stage(q8.view(16, 576), codes, scales, idx)
    c_qk = float(torch.tensor(576 ** -0.5 * R.LOG2E, dtype=torch.float32)) * q_scale
    x = s.double() * c_qk                                                        # [16, S] base-2 scores
    n_pad = TILE * math.ceil(S / TILE)
    xb = torch.nn.functional.pad(x, (0, n_pad - S), value=float("-inf")).view(16, -1, 32)
    E = torch.ceil(xb.amax(-1, keepdim=True))
    E = torch.where(torch.isneginf(E), torch.zeros_like(E), E)                  # padding blocks: P = 0
    p8 = torch.exp2(xb - E + R.Q8_MXFP4_P_OFFSET).float().to(torch.float8_e4m3fn).view(16, n_pad)
    rel = (E - R.Q8_MXFP4_P_OFFSET - E.amax(1, keepdim=True)).view(16, -1)       # <= -8
    ps = (rel + 127).clamp(min=0).to(torch.uint8)
    o_num, _ = _pv(p8, ps, codes, scales, idx)
    den = (e4m3fn_to_f32(p8).double() * e8m0_to_f32(ps).double().repeat_interleave(32, -1)).sum(-1, keepdim=True)
    o = (o_num / den).float().bfloat16()
    ref, _ = R.mla_decode_q8_mxfp4(q_lat, q_pe, codes.view(-1, 1, 288), scales.view(-1, 1, 18),
                                   torch.tensor([S], dtype=torch.int32), idx, torch.tensor([0, S], dtype=torch.int32),
                                   576 ** -0.5, None, 0, 1)
    err = ((o.double() - ref[0].double()).norm() / ref[0].double().norm()).item()
    print(f"chained stages vs the definition: rel. Frobenius {err:.2e}")
    assert err < 1e-3, err  # measured 0: the bf16 outputs are identical
