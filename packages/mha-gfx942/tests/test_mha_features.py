"""Issue 17's features on the gfx942 kernels (the mha_fwd_feat_* variants): attention sinks (gpt-oss) and the
logit soft-cap (Gemma 2), alone and combined, vs float64 at the bounds of test_mha_kernel.py (the seed's), every
rounding mode, BHSD and BSHD, dense and with the tail KV-split forced; the default kernels untouched by them
(a sink of -inf gives the default kernel's bits); bad arguments named; the metapackage's forward on gfx942.
"""
from __future__ import annotations

import math

import pytest
import torch
from _mha_testing import bits, gfx942_metapackage, oracle_fp64, qkv, row_ulp
from test_mha_kernel import check_fp64, forced_split

import moonmath_mha_gfx942 as mha
from moonmath_mha_gfx942 import kernel

MODES = ("rtna", "rtne", "rtz")
SHAPES = [(1, 2, 63, 65), (2, 3, 65, 383), (1, 1, 300, 130)]


def sinks_for(q, k, layout, cap, seed):
    """Per head: the median over rows of the (capped) scores' log-sum-exp, +- N(0, 1): a sink that takes a real
    share of most rows' denominator."""
    if layout == "bshd":
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if cap:
        s = cap * torch.tanh(s / cap)
    lse = torch.logsumexp(s, dim=-1).transpose(0, 1).reshape(q.shape[1], -1)
    g = torch.Generator().manual_seed(seed)
    return (lse.median(dim=1).values + torch.randn(q.shape[1], generator=g, dtype=torch.float64)).float()


FEATURES = {"sinks": (0.0, True), "softcap": (12.0, False), "softcap+sinks": (8.0, True)}


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", MODES)
def test_features_against_fp64(emu_backend, feature, shape, mode):
    cap, with_sinks = FEATURES[feature]
    B, H, Sq, Skv = shape
    layout = "bshd" if Sq % 2 else "bhsd"
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=sum(shape), scale=2.5)  # scores up to ~25: the cap binds
    sk = sinks_for(q, k, layout, cap, sum(shape)) if with_sinks else None
    out = mha.forward(q, k, v, round_mode=mode, layout=layout, softcap=cap, sinks=sk)
    ref = oracle_fp64(q, k, v, layout, cap, sk)
    check_fp64(out, ref, mode)
    # the feature changed the result (a kernel that ignored it would fail here)
    plain = oracle_fp64(q, k, v, layout)
    assert float(((plain - ref).abs() / row_ulp(ref)).max()) > 4 * 2.5


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("mode,layout", [("rtna", "bhsd"), ("rtne", "bshd"), ("rtz", "bhsd")])
def test_features_tail_split(emu_backend, feature, mode, layout):
    """The split items' parts run mha_fwd_split_feat_*: the soft-cap in every part, the sink in part 0 only."""
    cap, with_sinks = FEATURES[feature]
    B, H, Sq, Skv, cus = 1, 3, 385, 1000, 4
    forced_split(B, H, Sq, Skv, cus)
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=5, scale=2.5)
    sk = sinks_for(q, k, layout, cap, 5) if with_sinks else None
    out = torch.empty_like(q)
    launches = kernel.run(q, k, v, out, layout, mode, cus=cus, min_kv_blocks=4, sinks=sk, softcap=cap)
    assert len(launches) == 4
    check_fp64(out, oracle_fp64(q, k, v, layout, cap, sk), mode)
    unsplit = mha.forward(q, k, v, layout=layout, round_mode=mode, sinks=sk, softcap=cap)
    assert float(((out.double() - unsplit.double()).abs() / row_ulp(unsplit)).max()) <= 1.0


@pytest.mark.parametrize("mode", MODES)
def test_sink_of_minus_inf_is_the_default_kernel(emu_backend, mode):
    """exp2(-inf - M) = 0 and the rescale factor is exactly 1: the feature kernel then writes the default
    kernel's bits (its softmax is the same code), split and unsplit."""
    B, H, Sq, Skv = 1, 3, 385, 1000
    q, k, v = qkv(B, H, Sq, Skv, seed=6)
    sk = torch.full((H,), float("-inf"))
    plain = mha.forward(q, k, v, round_mode=mode)
    assert torch.equal(bits(mha.forward(q, k, v, round_mode=mode, sinks=sk)), bits(plain))
    a, b = torch.empty_like(q), torch.empty_like(q)
    kernel.run(q, k, v, a, "bhsd", mode, cus=4, min_kv_blocks=4, sinks=sk)
    kernel.run(q, k, v, b, "bhsd", mode, cus=4, min_kv_blocks=4)
    assert torch.equal(bits(a), bits(b))


def test_dominant_sink_and_saturated_cap(emu_backend):
    """A sink far above every score (the row's output shrinks by ~e^-30) and a cap the scores saturate."""
    B, H, Sq, Skv = 1, 2, 64, 130
    q, k, v = qkv(B, H, Sq, Skv, seed=7, scale=4.0)
    sk = torch.tensor([40.0, -3.0])
    out = mha.forward(q, k, v, round_mode="rtne", sinks=sk, softcap=1.0)
    check_fp64(out, oracle_fp64(q, k, v, "bhsd", 1.0, sk), "rtne")


def test_reference_backend_features():
    from moonmath_common import use_backend

    B, H, Sq, Skv = 2, 3, 40, 70
    q, k, v = qkv(B, H, Sq, Skv, layout="bshd", seed=8, scale=2.5)
    sk = sinks_for(q, k, "bshd", 6.0, 8)
    with use_backend("reference"):
        out = mha.forward(q, k, v, layout="bshd", round_mode="rtne", softcap=6.0, sinks=sk)
    check_fp64(out, oracle_fp64(q, k, v, "bshd", 6.0, sk), "rtne")


@pytest.mark.parametrize("softcap,err,match", [
    (-1.0, ValueError, "softcap"), (float("nan"), ValueError, "softcap"), (float("inf"), ValueError, "softcap"),
    (1e39, ValueError, "softcap"), ("x", TypeError, "softcap")])
def test_bad_softcap_is_named(softcap, err, match):
    q, k, v = qkv(1, 2, 8, 8, seed=9)
    with pytest.raises(err, match=match):
        mha.forward(q, k, v, softcap=softcap)


@pytest.mark.parametrize("sinks,err", [
    (torch.zeros(2, dtype=torch.bfloat16), TypeError), (torch.zeros(3), ValueError), (torch.zeros(1, 2), ValueError),
    ([0.0, 0.0], TypeError)])
def test_bad_sinks_are_named(sinks, err):
    q, k, v = qkv(1, 2, 8, 8, seed=9)
    with pytest.raises(err, match="sinks"):
        mha.forward(q, k, v, sinks=sinks)


def test_metapackage_forward_on_gfx942(emu_backend):
    ma = gfx942_metapackage()
    B, H, Sq, Skv = 1, 2, 63, 65
    q, k, v = qkv(B, H, Sq, Skv, layout="bshd", seed=10, scale=2.5)
    sk = sinks_for(q, k, "bshd", 8.0, 10)
    out = ma.forward(q, k, v, layout="bshd", softcap=8.0, sinks=sk)
    assert torch.equal(bits(out), bits(mha.forward(q, k, v, layout="bshd", softcap=8.0, sinks=sk)))
    check_fp64(out, oracle_fp64(q, k, v, "bshd", 8.0, sk), "rtna")
    with pytest.raises(ValueError, match="softcap"):
        ma.forward(q, k, v, layout="bshd", softcap=-2.0)
