"""An MXFP4 MoE layer end to end through moonmath_amd (reference backend): align -> gate/up with SiLU-GLU and
routed weights -> down -> sum over top_k, against a dense per-token loop over experts from stock weights."""
from __future__ import annotations

import pytest
import torch

import moonmath_amd as ma
from moonmath_common import use_backend
from moonmath_common.numerics import e8m0_to_f32, unpack_e2m1
from moonmath_common.testing import random_mxfp4_moe_weights


def dense(w, s):
    return unpack_e2m1(w).double() * e8m0_to_f32(s).double().repeat_interleave(32, -1)


@pytest.mark.parametrize("I", [384, 256])   # 256: the down kernel does not serve it -> gate/up with EPI_NONE
def test_moe_layer(I):
    g = torch.Generator().manual_seed(I)
    T, H, E, top_k = 5, 512, 6, 3
    x = torch.randn(T, H, generator=g).to(torch.bfloat16)
    w13, s13, w2, s2 = random_mxfp4_moe_weights(E, H, I, g, scales=(118, 124))
    ids = torch.stack([torch.randperm(E, generator=g)[:top_k] for _ in range(T)]).to(torch.int32)
    wts = torch.softmax(torch.randn(T, top_k, generator=g), -1)
    rows = T * top_k
    with use_backend("reference"):
        bm = 16   # planners need the package's _C; the reference accepts every legal block_m
        s, e, ntpp, nblk = ma.moe_align_block_size(ids, bm, E)
        h = torch.zeros(rows, I, dtype=torch.bfloat16)
        ma.mxfp4_moe_gateup(x, ma.repack_mxfp4(w13), ma.repack_mxfp4_scales(s13), h, wts, s, e, ntpp, nblk, bm, rows,
                            top_k, epilogue=ma.EPI_SITU, mul_routed_weight=True, situ_beta=4.0, situ_linear_beta=25.0)
        y = torch.zeros(rows, H, dtype=torch.bfloat16)
        B2, S2 = ma.repack_mxfp4(w2), ma.repack_mxfp4_scales(s2)
        if I in (384, 512, 768):
            ma.mxfp4_moe_down(h, B2, S2, y, None, s, e, ntpp, nblk, bm, 2, 2, rows, 1)
        else:
            ma.mxfp4_moe_gateup(h, B2, S2, y, None, s, e, ntpp, nblk, bm, rows, 1, epilogue=ma.EPI_NONE)
    out = y.double().view(T, top_k, H).sum(1)
    W13, W2 = dense(w13, s13), dense(w2, s2)
    ref = torch.zeros(T, H, dtype=torch.float64)
    for t in range(T):
        for j in range(top_k):
            ex = int(ids[t, j])
            a = W13[ex] @ x[t].double()
            gte, up = a[:I], a[I:]
            act = (4 * torch.tanh(gte / 4) * torch.sigmoid(gte)) * (25 * torch.tanh(up / 25)) * float(wts[t, j])
            act = act.to(torch.bfloat16).double()       # the layer stores the activation in bf16
            ref[t] += W2[ex] @ act
    rel = float((out - ref).abs().max() / ref.abs().max())
    assert rel < 2e-2, rel
