"""The QK stage of the planned fp8-Q x MXFP4-KV decode (csrc/device/gfx950/mla_q8_mxfp4_qk.hip, no public op) on the
emulator: fp8 Q x the pool's E2M1 codes with their E8M0 scales on v_mfma_scale_f32_16x16x128_f8f6f4 (the 576 =
4.5 x 128 columns as 5 MFMAs, the tail zero-padded) against the float64 dot over the exact MXFP4 rows; a
partial last tile, slots past the pool, and the instruction mix. The mixed fp8 x fp4 pairing it relies on is the
emulator's derived, unverified one (docs/emulator.md)."""
from __future__ import annotations

import math

import pytest
import torch
from _mla_formats import quantize_mxfp4

from moonmath_common import use_backend
from moonmath_mla_decode import kernel as mk
from moonmath_mla_decode import reference as R


def _inputs(slots, n, seed, spread=False):
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(slots, 576, generator=g)
    if spread:  # blocks of very different scales (E8M0 bytes far apart)
        kv = kv * torch.exp2(torch.randint(-20, 8, (slots, 18), generator=g).float()).repeat_interleave(32, -1)
    codes, scales = quantize_mxfp4(kv)
    q8, _ = R.quantize_q_a8w8(torch.randn(1, 16, 512, generator=g).bfloat16(),
                              torch.randn(1, 16, 64, generator=g).bfloat16())
    idx = torch.randperm(slots, generator=g)[:n].to(torch.int32)
    return q8.view(16, 576), codes.contiguous(), scales.contiguous(), idx


def _stage(q8, codes, scales, idx, slots=None):
    n = idx.numel()
    s = torch.full((16, n), float("nan"))
    q8b = q8.to(torch.float8_e4m3fn).view(torch.uint8).contiguous()
    with use_backend("emu"):
        c = mk.KERNELS.launch("q8_mxfp4_qk_stage", "gfx950", "mla_q8_mxfp4_qk", "mla_q8_mxfp4_qk",
                              grid=math.ceil(n / 16), block=64,
                              args=[q8b, codes, scales, idx, s, n, codes.shape[0] if slots is None else slots,
                                    scales.shape[-1], scales.numel()])
    return s, c


def _exact(q8, codes, scales, idx):
    k = R.mxfp4_rows(codes.view(-1, 1, 288), scales.view(-1, 1, 18))(idx.long()).double()
    return q8.double() @ k.T


@pytest.mark.parametrize("n,spread", [(16, False), (37, False), (64, True)])
def test_qk_stage_matches_float64(gfx950, lanes_checked, n, spread):
    q8, codes, scales, idx = _inputs(80, n, seed=n, spread=spread)
    s, c = _stage(q8, codes, scales, idx)
    ref = _exact(q8, codes, scales, idx)
    # products exact, fp32 accumulation: relative error at fp32 level
    assert ((s.double() - ref).norm() / ref.norm()).item() < 1e-6
    assert c["mfma_by_opcode"] == {"v_mfma_scale_f32_16x16x128_f8f6f4": 5 * math.ceil(n / 16)}
    # n = 37: a partial last block, whose store is under `tok < n`; the MFMAs stay under the full EXEC (clang
    # sank them there once: stale Q lanes, caught by the lane checker)
    assert c["mfma_partial_exec"] == 0


def test_qk_stage_tail_columns_count(gfx950):
    """The 64 rope columns (512..575) enter through the fifth, half zero-padded MFMA: Q with only rope columns
    non-zero gives exactly the rope dot product (and zero without them)."""
    q8, codes, scales, idx = _inputs(40, 20, seed=7)
    rope_only = q8.clone()
    rope_only[:, :512] = 0
    s, _ = _stage(rope_only, codes, scales, idx)
    ref = _exact(rope_only, codes, scales, idx)
    assert ref.abs().max() > 0 and ((s.double() - ref).norm() / ref.norm()).item() < 1e-6
    lat_only = q8.clone()
    lat_only[:, 512:] = 0
    s2, _ = _stage(lat_only, codes, scales, idx)
    assert ((s2.double() - _exact(lat_only, codes, scales, idx)).norm() / s2.double().norm()).item() < 1e-6


def test_qk_stage_slots_past_the_pool_read_zero(gfx950):
    q8, codes, scales, idx = _inputs(40, 16, seed=3)
    bad = idx.clone()
    bad[5] = 1000  # past the pool
    s, _ = _stage(q8, codes, scales, bad)
    assert torch.all(s[:, 5] == 0)
    keep = [j for j in range(16) if j != 5]
    ref = _exact(q8, codes, scales, idx)[:, keep]
    assert ((s[:, keep].double() - ref).norm() / ref.norm()).item() < 1e-6
