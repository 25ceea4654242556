"""gfx950 attention ops trace under torch.compile(fullgraph=True) and match eager bit for bit."""
from __future__ import annotations

import torch

import moonmath_attention_gfx950 as att
from moonmath_common import use_backend


def r(*shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def test_compile_forward_varlen_paged_plan():
    q, k, v = r(1, 6, 4, 192, seed=0), r(1, 9, 2, 192, seed=1), r(1, 9, 2, 128, seed=2)
    cu_q = torch.tensor([0, 2, 6], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 9], dtype=torch.int32)
    kc = r(4, 16, 2, 192, seed=3)
    vc = r(4, 16, 2, 128, seed=4)
    lens = torch.tensor([4, 20], dtype=torch.int32)
    indptr = torch.tensor([0, 1, 3], dtype=torch.int32)
    pages = torch.tensor([2, 0, 3], dtype=torch.int32)
    plan = att.VarlenPlan().plan(cu_q, cu_k, 4, 5, 6, 9, heads=4, kv_heads=2, causal=True)

    def f(q, k, v, kc, vc):
        o1, l1 = att.forward(q, k, v, layout="bshd", causal=True, return_lse=True)
        o2, l2 = att.forward_varlen(q[0], k[0], v[0], cu_q, cu_k, 4, 5, causal=True, return_lse=True)
        o3 = att.forward_paged(q[0], kc, vc, cu_q, lens, kv_indptr=indptr, kv_page_indices=pages, causal=True)
        o4 = plan.run(q[0], k[0], v[0])
        return o1, l1, o2, l2, o3, o4

    with use_backend("reference"):
        eager = f(q, k, v, kc, vc)
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, kc, vc)
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)
