"""torch.library.opcheck over every custom op of the specification (schema and declared mutations, fake
implementation vs the real one, autograd registration, AOT dispatch with dynamic shapes), reference backend."""
from __future__ import annotations

import pytest
import torch

import moonmath_amd as ma  # noqa: F401 - registers every moonmath:: op
from moonmath_common import use_backend

bf, i32, u8 = torch.bfloat16, torch.int32, torch.uint8


def r(*shape, seed=0, dtype=bf):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def cases():
    q, k, v = r(1, 4, 5, 128, seed=1), r(1, 2, 7, 128, seed=2), r(1, 2, 7, 128, seed=3)
    qq = r(1, 2, 5, 128, seed=4)
    cu_q = torch.tensor([0, 2, 5], dtype=i32)
    cu_k = torch.tensor([0, 3, 7], dtype=i32)
    qt, kt, vt = q[0].transpose(0, 1).contiguous(), k[0].transpose(0, 1).contiguous(), v[0].transpose(0, 1).contiguous()
    kc, vc = r(3, 8, 2, 128, seed=5), r(3, 8, 2, 128, seed=6)
    T, H = 4, 3
    pool = r(20, 1, 576, seed=7, dtype=torch.float32).to(torch.float8_e4m3fnuz)
    ids = torch.tensor([[0, 1], [2, 1], [1, 3]], dtype=i32)
    s, e, ntpp, nblk = ma.moe_align_block_size(ids, 16, 4)
    B = ma.repack_mxfp4(torch.randint(0, 256, (4, 64, 128), dtype=torch.int32).to(u8))
    Bs = ma.repack_mxfp4_scales(torch.randint(120, 130, (4, 64, 8), dtype=torch.int32).to(u8))
    B2 = ma.repack_mxfp4(torch.randint(0, 256, (4, 32, 192), dtype=torch.int32).to(u8))
    Bs2 = ma.repack_mxfp4_scales(torch.randint(120, 130, (4, 32, 12), dtype=torch.int32).to(u8))
    w = torch.rand(3, 2)
    return {
        "mha_gfx942_forward": (qq, qq, qq, torch.empty_like(qq), "bshd", "rtz"),
        "attention_gfx950_forward": (q, k, v, torch.empty_like(q), torch.empty(1, 4, 5), "bhsd", True, 0.1),
        "attention_gfx950_forward_varlen": (qt, kt, vt, cu_q, cu_k, 3, 4, torch.empty_like(qt), torch.empty(4, 5),
                                            True, 0.1, cu_q.clone(), None),
        "attention_gfx950_forward_paged": (qt, kc, vc, cu_q, torch.tensor([3, 9], dtype=i32),
                                           torch.tensor([0, 1, 3], dtype=i32), torch.tensor([2, 0, 1], dtype=i32),
                                           None, torch.empty_like(qt), None, False, 0.1),
        "mla_decode_a16w8": (r(T, H, 512, seed=8), r(T, H, 64, seed=9), pool, torch.empty(T, H, 512, dtype=bf),
                             torch.tensor([9, 6], dtype=i32), torch.randperm(20)[:15].to(i32),
                             torch.tensor([0, 9, 15], dtype=i32), 0.05, 0.5, torch.empty(T, H), None, 0, 1),
        "mla_decode_a16w16": (r(T, H, 512, seed=12), r(T, H, 64, seed=13), r(20, 1, 576, seed=14),
                              torch.empty(T, H, 512, dtype=bf), torch.tensor([9, 6], dtype=i32),
                              torch.randperm(20)[:15].to(i32), torch.tensor([0, 9, 15], dtype=i32), 0.05,
                              torch.empty(T, H), None, 0, 1),
        "mla_decode_a8w8": (r(T, H, 512, seed=15), r(T, H, 64, seed=16), r(20, 1, 576, seed=17).to(torch.float8_e4m3fn),
                            torch.empty(T, H, 512, dtype=bf), torch.tensor([9, 6], dtype=i32),
                            torch.randperm(20)[:15].to(i32), torch.tensor([0, 9, 15], dtype=i32), 0.05, 0.5,
                            torch.empty(T, H), None, 0, 1),
        "mla_decode_mxfp4": (r(T, H, 512, seed=18), r(T, H, 64, seed=19),
                             torch.randint(0, 256, (20, 1, 288), dtype=torch.int32).to(u8),
                             torch.randint(120, 130, (20, 18), dtype=torch.int32).to(u8),
                             torch.empty(T, H, 512, dtype=bf), torch.tensor([9, 6], dtype=i32),
                             torch.randperm(20)[:15].to(i32), torch.tensor([0, 9, 15], dtype=i32), 0.05,
                             torch.empty(T, H), None, 0, 1),
        "mxfp4_moe_gateup": (r(3, 256, seed=10), B, Bs, torch.zeros(6, 32, dtype=bf), w, s, e, ntpp, nblk, 16, 6, 2,
                             1, True, 4.0, 25.0),
        "mxfp4_moe_down": (r(6, 384, seed=11), B2, Bs2, torch.zeros(6, 32, dtype=bf), w, s, e, ntpp, nblk, 16, 1, 2,
                           6, 1, True),
    }


@pytest.mark.parametrize("name", sorted(cases()))
def test_opcheck(name):
    op = getattr(torch.ops.moonmath, name).default
    utils = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    if name in ("mla_decode_a16w8", "mla_decode_a8w8"):
        # torch's schema checker compares inputs with arithmetic that has no fp8 CPU kernel; the mutation
        # declarations of this op are checked by test_mla_mutates_only_declared_args instead
        utils = utils[1:]
    with use_backend("reference"):
        torch.library.opcheck(op, cases()[name], test_utils=utils)


def test_mla_mutates_only_declared_args():
    args = cases()["mla_decode_a16w8"]
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    with use_backend("reference"):
        torch.ops.moonmath.mla_decode_a16w8.default(*args)
    for i, (a, b) in enumerate(zip(args, before)):
        if isinstance(a, torch.Tensor) and i not in (3, 9):       # o_lat and lse are declared mutable
            assert torch.equal(a.view(torch.uint8) if a.dtype == torch.float8_e4m3fnuz else a,
                               b.view(torch.uint8) if b.dtype == torch.float8_e4m3fnuz else b), i
    schema = torch.ops.moonmath.mla_decode_a16w8.default._schema
    mutable = [x.name for x in schema.arguments if x.alias_info is not None and x.alias_info.is_write]
    assert mutable == ["o_lat", "lse"]
