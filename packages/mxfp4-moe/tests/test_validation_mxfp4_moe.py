"""MXFP4 MoE: every argument of the GEMMs, the repack, moe_align_block_size and the planners rejects bad
input with a TypeError/ValueError naming it."""
from __future__ import annotations

import pytest
import torch

import moonmath_mxfp4_moe as moe
from moonmath_common import use_backend

u8, bf, i32 = torch.uint8, torch.bfloat16, torch.int32
T, K, N, E, TOPK = 3, 256, 32, 4, 2


def gateup_args(epilogue=moe.EPI_NONE):
    nb = 2 * N if epilogue == moe.EPI_SITU else N
    ids = torch.tensor([[0, 1], [1, 2], [3, 0]], dtype=i32)
    s, e, ntpp, nblk = moe.moe_align_block_size(ids, 16, E)
    return dict(A=torch.zeros(T, K, dtype=bf), B=torch.zeros(E, K // 32, nb, 16, dtype=u8),
                Bs=torch.full((E, K // 32, nb), 127, dtype=u8), C=torch.zeros(T * TOPK, N, dtype=bf),
                topk_weights=torch.ones(T, TOPK), sorted_token_ids=s, expert_ids=e, num_tokens_post_padded=ntpp,
                num_m_blocks=nblk, block_m=16, num_valid_tokens=T * TOPK, top_k=TOPK, epilogue=epilogue)


COMMON = [
    ("A type", dict(A=None), TypeError, "A must be a torch.Tensor"),
    ("A dtype", dict(A=torch.zeros(T, K)), TypeError, "A must have dtype bfloat16"),
    ("A rank", dict(A=torch.zeros(T, K, 1, dtype=bf)), ValueError, "A must be 2-D"),
    ("A k stride", dict(A=torch.zeros(K, T, dtype=bf).t()), ValueError, "A must have a contiguous last dim"),
    ("A rows", dict(A=torch.zeros(2, K, dtype=bf)),
     ValueError, "A must have at least ceil\\(num_valid_tokens / top_k\\)"),
    ("A K vs B", dict(A=torch.zeros(T, 2 * K, dtype=bf)), ValueError, "B must have K/32 = 16 scale groups"),
    ("B dtype", dict(B=torch.zeros(E, K // 32, N, 16, dtype=torch.int8)), TypeError, "B must have dtype uint8"),
    ("B stock layout", dict(B=torch.zeros(E, N, K // 2, dtype=u8)), ValueError, "repack_mxfp4"),
    ("B granule", dict(B=torch.zeros(E, K // 32, N, 8, dtype=u8)), ValueError, "B must be \\[E, K/32, N, 16\\]"),
    ("B contiguous", dict(B=torch.zeros(E, N, K // 32, 16, dtype=u8).transpose(1, 2)),
     ValueError, "B must be contiguous"),
    ("Bs dtype", dict(Bs=torch.zeros(E, K // 32, N)), TypeError, "Bs must have dtype uint8"),
    ("Bs shape", dict(Bs=torch.zeros(E, K // 32, N + 1, dtype=u8)), ValueError, "Bs must have shape"),
    ("Bs rank", dict(Bs=torch.zeros(E, K // 32, N, 1, dtype=u8)), ValueError, "Bs must be 3-D"),
    ("C dtype", dict(C=torch.zeros(T * TOPK, N)), TypeError, "C must have dtype bfloat16"),
    ("C rows", dict(C=torch.zeros(T * TOPK - 1, N, dtype=bf)), ValueError, "C must have at least num_valid_tokens"),
    ("C contiguous", dict(C=torch.zeros(N, T * TOPK, dtype=bf).t()), ValueError, "C must be contiguous"),
    ("topk_weights dtype", dict(topk_weights=torch.ones(T, TOPK, dtype=torch.float64), mul_routed_weight=True),
     TypeError, "topk_weights must have dtype float32 or bfloat16"),
    ("topk_weights int", dict(topk_weights=torch.ones(T, TOPK, dtype=i32)), TypeError, "topk_weights must have dtype"),
    ("topk_weights size", dict(topk_weights=torch.ones(T), mul_routed_weight=True), ValueError,
     "topk_weights must have at least num_valid_tokens"),
    ("topk_weights missing", dict(topk_weights=None, mul_routed_weight=True), ValueError,
     "topk_weights is required when mul_routed_weight"),
    ("topk_weights contiguous", dict(topk_weights=torch.ones(TOPK, T).t()), ValueError,
     "topk_weights must be contiguous"),
    ("expert_ids dtype", dict(expert_ids=torch.zeros(8, dtype=torch.int64)),
     TypeError, "expert_ids must have dtype int32"),
    ("expert_ids short", dict(expert_ids=torch.zeros(1, dtype=i32)), ValueError, "expert_ids must have at least"),
    ("expert_ids range", dict(expert_ids=torch.full((10,), E, dtype=i32)), ValueError, "expert_ids values must be < 4"),
    ("num_tokens_post_padded dtype", dict(num_tokens_post_padded=torch.zeros(1, dtype=torch.int64)), TypeError,
     "num_tokens_post_padded must have dtype int32"),
    ("num_tokens_post_padded shape", dict(num_tokens_post_padded=torch.zeros(2, dtype=i32)), ValueError,
     "num_tokens_post_padded must have shape \\[1\\]"),
    ("num_tokens_post_padded negative", dict(num_tokens_post_padded=torch.full((1,), -16, dtype=i32)), ValueError,
     "num_tokens_post_padded values must be >= 0"),
    ("num_m_blocks type", dict(num_m_blocks=2.0), TypeError, "num_m_blocks must be an int"),
    ("num_m_blocks negative", dict(num_m_blocks=-1), ValueError, "num_m_blocks must be in"),
    ("num_valid_tokens negative", dict(num_valid_tokens=-1), ValueError, "num_valid_tokens must be in"),
    ("num_valid_tokens type", dict(num_valid_tokens=None), TypeError, "num_valid_tokens must be an int"),
    ("top_k zero", dict(top_k=0), ValueError, "top_k must be in"),
    ("top_k 2**32+1", dict(top_k=2**32 + 1), ValueError, "top_k must be in \\[1, 4294967295\\]"),
    ("num_valid_tokens 2**32", dict(num_valid_tokens=2**32), ValueError, "num_valid_tokens must be in"),
    ("num_m_blocks 2**31", dict(num_m_blocks=2**31), ValueError, "num_m_blocks must be in"),
    ("top_k type", dict(top_k=2.0), TypeError, "top_k must be an int"),
    ("mul_routed_weight type", dict(mul_routed_weight=1), TypeError, "mul_routed_weight must be a bool"),
    ("device mix", dict(topk_weights=torch.ones(T, TOPK, device="meta")), ValueError, "device"),
]

GATEUP = COMMON + [
    ("block_m 24", dict(block_m=24), ValueError, "block_m must be 16, 32 or 48; got 24"),
    ("block_m 64", dict(block_m=64), ValueError, "block_m must be 16, 32 or 48"),
    ("block_m type", dict(block_m="16"), TypeError, "block_m must be an int"),
    ("sorted_token_ids dtype", dict(sorted_token_ids=torch.zeros(160, dtype=torch.int64)), TypeError,
     "sorted_token_ids must have dtype int32"),
    ("sorted_token_ids negative", dict(sorted_token_ids=torch.full((160,), -1, dtype=i32)), ValueError,
     "sorted_token_ids values must be >= 0"),
    ("K not multiple of 32", dict(A=torch.zeros(T, 48, dtype=bf), B=torch.zeros(E, 1, N, 16, dtype=u8),
                                  Bs=torch.zeros(E, 1, N, dtype=u8)), ValueError, "B must have K/32"),
    ("epilogue value", dict(epilogue=3), ValueError, "epilogue must be one of"),
    ("epilogue type", dict(epilogue="situ"), TypeError, "epilogue must be an int"),
    ("C columns none", dict(C=torch.zeros(T * TOPK, N + 1, dtype=bf)), ValueError, "with EPI_NONE, C must have B's N"),
    ("situ_beta zero", dict(situ_beta=0.0), ValueError, "situ_beta must be > 0"),
    ("situ_beta type", dict(situ_beta="4"), TypeError, "situ_beta must be a float"),
    ("situ_linear_beta nan", dict(situ_linear_beta=float("nan")), ValueError, "situ_linear_beta must be finite"),
]


@pytest.mark.parametrize("name,change,exc,msg", GATEUP, ids=[c[0] for c in GATEUP])
def test_gateup_rejects(name, change, exc, msg):
    a = gateup_args()
    a.update(change)
    with use_backend("reference"), pytest.raises(exc, match=msg):
        moe.mxfp4_moe_gateup(**a)


def test_gateup_situ_columns():
    a = gateup_args(moe.EPI_SITU)
    a["C"] = torch.zeros(T * TOPK, 2 * N, dtype=bf)
    with use_backend("reference"), pytest.raises(ValueError, match="with EPI_SITU, B must have 2 \\* N columns"):
        moe.mxfp4_moe_gateup(**a)
    with use_backend("reference"):
        moe.mxfp4_moe_gateup(**gateup_args(moe.EPI_SITU))
        moe.mxfp4_moe_gateup(**gateup_args())


def down_args(Kd=384):
    a = gateup_args()
    a["A"] = torch.zeros(T * TOPK, Kd, dtype=bf)
    a["B"] = torch.zeros(E, Kd // 32, N, 16, dtype=u8)
    a["Bs"] = torch.full((E, Kd // 32, N), 127, dtype=u8)
    a.pop("epilogue")
    a.update(top_k=1, n_steps=1, nt=1)
    return a


DOWN = [c for c in COMMON if c[0] not in ("A rows", "A K vs B", "B stock layout")] + [
    ("A rows", dict(A=torch.zeros(5, 384, dtype=bf)), ValueError, "A must have at least ceil"),
    ("B stock layout", dict(B=torch.zeros(E, N, 192, dtype=u8)), ValueError, "repack_mxfp4"),
    ("K 256", dict(A=torch.zeros(T * TOPK, 256, dtype=bf), B=torch.zeros(E, 8, N, 16, dtype=u8),
                   Bs=torch.zeros(E, 8, N, dtype=u8)), ValueError, "K \\(A.shape\\[1\\]\\) must be 384, 512 or 768"),
    ("block_m 48", dict(block_m=48), ValueError, "block_m must be 16, 32 or 64; got 48"),
    ("block_m 64 at K 512", dict(block_m=64, A=torch.zeros(T * TOPK, 512, dtype=bf),
                                 B=torch.zeros(E, 16, N, 16, dtype=u8), Bs=torch.zeros(E, 16, N, dtype=u8),
                                 sorted_token_ids=torch.zeros(640, dtype=i32)), ValueError, "block_m 64 needs K = 384"),
    ("sorted_token_ids dtype", dict(sorted_token_ids=torch.zeros(160)), TypeError,
     "sorted_token_ids must have dtype int32"),
    ("num_tokens_post_padded 2-D", dict(num_tokens_post_padded=torch.zeros(1, 1, dtype=i32)), ValueError,
     "num_tokens_post_padded must have shape"),
    ("n_steps 2**32+1", dict(n_steps=2**32 + 1), ValueError, "n_steps must be in \\[1, 4294967295\\]"),
    ("n_steps zero", dict(n_steps=0), ValueError, "n_steps must be in"),
    ("n_steps type", dict(n_steps=1.5), TypeError, "n_steps must be an int"),
    ("nt 3", dict(nt=3), ValueError, "nt must be one of 1, 2"),
    ("nt type", dict(nt=None), TypeError, "nt must be an int"),
    ("nt 2 odd N", dict(nt=2, B=torch.zeros(E, 12, 33, 16, dtype=u8), Bs=torch.zeros(E, 12, 33, dtype=u8),
                        C=torch.zeros(T * TOPK, 33, dtype=bf)), ValueError, "nt = 2 needs an even N"),
    ("C columns", dict(C=torch.zeros(T * TOPK, N + 2, dtype=bf)), ValueError, "C must have B's N"),
]


@pytest.mark.parametrize("name,change,exc,msg", DOWN, ids=[c[0] for c in DOWN])
def test_down_rejects(name, change, exc, msg):
    a = down_args()
    a.update(change)
    with use_backend("reference"), pytest.raises(exc, match=msg):
        moe.mxfp4_moe_down(**a)


def test_down_valid_runs():
    with use_backend("reference"):
        for Kd in (384, 512, 768):
            moe.mxfp4_moe_down(**down_args(Kd))


@pytest.mark.parametrize("fn,arg,exc,msg", [
    (moe.repack_mxfp4, torch.zeros(2, 4, 16), TypeError, "B must have dtype uint8"),
    (moe.repack_mxfp4, torch.zeros(4, 16, dtype=u8), ValueError, "B must be 3-D"),
    (moe.repack_mxfp4, torch.zeros(2, 4, 24, dtype=u8), ValueError, "K/2 a multiple of 16"),
    (moe.repack_mxfp4, "w", TypeError, "B must be a torch.Tensor"),
    (moe.repack_mxfp4_scales, torch.zeros(2, 4, 1), TypeError, "Bs must have dtype uint8"),
    (moe.repack_mxfp4_scales, torch.zeros(4, 1, dtype=u8), ValueError, "Bs must be 3-D"),
    (moe.unrepack_mxfp4, torch.zeros(2, 1, 4, 8, dtype=u8), ValueError, "B must be \\[E, K/32, N, 16\\]"),
    (moe.unrepack_mxfp4, torch.zeros(2, 4, 16, dtype=u8), ValueError, "B must be 4-D"),
    (moe.unrepack_mxfp4_scales, torch.zeros(2, 4, 1, dtype=torch.int32), TypeError, "Bs must have dtype uint8"),
])
def test_repack_rejects(fn, arg, exc, msg):
    with pytest.raises(exc, match=msg):
        fn(arg)


@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(topk_ids=torch.zeros(3, 2)), TypeError, "topk_ids must have dtype int32 or int64"),
    (dict(topk_ids=torch.zeros(6, dtype=i32)), ValueError, "topk_ids must be 2-D"),
    (dict(topk_ids=[[0, 1]]), TypeError, "topk_ids must be a torch.Tensor"),
    (dict(block_m=0), ValueError, "block_m must be in"),
    (dict(block_m=16.0), TypeError, "block_m must be an int"),
    (dict(num_experts=0), ValueError, "num_experts must be in"),
    (dict(num_experts="4"), TypeError, "num_experts must be an int"),
    # absurd sizes: a ValueError, not a failure inside the allocator
    (dict(block_m=2**40), ValueError, "block_m must be in"),
    (dict(num_experts=2**40), ValueError, "num_experts must be in"),
    (dict(topk_ids=torch.zeros(2**16, 2, dtype=i32), block_m=65536, num_experts=2**20), ValueError,
     "sorted ids; at most 2\\*\\*31 - 1"),
])
def test_align_rejects(kwargs, exc, msg):
    a = dict(topk_ids=torch.zeros(3, 2, dtype=i32), block_m=16, num_experts=4)
    a.update(kwargs)
    with pytest.raises(exc, match=msg):
        moe.moe_align_block_size(**a)


@pytest.mark.parametrize("call,exc,msg", [
    (lambda p: p.mxfp4_moe_gateup_block_m(-1, 2), ValueError, "num_valid_tokens must be in"),
    (lambda p: p.mxfp4_moe_gateup_block_m(4, 0), ValueError, "num_active_experts must be in"),
    (lambda p: p.mxfp4_moe_gateup_block_m(4.0, 1), TypeError, "num_valid_tokens must be an int"),
    (lambda p: p.mxfp4_moe_gateup_supports_k("256"), TypeError, "K must be an int"),
    (lambda p: p.mxfp4_moe_down_block_m(4, 1, 0), ValueError, "K must be in"),
    (lambda p: p.mxfp4_moe_down_nt(4, -1), ValueError, "num_active_experts must be in"),
    (lambda p: p.mxfp4_moe_down_n_steps(-1, 64, 304, 16, 1), ValueError, "num_m_blocks must be in"),
    # beyond what the kernels' 32-bit fields hold (12 * num_cus wrapped to 0 and died with SIGFPE)
    (lambda p: p.mxfp4_moe_down_n_steps(1, 128, 2**62, 16, 1), ValueError, "num_cus must be in"),
    (lambda p: p.mxfp4_moe_down_plan(10, 1, 128, 384, 1, 2**62), ValueError, "num_cus must be in"),
    (lambda p: p.mxfp4_moe_gateup_block_m(2**62, 2**61), ValueError, "num_valid_tokens must be in"),
    (lambda p: p.mxfp4_moe_gateup_block_m(2**32 - 1, 2**31), ValueError, "num_active_experts must be in"),
    (lambda p: p.mxfp4_moe_down_n_steps(2**31, 128, 304, 16, 1), ValueError, "num_m_blocks must be in"),
    (lambda p: p.mxfp4_moe_down_n_steps(1, 2**32, 304, 16, 1), ValueError, "N must be in"),
    (lambda p: p.mxfp4_moe_down_block_m(1, 1, 2**40), ValueError, "K must be in"),
    (lambda p: p.mxfp4_moe_down_n_steps(1, 0, 304, 16, 1), ValueError, "N must be in"),
    (lambda p: p.mxfp4_moe_down_n_steps(1, 64, -3, 16, 1), ValueError, "num_cus must be in"),
    (lambda p: p.mxfp4_moe_down_n_steps(1, 64, 304, 48, 1), ValueError, "block_m must be one of 16, 32, 64"),
    (lambda p: p.mxfp4_moe_down_n_steps(1, 64, 304, 16, 3), ValueError, "nt must be one of 1, 2"),
    (lambda p: p.mxfp4_moe_down_plan(1, 1, 64, 384, 1, num_cus=2.5), TypeError, "num_cus must be an int"),
    (lambda p: p.mxfp4_moe_down_plan(1, 1, 0, 384, 1), ValueError, "N must be in"),
])
def test_planner_wrappers_reject(planners_py, call, exc, msg):
    with pytest.raises(exc, match=msg):
        call(planners_py)


@pytest.mark.parametrize("call,msg", [
    (lambda c: c.mxfp4_moe_gateup_block_m(-1, 2), "num_valid_tokens must be in"),
    (lambda c: c.mxfp4_moe_down_block_m(4, 0, 384), "num_active_experts must be in"),
    (lambda c: c.mxfp4_moe_down_n_steps(1, 64, 0, 16, 1), "num_cus must be in"),
    (lambda c: c.mxfp4_moe_down_n_steps(1, 128, 2**62, 16, 1), "num_cus must be in"),
    (lambda c: c.mxfp4_moe_down_n_steps(2**40, 2**32 - 1, 1, 16, 1), "num_m_blocks must be in"),
    (lambda c: c.mxfp4_moe_down_n_steps(1, 64, 304, 24, 1), "block_m must be 16, 32 or 64"),
    (lambda c: c.mxfp4_moe_down_bn(3), "nt must be 1 or 2"),
    (lambda c: c.mxfp4_moe_down_plan(1, 1, 64, 384, -1, 304), "num_m_blocks must be in"),
])
def test_cpp_planners_raise_value_error(planners_c, call, msg):
    with pytest.raises(ValueError, match=msg):
        call(planners_c)


def test_down_rejects_c_overlapping_a():
    """C aliasing A returned garbage (other workgroups still read A while C is written): rejected."""
    a = down_args()
    buf = torch.zeros(T * TOPK, 384, dtype=bf)
    a["A"] = buf
    a["C"] = buf.view(-1)[: T * TOPK * N].view(T * TOPK, N)
    for backend in ("reference", "emu"):
        with use_backend(backend), pytest.raises(ValueError, match="C must not overlap A"):
            moe.mxfp4_moe_down(**a)


def test_gateup_accepts_short_sorted_ids_and_row_strided_a():
    """vLLM/SGLang aligners give fewer than num_m_blocks * block_m sorted ids; SGLang passes row-strided A."""
    a = gateup_args()
    a["sorted_token_ids"] = a["sorted_token_ids"][:8].clone()
    big = torch.zeros(a["A"].shape[0], a["A"].shape[1] + 32, dtype=bf)
    a["A"] = big[:, : a["A"].shape[1]]
    with use_backend("reference"):
        moe.mxfp4_moe_gateup(**a)


def test_repeated_shapes_skip_shape_checks_not_value_checks(monkeypatch):
    """Host cost (issue 18 point 19): a call with the metadata (dtypes, shapes, strides, devices, scalars) of an
    accepted call runs no per-tensor shape check again, but every value check and the overlap check still
    run, and a scalar of another type (bool for int) is not taken for the cached one."""
    from moonmath_mxfp4_moe import ops

    with use_backend("reference"):
        moe.mxfp4_moe_down(**down_args())
        again = down_args()
        calls = []
        real = ops._shape_checks
        monkeypatch.setattr(ops, "_shape_checks", lambda *a: calls.append(a) or real(*a))
        moe.mxfp4_moe_down(**again)
        assert calls == []
        bad = down_args()
        bad["expert_ids"] = torch.full_like(bad["expert_ids"], E)
        with pytest.raises(ValueError, match="expert_ids values must be < 4"):
            moe.mxfp4_moe_down(**bad)
        a = down_args()
        flat = torch.zeros(a["A"].numel(), dtype=bf)  # C's bytes inside A's, same metadata as the cached call
        alias = dict(a, A=flat.view(a["A"].shape), C=flat[:a["C"].numel()].view(a["C"].shape))
        with pytest.raises(ValueError, match="C must not overlap A"):
            moe.mxfp4_moe_down(**alias)
        with pytest.raises(TypeError, match="top_k must be an int"):
            moe.mxfp4_moe_down(**dict(down_args(), top_k=True))
        assert len(calls) == 1  # the bool is a new key: checked in full
