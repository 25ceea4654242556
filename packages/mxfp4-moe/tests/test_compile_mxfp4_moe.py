"""The MoE ops, repack and moe_align_block_size trace under torch.compile(fullgraph=True) and match eager."""
from __future__ import annotations

import torch

import moonmath_mxfp4_moe as moe
from moonmath_common import use_backend


def test_compile_fullgraph():
    g = torch.Generator().manual_seed(0)
    T, K, N, E, top_k, Kd = 4, 256, 32, 3, 2, 384
    A = torch.randn(T, K, generator=g).to(torch.bfloat16)
    w13 = torch.randint(0, 256, (E, 2 * N, K // 2), generator=g, dtype=torch.int32).to(torch.uint8)
    s13 = torch.randint(122, 130, (E, 2 * N, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    w2 = torch.randint(0, 256, (E, N, Kd // 2), generator=g, dtype=torch.int32).to(torch.uint8)
    s2 = torch.randint(122, 130, (E, N, Kd // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    ids = torch.randint(0, E, (T, top_k), generator=g, dtype=torch.int32)
    wts = torch.rand(T, top_k, generator=g)
    A2 = torch.randn(T * top_k, Kd, generator=g).to(torch.bfloat16)

    def f(A, A2, ids, wts):
        B, Bs = moe.repack_mxfp4(w13), moe.repack_mxfp4_scales(s13)
        s, e, ntpp, nblk = moe.moe_align_block_size(ids, 16, E)
        C = torch.zeros(T * top_k, N, dtype=torch.bfloat16)
        moe.mxfp4_moe_gateup(A, B, Bs, C, wts, s, e, ntpp, nblk, 16, T * top_k, top_k, epilogue=moe.EPI_SITU,
                             mul_routed_weight=True, situ_beta=4.0, situ_linear_beta=25.0)
        D = torch.zeros(T * top_k, N, dtype=torch.bfloat16)
        moe.mxfp4_moe_down(A2, moe.repack_mxfp4(w2), moe.repack_mxfp4_scales(s2), D, wts, s, e, ntpp, nblk, 16, 1,
                           2, T * top_k, 1, mul_routed_weight=True)
        return C, D, s, e, ntpp

    with use_backend("reference"):
        eager = f(A, A2, ids, wts)
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(A, A2, ids, wts)
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)
