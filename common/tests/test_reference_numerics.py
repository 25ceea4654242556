"""moonmath_common.numerics: bf16 rounding rules, fp8 / E2M1 / E8M0 decoding, the reference attention core."""
from __future__ import annotations

import math
import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moonmath_common import numerics as nm


def _bits_f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _round_scalar(x: float, mode: str) -> int:
    """bf16 bits of fp32 x by the rule, written from the definition (exact rationals, not bit tricks)."""
    if math.isnan(x):
        return 0x7FFF
    u = _bits_f32(x)
    hi, lo = u >> 16, u & 0xFFFF
    if mode == "rtz" or lo == 0:
        return hi
    if math.isinf(x):
        return hi
    if mode == "rtna":
        return hi + (1 if lo >= 0x8000 else 0)
    if lo > 0x8000 or (lo == 0x8000 and hi & 1):
        return hi + 1
    return hi


SPECIAL = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 3.3961e38, -3.3961e38, 3.4028234e38,
           1e-40, -1e-40, 1.00390625, 1.01171875, -1.00390625, 1.0 + 2 ** -8 + 2 ** -20]


@pytest.mark.parametrize("mode", nm.ROUND_MODES)
def test_round_bf16_specials(mode):
    x = torch.tensor(SPECIAL, dtype=torch.float32)
    got = nm.bf16_bits(nm.round_bf16(x, mode)).tolist()
    want = [_round_scalar(float(v), mode) & 0xFFFF for v in x.tolist()]
    assert got == want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=64),
       st.sampled_from(nm.ROUND_MODES))
def test_round_bf16_matches_definition(vals, mode):
    x = torch.tensor(vals, dtype=torch.float32)
    got = nm.bf16_bits(nm.round_bf16(x, mode)).tolist()
    want = [_round_scalar(float(v), mode) & 0xFFFF for v in x.tolist()]
    assert got == want


def test_rtne_equals_torch_cast_and_nan_is_canonical():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(100_000, generator=g) * torch.exp(torch.randn(100_000, generator=g) * 30)
    x[::97] = float("nan")
    x[1::97] = -float("nan")
    ours = nm.bf16_bits(nm.round_bf16(x, "rtne"))
    theirs = nm.bf16_bits(x.to(torch.bfloat16))
    nan = torch.isnan(x)
    assert torch.equal(ours[~nan], theirs[~nan])
    assert bool((ours[nan] == 0x7FFF).all())


def test_rtz_nan_with_zero_high_mantissa_stays_nan():
    x = torch.tensor([0x7F800001, 0xFF800001], dtype=torch.int64).to(torch.int32).view(torch.float32)
    for mode in nm.ROUND_MODES:
        assert nm.bf16_bits(nm.round_bf16(x, mode)).tolist() == [0x7FFF, 0x7FFF]


def test_round_bf16_rejects_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        nm.round_bf16(torch.zeros(1), "rne")


def _fp8_by_formula(b: int, bias: int, fnuz: bool) -> float:
    if fnuz and b == 0x80:
        return float("nan")
    if not fnuz and (b & 0x7F) == 0x7F:
        return float("nan")
    s = -1.0 if b & 0x80 else 1.0
    e, m = (b >> 3) & 0xF, b & 7
    return s * (m / 8 * 2.0 ** (1 - bias) if e == 0 else (1 + m / 8) * 2.0 ** (e - bias))


@pytest.mark.parametrize("dtype,fn,bias,fnuz,mx", [
    (torch.float8_e4m3fnuz, nm.e4m3fnuz_to_f32, 8, True, 240.0),
    (torch.float8_e4m3fn, nm.e4m3fn_to_f32, 7, False, 448.0)])
def test_fp8_decoding(dtype, fn, bias, fnuz, mx):
    raw = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    got = fn(raw.view(dtype))
    want = torch.tensor([_fp8_by_formula(b, bias, fnuz) for b in range(256)])
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    ok = ~torch.isnan(want)
    assert torch.equal(got[ok], want[ok])
    assert torch.equal(got[ok], raw.view(dtype).float()[ok])  # torch's own conversion agrees
    assert float(got[ok].max()) == mx
    assert torch.allclose(fn(raw), got, rtol=0, atol=0, equal_nan=True)  # raw bytes accepted too
    with pytest.raises(TypeError, match="x must have dtype"):
        fn(torch.zeros(2))


def test_e2m1_e8m0():
    codes = torch.arange(16, dtype=torch.uint8)
    assert nm.e2m1_to_f32(codes).tolist() == [0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6]
    packed = torch.tensor([[0x21, 0xF8]], dtype=torch.uint8)    # k0=1 (0.5), k1=2 (1.0), k2=8 (-0), k3=15 (-6)
    assert nm.unpack_e2m1(packed).tolist() == [[0.5, 1.0, -0.0, -6.0]]
    e = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    v = nm.e8m0_to_f32(e)
    assert v[:6].tolist() == [2.0 ** -127, 2.0 ** -126, 0.5, 1.0, 2.0, 2.0 ** 127]
    assert math.isnan(float(v[6]))
    with pytest.raises(TypeError, match="scales"):
        nm.e8m0_to_f32(torch.zeros(2))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(0, 9), st.integers(0, 9), st.booleans(), st.integers(0, 2**31 - 1))
def test_softmax_attention_vs_fp64_loop(G, Sq, Skv, masked, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(G, n, 8, generator=gen) for n in (Sq, Skv, Skv))
    end = torch.randint(-1, Skv + 2, (G, Sq), generator=gen) if masked else None
    o, lse = nm.softmax_attention(q, k, v, 0.3, end, chunk_elems=7)
    for g in range(G):
        for i in range(Sq):
            n = Skv if end is None else max(0, min(Skv, int(end[g, i])))
            if n == 0:
                assert torch.all(o[g, i] == 0) and lse[g, i] == float("-inf")
                continue
            s = [0.3 * float(q[g, i].double() @ k[g, j].double()) for j in range(n)]
            m = max(s)
            w = [math.exp(x - m) for x in s]
            ref = sum(wj * v[g, j].double() for j, wj in enumerate(w)) / sum(w)
            assert torch.allclose(o[g, i].double(), ref, atol=1e-5, rtol=1e-5)
            assert abs(float(lse[g, i]) - (m + math.log(sum(w)))) < 1e-4
