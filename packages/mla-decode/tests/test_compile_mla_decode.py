"""mla_decode_a16w8 traces under torch.compile(fullgraph=True) and matches eager bit for bit."""
from __future__ import annotations

import torch

from moonmath_common import use_backend
from moonmath_mla_decode.decode import mla_decode_a16w8


def test_compile_fullgraph():
    g = torch.Generator().manual_seed(0)
    B, q_len, H, S = 2, 2, 3, 9
    q_lat = torch.randn(B * q_len, H, 512, generator=g).to(torch.bfloat16)
    q_pe = torch.randn(B * q_len, H, 64, generator=g).to(torch.bfloat16)
    pool = torch.randn(B * S, 1, 576, generator=g).to(torch.float8_e4m3fnuz)
    idx = torch.randperm(B * S, generator=g).to(torch.int32)
    ip = torch.arange(B + 1, dtype=torch.int32) * S
    lens = torch.full((B,), S, dtype=torch.int32)
    glen = torch.tensor([17, 18], dtype=torch.int32)

    def f(q_lat, q_pe, pool):
        o1 = torch.empty_like(q_lat)
        mla_decode_a16w8(q_lat, q_pe, pool, o1, lens, idx, ip, 0.05, 0.5)
        o2 = torch.empty_like(q_lat)
        lse = torch.empty(B * q_len, H)
        mla_decode_a16w8(q_lat, q_pe, pool, o2, lens, idx, ip, 0.05, 0.5, lse=lse, glen=glen, cp_rank=1, cp_world=2)
        return o1, o2, lse

    with use_backend("reference"):
        eager = f(q_lat, q_pe, pool)
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q_lat, q_pe, pool)
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)
