"""Helpers of the gfx942 MHA tests: inputs, the float64 oracle, bf16 ulps at a row's scale."""
from __future__ import annotations

import math

import torch


def rand(shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(torch.bfloat16)


def qkv(B, H, Sq, Skv, layout="bhsd", seed=0, scale=1.0, D=128):
    sq = (B, H, Sq, D) if layout == "bhsd" else (B, Sq, H, D)
    sk = (B, H, Skv, D) if layout == "bhsd" else (B, Skv, H, D)
    return rand(sq, seed, scale), rand(sk, seed + 1, scale), rand(sk, seed + 2)


def oracle_fp64(q, k, v, layout="bhsd", softcap=0.0, sinks=None, window=(-1, -1)):
    """softmax(q k^T / sqrt(D)) v in float64, in q's layout; softcap > 0: s -> cap tanh(s / cap); sinks [H]:
    one more logit per row of head h whose value row is zero (gpt-oss); window (left, right), -1 unbounded:
    row i keeps keys max(0, d - left) .. min(Skv - 1, d + right), d = i + Skv - Sq (a row with none: 0)."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    Sq, Skv = s.shape[2], s.shape[3]
    seen = torch.ones(Sq, Skv, dtype=torch.bool)
    for i in range(Sq):   # row by row from the definition (independent of the reference's mask)
        d = i + Skv - Sq
        lo = 0 if window[0] < 0 else max(0, d - window[0])
        hi = Skv - 1 if window[1] < 0 else min(Skv - 1, d + window[1])
        seen[i] = False
        if lo <= hi:
            seen[i, lo:hi + 1] = True
    s = s.masked_fill(~seen, -math.inf)
    v = v.double()
    if sinks is not None:
        B, H, Sq = s.shape[:3]
        s = torch.cat([s, sinks.double().view(1, H, 1, 1).expand(B, H, Sq, 1)], dim=-1)
        v = torch.cat([v, torch.zeros_like(v[..., :1, :])], dim=-2)
    p = torch.softmax(s, dim=-1).masked_fill(~seen.any(-1, keepdim=True), 0.0)
    out = p @ v
    return out.transpose(1, 2) if layout == "bshd" else out


def bf16_ulp(x):
    """The bf16 ulp at |x| (float64), normal range."""
    e = torch.floor(torch.log2(x.abs().clamp_min(2.0 ** -126)))
    return torch.pow(2.0, e - 7)


def row_ulp(ref):
    """One bf16 ulp at the scale of each output row: ulp(max over the row's D outputs of |ref|) (finite ones)."""
    r = ref.double()
    return bf16_ulp(r.masked_fill(~torch.isfinite(r), 0).abs().amax(-1, keepdim=True))


def bits(t):
    return t.view(torch.int16)


def gfx942_metapackage():
    """moonmath_amd, when installed and the emulator targets gfx942 (else the test skips)."""
    import pytest

    ma = pytest.importorskip("moonmath_amd")
    from moonmath_common import target_arch

    if target_arch() != "gfx942":
        pytest.skip("the emulator targets another arch here")
    return ma
