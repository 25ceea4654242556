"""gfx942 MHA forward, reference backend, against independent formulations (fp64 score matrices, SDPA)."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import moonmath_mha_gfx942 as mha
from moonmath_common import use_backend
from moonmath_common.numerics import bf16_bits, round_bf16


@pytest.fixture(autouse=True)
def _reference():
    with use_backend("reference"):
        yield


def rand(shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(torch.bfloat16)


def oracle_fp64(q, k, v, layout):
    """Explicit fp64 score matrices, one (b, h) at a time, BHSD internally."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    B, H, Sq, D = q.shape
    out = torch.empty(B, H, Sq, D, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            s = (q[b, h].double() @ k[b, h].double().T) / math.sqrt(128.0)
            p = torch.softmax(s, dim=-1)
            out[b, h] = p @ v[b, h].double()
    return out.transpose(1, 2) if layout == "bshd" else out


def bf16_ulp(x):
    """The bf16 ulp at |x| (fp64)."""
    e = torch.floor(torch.log2(x.abs().clamp_min(2.0 ** -126)))
    return torch.pow(2.0, e - 7)


def assert_rounded_from(out, exact, mode):
    """out is the bf16 `mode`-rounding of `exact` (fp64): within half a bf16 ulp (a whole one for RTZ) plus the
    fp32 accumulation error, and bit-identical to rounding the fp64 value for nearly every element."""
    err = (out.double() - exact).abs()
    bound = bf16_ulp(exact) * (1.0 if mode == "rtz" else 0.5) + 1e-5
    assert bool((err <= bound).all()), f"max excess {float((err - bound).max())}"
    same = bf16_bits(out) == bf16_bits(round_bf16(exact.float(), mode))
    assert float(same.float().mean()) > 0.98


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("mode", ["rtna", "rtne", "rtz"])
def test_against_fp64_scores(layout, mode):
    shape_q = (2, 3, 37, 128) if layout == "bhsd" else (2, 37, 3, 128)
    shape_k = (2, 3, 53, 128) if layout == "bhsd" else (2, 53, 3, 128)
    q, k, v = rand(shape_q, 1, 2.0), rand(shape_k, 2, 2.0), rand(shape_k, 3)
    out = mha.forward(q, k, v, layout=layout, round_mode=mode)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape and out.is_contiguous()
    assert_rounded_from(out, oracle_fp64(q, k, v, layout), mode)


def test_default_mode_is_rtna_and_modes_differ():
    q, k, v = rand((1, 2, 64, 128), 4), rand((1, 2, 64, 128), 5), rand((1, 2, 64, 128), 6)
    d = mha.forward(q, k, v)
    assert torch.equal(bf16_bits(d), bf16_bits(mha.forward(q, k, v, round_mode="rtna")))
    z = mha.forward(q, k, v, round_mode="rtz")
    assert not torch.equal(bf16_bits(d), bf16_bits(z))
    exact = oracle_fp64(q, k, v, "bhsd")
    # truncation never moves away from zero (allow the fp32 boundary cases of assert_rounded_from)
    assert float((z.double().abs() <= exact.abs() + 1e-6).float().mean()) > 0.99


def test_against_sdpa():
    q, k, v = rand((2, 4, 100, 128), 7), rand((2, 4, 30, 128), 8), rand((2, 4, 30, 128), 9)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())
    out = mha.forward(q, k, v, round_mode="rtne")
    assert_rounded_from(out, ref, "rtne")


def test_layouts_agree_bitwise_and_out_is_filled_in_place():
    q, k, v = rand((2, 3, 21, 128), 10), rand((2, 3, 9, 128), 11), rand((2, 3, 9, 128), 12)
    h = mha.forward(q, k, v)
    qs, ks, vs = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    out = torch.full_like(qs, 7.0)
    s = mha.forward(qs, ks, vs, layout="bshd", out=out)
    assert s is out
    assert torch.equal(bf16_bits(s.transpose(1, 2)), bf16_bits(h))


def test_nan_rows_are_canonical():
    q, k, v = rand((1, 2, 8, 128), 13), rand((1, 2, 8, 128), 14), rand((1, 2, 8, 128), 15)
    q[0, 1, 3, 5] = float("nan")
    for mode in ("rtna", "rtne", "rtz"):
        bits = bf16_bits(mha.forward(q, k, v, round_mode=mode))
        assert bool((bits[0, 1, 3] == 0x7FFF).all())
        mask = torch.ones_like(bits, dtype=torch.bool)
        mask[0, 1, 3] = False
        assert not bool((bits[mask] & 0x7F80 == 0x7F80).any())  # no NaN/Inf elsewhere


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 70), st.integers(1, 70),
       st.sampled_from(["bhsd", "bshd"]), st.sampled_from(["rtna", "rtne", "rtz"]), st.integers(0, 10_000))
def test_property_shapes(B, H, Sq, Skv, layout, mode, seed):
    sq = (B, H, Sq, 128) if layout == "bhsd" else (B, Sq, H, 128)
    sk = (B, H, Skv, 128) if layout == "bhsd" else (B, Skv, H, 128)
    q, k, v = rand(sq, seed, 3.0), rand(sk, seed + 1, 3.0), rand(sk, seed + 2)
    out = mha.forward(q, k, v, layout=layout, round_mode=mode)
    exact = oracle_fp64(q, k, v, layout)
    err = (out.double() - exact).abs()
    assert bool((err <= bf16_ulp(exact) * (1.0 if mode == "rtz" else 0.5) + 1e-5).all())
