"""MXFP4 MoE, reference backend, against a dense per-token loop over experts built from the STOCK layout
(decoded here by a lookup table of its own, fp64), plus the repack permutation and moe_align_block_size."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import moonmath_mxfp4_moe as moe
from moonmath_common import use_backend

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


@pytest.fixture(autouse=True)
def _reference():
    with use_backend("reference"):
        yield


def stock_dense(Bst, Bss):
    """fp64 [E, N, K] from stock bytes [E, N, K/2] and stock scales [E, N, K/32]."""
    lut = torch.tensor(E2M1, dtype=torch.float64)
    lo, hi = lut[(Bst & 15).long()], lut[(Bst >> 4).long()]
    w = torch.empty(Bst.shape[0], Bst.shape[1], Bst.shape[2] * 2, dtype=torch.float64)
    w[..., 0::2], w[..., 1::2] = lo, hi
    scale = torch.pow(2.0, Bss.double() - 127).repeat_interleave(32, dim=-1)
    return w * scale


def problem(T, K, Nb, E, top_k, seed, scale_lo=120, scale_hi=133):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(T, K, generator=g).to(torch.bfloat16)
    Bst = torch.randint(0, 256, (E, Nb, K // 2), generator=g, dtype=torch.int32).to(torch.uint8)
    Bss = torch.randint(scale_lo, scale_hi + 1, (E, Nb, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    ids = torch.stack([torch.randperm(E, generator=g)[:top_k] for _ in range(T)]).to(torch.int32)
    w = torch.rand(T, top_k, generator=g)
    return A, Bst, Bss, ids, w


def bf16_ulp(x):
    return torch.pow(2.0, torch.floor(torch.log2(x.abs().clamp_min(2.0 ** -126))) - 7)


def assert_bf16_of(out, ref):
    err = (out.double() - ref).abs()
    tol = 0.5 * bf16_ulp(ref) + 1e-5 * float(ref.abs().max())
    assert bool((err <= tol).all()), float((err - tol).max())


def situ(g, u, b, L):
    return (b * torch.tanh(g / b) * torch.sigmoid(g)) * (L * torch.tanh(u / L))


# ---------------------------------------------------------------- repack

def test_repack_layout_by_definition():
    g = torch.Generator().manual_seed(0)
    E, N, K = 2, 3, 64
    Bst = torch.randint(0, 256, (E, N, K // 2), generator=g, dtype=torch.int32).to(torch.uint8)
    R = moe.repack_mxfp4(Bst)
    assert R.shape == (E, K // 32, N, 16) and R.dtype == torch.uint8 and R.is_contiguous()
    for e in range(E):
        for n in range(N):
            for k in range(K):
                code = (int(Bst[e, n, k // 2]) >> (4 * (k % 2))) & 15
                code = 0 if code == 8 else code
                grp, kk = divmod(k, 32)
                i, j = divmod(kk, 8)
                byte = int(R[e, grp, n, 4 * i + (j % 4)])
                assert ((byte >> (4 * (j // 4))) & 15) == code
    S = torch.randint(0, 256, (E, N, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    RS = moe.repack_mxfp4_scales(S)
    assert RS.shape == (E, K // 32, N) and torch.equal(RS[1, 0], S[1, :, 0])


@settings(max_examples=20, deadline=None)
@given(E=st.integers(1, 3), N=st.integers(1, 5), G=st.integers(1, 3), seed=st.integers(0, 1000))
def test_repack_roundtrip(E, N, G, seed):
    g = torch.Generator().manual_seed(seed)
    Bst = torch.randint(0, 256, (E, N, 16 * G), generator=g, dtype=torch.int32).to(torch.uint8)
    back = moe.unrepack_mxfp4(moe.repack_mxfp4(Bst))
    lo, hi = Bst & 15, Bst >> 4
    canon = torch.where(lo == 8, 0, lo) | (torch.where(hi == 8, 0, hi) << 4)   # -0 becomes +0
    assert torch.equal(back, canon.to(torch.uint8))
    S = torch.randint(0, 256, (E, N, G), generator=g, dtype=torch.int32).to(torch.uint8)
    assert torch.equal(moe.unrepack_mxfp4_scales(moe.repack_mxfp4_scales(S)), S)


# ---------------------------------------------------------------- moe_align_block_size

def align_loop(ids, bm, E):
    """Independent formulation: python lists, expert by expert."""
    flat = ids.reshape(-1).tolist()
    n = len(flat)
    out, experts = [], []
    for e in range(E):
        slots = [s for s, x in enumerate(flat) if x == e]
        if not slots:
            continue
        nb = -(-len(slots) // bm)
        out += slots + [n] * (nb * bm - len(slots))
        experts += [e] * nb
    return out, experts


@settings(max_examples=40, deadline=None)
@given(T=st.integers(0, 12), top_k=st.integers(1, 4), E=st.integers(1, 9), bm=st.sampled_from([1, 3, 16, 32]),
       invalid=st.booleans(), dtype=st.sampled_from([torch.int32, torch.int64]), seed=st.integers(0, 10_000))
def test_align_property(T, top_k, E, bm, invalid, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    lo = -1 if invalid else 0
    hi = E + 1 if invalid else E
    ids = torch.randint(lo, hi, (T, top_k), generator=g).to(dtype)
    sorted_ids, expert_ids, ntpp, nblk = moe.moe_align_block_size(ids, bm, E)
    want_ids, want_experts = align_loop(ids, bm, E)
    n = T * top_k
    assert nblk == (n + min(E, n) * (bm - 1)) // bm
    assert sorted_ids.dtype == expert_ids.dtype == ntpp.dtype == torch.int32
    assert sorted_ids.shape == (nblk * bm,) and expert_ids.shape == (nblk,) and ntpp.shape == (1,)
    assert int(ntpp) == len(want_ids)
    assert sorted_ids[:len(want_ids)].tolist() == want_ids
    assert bool((sorted_ids[len(want_ids):] == n).all())
    assert expert_ids[:len(want_experts)].tolist() == want_experts
    assert bool((expert_ids[len(want_experts):] == -1).all())


def test_align_infers_num_experts():
    ids = torch.tensor([[3, 0], [3, 1]], dtype=torch.int32)
    a = moe.moe_align_block_size(ids, 2)
    b = moe.moe_align_block_size(ids, 2, 4)
    assert all(torch.equal(x, y) for x, y in zip(a[:3], b[:3])) and a[3] == b[3]


# ---------------------------------------------------------------- GEMMs

def dense_gateup(A, Bst, Bss, ids, w, epilogue, mul, beta, L):
    """fp64, per token, per k, the expert's dense weights from the stock layout; row = slot."""
    W = stock_dense(Bst, Bss)
    T, top_k = ids.shape
    rows = []
    for t in range(T):
        for j in range(top_k):
            acc = W[int(ids[t, j])] @ A[t].double()
            if epilogue == moe.EPI_SITU:
                n = acc.shape[0] // 2
                acc = situ(acc[:n], acc[n:], beta, L)
            if mul:
                acc = acc * float(w[t, j])
            rows.append(acc)
    return torch.stack(rows)


@pytest.mark.parametrize("epilogue", [0, 1])
@pytest.mark.parametrize("mul", [False, True])
@pytest.mark.parametrize("wdtype", [torch.float32, torch.bfloat16])
def test_gateup_against_dense(epilogue, mul, wdtype):
    T, K, N, E, top_k = 9, 512, 48, 6, 3
    Nb = 2 * N if epilogue == moe.EPI_SITU else N
    A, Bst, Bss, ids, w = problem(T, K, Nb, E, top_k, seed=epilogue * 10 + mul)
    w = w.to(wdtype)
    bm = 16
    s, e, ntpp, nblk = moe.moe_align_block_size(ids, bm, E)
    C = torch.full((T * top_k, N), 99.0, dtype=torch.bfloat16)
    moe.mxfp4_moe_gateup(A, moe.repack_mxfp4(Bst), moe.repack_mxfp4_scales(Bss), C, w if mul else None, s, e, ntpp,
                         nblk, bm, T * top_k, top_k, epilogue=epilogue, mul_routed_weight=mul, situ_beta=4.0,
                         situ_linear_beta=25.0)
    ref = dense_gateup(A, Bst, Bss, ids, w.double(), epilogue, mul, 4.0, 25.0)
    assert_bf16_of(C, ref)


def test_routed_weight_scales_situ_output():
    """mul_routed_weight is honoured under EPI_SITU (the original kernel ignored it there)."""
    T, K, N, E, top_k = 4, 256, 16, 3, 2
    A, Bst, Bss, ids, w = problem(T, K, 2 * N, E, top_k, seed=3, scale_lo=118, scale_hi=122)  # no underflow
    B, Bs = moe.repack_mxfp4(Bst), moe.repack_mxfp4_scales(Bss)
    s, e, ntpp, nblk = moe.moe_align_block_size(ids, 16, E)
    w = torch.full((T, top_k), 0.25)
    C1 = torch.zeros(T * top_k, N, dtype=torch.bfloat16)
    C2 = torch.zeros_like(C1)
    moe.mxfp4_moe_gateup(A, B, Bs, C1, None, s, e, ntpp, nblk, 16, T * top_k, top_k, epilogue=moe.EPI_SITU,
                         situ_beta=4.0, situ_linear_beta=25.0)
    moe.mxfp4_moe_gateup(A, B, Bs, C2, w, s, e, ntpp, nblk, 16, T * top_k, top_k, epilogue=moe.EPI_SITU,
                         mul_routed_weight=True, situ_beta=4.0, situ_linear_beta=25.0)
    assert float(C1.abs().min()) > 1e-30
    assert torch.equal(C2, C1 * 0.25)   # a power of two scales exactly
    assert_bf16_of(C2, dense_gateup(A, Bst, Bss, ids, w.double(), moe.EPI_SITU, True, 4.0, 25.0))


def test_dead_rows_and_skipped_blocks_are_not_written():
    T, K, N, E, top_k = 5, 256, 32, 4, 2
    A, Bst, Bss, ids, w = problem(T, K, N, E, top_k, seed=4)
    B, Bs = moe.repack_mxfp4(Bst), moe.repack_mxfp4_scales(Bss)
    s, e, ntpp, nblk = moe.moe_align_block_size(ids, 16, E)
    nvt = T * top_k - 3                     # the last 3 slots are not valid
    e = e.clone()
    e[0] = -1                               # block 0 is skipped
    skipped = set(s[:16].tolist())
    C = torch.full((T * top_k, N), 7.0, dtype=torch.bfloat16)
    moe.mxfp4_moe_gateup(A, B, Bs, C, None, s, e, ntpp, nblk, 16, nvt, top_k)
    ref = dense_gateup(A, Bst, Bss, ids, w, 0, False, 1.0, 1.0)
    for slot in range(T * top_k):
        if slot >= nvt or slot in skipped:
            assert torch.all(C[slot] == 7.0)
        else:
            assert_bf16_of(C[slot:slot + 1], ref[slot:slot + 1])
    # num_tokens_post_padded bounds the live blocks: 0 means nothing is written
    C0 = torch.full_like(C, 7.0)
    moe.mxfp4_moe_gateup(A, B, Bs, C0, None, s, e, torch.zeros(1, dtype=torch.int32), nblk, 16, nvt, top_k)
    assert torch.all(C0 == 7.0)


@pytest.mark.parametrize("K", [384, 512, 768])
def test_down_against_dense_and_steps_do_not_matter(K):
    T, N, E, top_k = 6, 64, 5, 2
    A1, Bst, Bss, ids, w = problem(T * top_k, K, N, E, 1, seed=K)
    ids = problem(T, 32, 32, E, top_k, seed=K + 1)[3]
    w = torch.rand(T, top_k, generator=torch.Generator().manual_seed(K))
    B, Bs = moe.repack_mxfp4(Bst), moe.repack_mxfp4_scales(Bss)
    s, e, ntpp, nblk = moe.moe_align_block_size(ids, 32, E)
    W = stock_dense(Bst, Bss)
    ref = torch.stack([W[int(ids.reshape(-1)[sl])] @ A1[sl].double() * float(w.reshape(-1)[sl])
                       for sl in range(T * top_k)])
    outs = []
    for n_steps, nt in ((1, 1), (2, 2), (7, 2)):
        C = torch.zeros(T * top_k, N, dtype=torch.bfloat16)
        moe.mxfp4_moe_down(A1, B, Bs, C, w, s, e, ntpp, nblk, 32, n_steps, nt, T * top_k, 1, mul_routed_weight=True)
        assert_bf16_of(C, ref)
        outs.append(C)
    assert all(torch.equal(outs[0], o) for o in outs[1:])


def test_nan_output_is_canonical():
    T, K, N, E, top_k = 2, 256, 16, 2, 1
    A, Bst, Bss, ids, w = problem(T, K, N, E, top_k, seed=5)
    Bss[:, 0, 0] = 255                       # E8M0 0xFF is NaN
    s, e, ntpp, nblk = moe.moe_align_block_size(ids, 16, E)
    C = torch.zeros(T, N, dtype=torch.bfloat16)
    moe.mxfp4_moe_gateup(A, moe.repack_mxfp4(Bst), moe.repack_mxfp4_scales(Bss), C, None, s, e, ntpp, nblk, 16, T, 1)
    bits = C.view(torch.int16).to(torch.int32) & 0xFFFF
    assert bool((bits[:, 0] == 0x7FFF).all()) and not bool(torch.isnan(C[:, 1:]).any())


@settings(max_examples=12, deadline=None)
@given(T=st.integers(1, 6), top_k=st.integers(1, 3), E=st.integers(3, 5), bm=st.sampled_from([16, 32, 48]),
       epilogue=st.sampled_from([0, 1]), mul=st.booleans(), seed=st.integers(0, 1000))
def test_gateup_property(T, top_k, E, bm, epilogue, mul, seed):
    K, N = 256, 16
    A, Bst, Bss, ids, w = problem(T, K, 2 * N if epilogue else N, E, top_k, seed=seed)
    s, e, ntpp, nblk = moe.moe_align_block_size(ids, bm, E)
    C = torch.zeros(T * top_k, N, dtype=torch.bfloat16)
    moe.mxfp4_moe_gateup(A, moe.repack_mxfp4(Bst), moe.repack_mxfp4_scales(Bss), C, w, s, e, ntpp, nblk, bm,
                         T * top_k, top_k, epilogue=epilogue, mul_routed_weight=mul, situ_beta=4.0,
                         situ_linear_beta=25.0)
    assert_bf16_of(C, dense_gateup(A, Bst, Bss, ids, w.double(), epilogue, mul, 4.0, 25.0))


# ---------------------------------------------------------------- planners (the C++ through pybind11)

def test_planner_values_match_mirror(planners_c):
    c = planners_c
    for nvt in list(range(0, 70)) + [100, 128, 512, 4000, 131072, 262144]:
        for na in (1, 2, 3, 5, 16, 123, 394, 896):
            pe = nvt / na
            assert c.mxfp4_moe_gateup_block_m(nvt, na) == (16 if pe <= 12 else 32 if pe < 29 else 48)
            assert c.mxfp4_moe_down_nt(nvt, na) == (1 if pe <= 4 else 2)
            for K in (256, 384, 512, 640, 768, 3072):
                want = 0 if K not in (384, 512, 768) else 16 if pe <= 12 else 32 if (pe <= 200 or K != 384) else 64
                assert c.mxfp4_moe_down_block_m(nvt, na, K) == want
    for K in (0, 16, 48, 128, 200, 256, 384, 3000, 3584, 7168):
        assert c.mxfp4_moe_gateup_supports_k(K) == (K > 0 and K % 32 == 0)


def n_steps_mirror(m_blocks, N, cus, bm, nt):
    total = -(-N // (128 * nt))
    steps = min(max(total * m_blocks // (12 * cus), 1), total)
    if bm == 16:
        if steps < 4 and total >= 4 and m_blocks <= 2 * cus and (total // 4) * m_blocks >= 2 * cus:
            steps = 4
    else:
        steps = max(steps, total // 2)
    return total // (-(-total // steps))


def test_down_n_steps_and_plan(planners_c):
    c = planners_c
    for m_blocks in (0, 1, 7, 40, 128, 600, 2000, 9000):
        for N in (64, 128, 1000, 3584, 7168):
            for cus in (1, 80, 304):
                for bm in (16, 32, 64):
                    for nt in (1, 2):
                        got = c.mxfp4_moe_down_n_steps(m_blocks, N, cus, bm, nt)
                        assert got == n_steps_mirror(m_blocks, N, cus, bm, nt)
                        total = -(-N // (128 * nt))
                        assert 1 <= got <= total
    assert c.mxfp4_moe_down_plan(128, 123, 3584, 3072, 10, 304) == (0, 0, 0)
    bm, nt, steps = c.mxfp4_moe_down_plan(131072, 896, 3584, 384, 3000, 304)
    assert (bm, nt) == (32, 2) and steps == n_steps_mirror(3000, 3584, 304, 32, 2)
    assert c.mxfp4_moe_down_plan(131072, 896, 3583, 384, 3000, 304)[1] == 1   # odd N -> nt 1


def test_python_planner_wrappers(planners_py):
    p = planners_py
    assert p.mxfp4_moe_gateup_block_m(128, 123) == 16
    assert p.mxfp4_moe_gateup_supports_k(3000) is False and p.mxfp4_moe_gateup_supports_k(3584) is True
    assert p.mxfp4_moe_down_block_m(512, 394, 3584) == 0
    assert p.mxfp4_moe_down_nt(400, 100) == 1 and p.mxfp4_moe_down_nt(401, 100) == 2
    assert p.mxfp4_moe_down_n_steps(600, 7168, 304, 16, 1) == n_steps_mirror(600, 7168, 304, 16, 1)
    # num_cus = 0: the target arch's CU count (gfx942: 304 under emu/reference)
    assert p.mxfp4_moe_down_plan(131072, 896, 3584, 384, 3000) == p.mxfp4_moe_down_plan(131072, 896, 3584, 384, 3000,
                                                                                         304)
