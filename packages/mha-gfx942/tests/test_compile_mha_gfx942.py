"""gfx942 MHA forward traces under torch.compile(fullgraph=True) and matches eager bit for bit."""
from __future__ import annotations

import torch

import moonmath_mha_gfx942 as mha
from moonmath_common import use_backend


def test_compile_fullgraph():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 128, generator=g).to(torch.bfloat16) for n in (9, 17, 17))

    def f(q, k, v):
        out = torch.empty_like(q)
        a = mha.forward(q, k, v, round_mode="rtz", out=out)
        b = mha.forward(q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(),
                        v.transpose(1, 2).contiguous(), layout="bshd")
        return a * 2, b

    with use_backend("reference"):
        eager = f(q, k, v)
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    assert torch.equal(eager[0], compiled[0]) and torch.equal(eager[1], compiled[1])
