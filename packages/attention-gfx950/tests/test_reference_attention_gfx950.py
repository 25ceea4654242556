"""gfx950 attention, reference backend, against independent formulations: fp64 score matrices per (batch,
head) with an explicit causal loop, and torch SDPA; plus the promised equivalences (varlen == batch,
paged == varlen, strided view == contiguous copy, plan == direct) and rows-not-written."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import moonmath_attention_gfx950 as att
from moonmath_common import use_backend
from moonmath_common.numerics import bf16_bits


@pytest.fixture(autouse=True)
def _reference():
    with use_backend("reference"):
        yield


def rand(shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(torch.bfloat16)


def oracle(q, k, v, causal, scale):
    """One sequence, heads first: q [Hq, Sq, D], k/v [Hkv, Skv, D] -> fp64 (o [Hq, Sq, Dv], lse [Hq, Sq])."""
    Hq, Sq = q.shape[:2]
    Hkv, Skv = k.shape[:2]
    o = torch.zeros(Hq, Sq, v.shape[2], dtype=torch.float64)
    lse = torch.full((Hq, Sq), -math.inf, dtype=torch.float64)
    for h in range(Hq):
        kh = h // (Hq // Hkv)
        s = q[h].double() @ k[kh].double().T * scale
        for i in range(Sq):
            n = min(Skv, max(0, i + Skv - Sq + 1)) if causal else Skv
            if n == 0:
                continue
            row = s[i, :n]
            lse[h, i] = torch.logsumexp(row, 0)
            o[h, i] = torch.softmax(row, 0) @ v[kh, :n].double()
    return o, lse


def bf16_ulp(x):
    return torch.pow(2.0, torch.floor(torch.log2(x.abs().clamp_min(2.0 ** -126))) - 7)


def assert_close(out, lse, o_ref, lse_ref):
    err = (out.double() - o_ref).abs()
    assert bool((err <= 0.5 * bf16_ulp(o_ref) + 1e-5).all()), float((err - 0.5 * bf16_ulp(o_ref)).max())
    if lse is not None:
        assert torch.equal(torch.isneginf(lse), torch.isneginf(lse_ref))
        fin = torch.isfinite(lse_ref)
        assert torch.allclose(lse[fin].double(), lse_ref[fin], atol=1e-4, rtol=1e-5)


def to_heads_first(t, layout):
    return t if layout == "bhsd" else t.transpose(1, 2)


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 2), Hkv=st.integers(1, 2), ratio=st.sampled_from([1, 2, 3]), Sq=st.integers(0, 33),
       Skv=st.integers(0, 33), dims=st.sampled_from([(128, 128), (192, 128)]), causal=st.booleans(),
       layout=st.sampled_from(["bhsd", "bshd"]), seed=st.integers(0, 10_000))
def test_forward_property(B, Hkv, ratio, Sq, Skv, dims, causal, layout, seed):
    Hq = Hkv * ratio
    mk = (lambda H, S, D: (B, H, S, D)) if layout == "bhsd" else (lambda H, S, D: (B, S, H, D))
    q = rand(mk(Hq, Sq, dims[0]), seed, 2.0)
    k, v = rand(mk(Hkv, Skv, dims[0]), seed + 1), rand(mk(Hkv, Skv, dims[1]), seed + 2)
    out, lse = att.forward(q, k, v, layout=layout, causal=causal, return_lse=True)
    assert out.shape == q.shape[:3] + (dims[1],) and out.is_contiguous() and lse.shape == (B, Hq, Sq)
    scale = 1 / math.sqrt(dims[0])
    for b in range(B):
        o_ref, l_ref = oracle(to_heads_first(q, layout)[b], to_heads_first(k, layout)[b],
                              to_heads_first(v, layout)[b], causal, scale)
        assert_close(to_heads_first(out, layout)[b], lse[b], o_ref, l_ref)


def test_causal_rows_without_keys_are_zero_and_lse_minus_inf():
    q, k, v = rand((1, 2, 10, 128), 1), rand((1, 2, 4, 128), 2), rand((1, 2, 4, 128), 3)
    out, lse = att.forward(q, k, v, causal=True, return_lse=True)
    # bottom-right: row i sees keys j <= i + 4 - 10, so rows 0..5 see none
    assert torch.all(out[:, :, :6] == 0) and torch.all(torch.isneginf(lse[:, :, :6]))
    assert torch.all(torch.isfinite(lse[:, :, 6:]))
    # the last row sees every key: equal to the non-causal last row
    assert torch.equal(out[:, :, -1], att.forward(q, k, v)[:, :, -1])


@pytest.mark.parametrize("causal", [False, True])
def test_against_sdpa_gqa(causal):
    q, k, v = rand((2, 8, 40, 128), 4), rand((2, 2, 56, 128), 5), rand((2, 2, 56, 128), 6)
    mask = None
    if causal:  # bottom-right aligned
        mask = torch.ones(40, 56, dtype=torch.bool).tril(diagonal=56 - 40)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask,
                                                           enable_gqa=True, scale=0.07)
    out = att.forward(q, k, v, causal=causal, softmax_scale=0.07)
    err = (out.double() - ref).abs()
    assert bool((err <= 0.5 * bf16_ulp(ref) + 1e-5).all())


def test_lse_natural_log_value():
    q, k, v = rand((1, 1, 3, 128), 7), rand((1, 1, 5, 128), 8), rand((1, 1, 5, 128), 9)
    _, lse = att.forward(q, k, v, return_lse=True, softmax_scale=0.5)
    s = (q[0, 0].double() @ k[0, 0].double().T) * 0.5
    assert torch.allclose(lse[0, 0].double(), torch.log(torch.exp(s).sum(-1)), atol=1e-5)


def test_strided_views_equal_contiguous_copies():
    qkv = rand((2, 24, 4 + 2 + 2, 128), 10)
    q, k, v = qkv[:, :, :4], qkv[:, :, 4:6], qkv[:, :, 6:]
    a = att.forward(q, k, v, layout="bshd", causal=True)
    b = att.forward(q.contiguous(), k.contiguous(), v.contiguous(), layout="bshd", causal=True)
    assert torch.equal(bf16_bits(a), bf16_bits(b))
    # bhsd view of the same data: identical bits, output in its own layout
    c = att.forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    assert torch.equal(bf16_bits(c.transpose(1, 2)), bf16_bits(a))
    # out as a strided view (slice of a wider buffer) is written in place
    buf = torch.zeros(2, 24, 6, 128, dtype=torch.bfloat16)
    att.forward(q, k, v, layout="bshd", causal=True, out=buf[:, :, 1:5])
    assert torch.equal(bf16_bits(buf[:, :, 1:5]), bf16_bits(a)) and torch.all(buf[:, :, 0] == 0)


def _pack(lengths, H, D, seed, scale=1.0):
    total = sum(lengths)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()), dtype=torch.int32)
    return rand((total, H, D), seed, scale), cu


@settings(max_examples=20, deadline=None)
@given(lens=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=4),
       Hkv=st.integers(1, 2), ratio=st.sampled_from([1, 4]), dims=st.sampled_from([(128, 128), (192, 128)]),
       causal=st.booleans(), seed=st.integers(0, 10_000))
def test_varlen_property(lens, Hkv, ratio, dims, causal, seed):
    lq, lk = [a for a, _ in lens], [b for _, b in lens]
    q, cu_q = _pack(lq, Hkv * ratio, dims[0], seed, 2.0)
    k, cu_k = _pack(lk, Hkv, dims[0], seed + 1)
    v, _ = _pack(lk, Hkv, dims[1], seed + 2)
    out, lse = att.forward_varlen(q, k, v, cu_q, cu_k, max(lq), max(lk), causal=causal, return_lse=True)
    assert lse.shape == (Hkv * ratio, sum(lq))
    for b in range(len(lens)):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        o_ref, l_ref = oracle(q[q0:q1].transpose(0, 1), k[k0:k1].transpose(0, 1), v[k0:k1].transpose(0, 1), causal,
                              1 / math.sqrt(dims[0]))
        assert_close(out[q0:q1].transpose(0, 1), lse[:, q0:q1], o_ref, l_ref)


def test_varlen_equals_batch_bitwise_and_head_major_views():
    B, S, H = 3, 17, 4
    q, k, v = rand((B, S, H, 128), 11), rand((B, S, 2, 128), 12), rand((B, S, 2, 128), 13)
    out_b, lse_b = att.forward(q, k, v, layout="bshd", causal=True, return_lse=True)
    cu = torch.arange(B + 1, dtype=torch.int32) * S
    out_v, lse_v = att.forward_varlen(q.reshape(B * S, H, 128), k.reshape(B * S, 2, 128), v.reshape(B * S, 2, 128),
                                      cu, cu, S, S, causal=True, return_lse=True)
    assert torch.equal(bf16_bits(out_v), bf16_bits(out_b.reshape(B * S, H, 128)))
    assert torch.equal(lse_v, lse_b.permute(1, 0, 2).reshape(H, B * S))
    # head-major storage [H, total, D] viewed as THD: same bits as the contiguous copy
    qh = q.reshape(B * S, H, 128).transpose(0, 1).contiguous().transpose(0, 1)
    assert not qh.is_contiguous()
    out_h = att.forward_varlen(qh, k.reshape(B * S, 2, 128), v.reshape(B * S, 2, 128), cu, cu, S, S, causal=True)
    assert torch.equal(bf16_bits(out_h), bf16_bits(out_v))


def test_varlen_rows_outside_sequences_not_written():
    q, _ = _pack([3, 5, 4], 2, 128, 14)
    k, _ = _pack([6, 2, 7], 2, 128, 15)
    cu_q = torch.tensor([2, 4, 4, 9], dtype=torch.int32)    # rows 0, 1, 9, 10, 11 belong to no sequence
    cu_k = torch.tensor([0, 6, 8, 15], dtype=torch.int32)
    out = torch.full((12, 2, 128), 5.0, dtype=torch.bfloat16)
    res = att.forward_varlen(q, k, k, cu_q, cu_k, 5, 7, out=out)
    assert res is out
    for r in (0, 1, 9, 10, 11):
        assert torch.all(out[r] == 5.0)
    assert not torch.any(out[2:9] == 5.0)
    # the empty middle sequence writes nothing; the others match their own oracle
    o_ref, _ = oracle(q[4:9].transpose(0, 1), k[8:15].transpose(0, 1), k[8:15].transpose(0, 1), False, 128 ** -0.5)
    assert_close(out[4:9].transpose(0, 1), None, o_ref, None)


def test_varlen_plan_equals_direct():
    q, cu_q = _pack([7, 0, 12], 4, 192, 16)
    k, cu_k = _pack([9, 3, 12], 1, 192, 17)
    v, _ = _pack([9, 3, 12], 1, 128, 18)
    plan = att.VarlenPlan().plan(cu_q, cu_k, 12, 12, 19, 24, heads=4, kv_heads=1, causal=True)
    assert isinstance(plan, att.VarlenPlan)
    for _layer in range(2):
        a, la = plan.run(q, k, v, return_lse=True)
        b, lb = att.forward_varlen(q, k, v, cu_q, cu_k, 12, 12, causal=True, return_lse=True)
        assert torch.equal(bf16_bits(a), bf16_bits(b)) and torch.equal(la, lb)


def _paginate(k, v, cu_k, page_size, seed, extra_pages=3):
    """Scatter each sequence's rows over random pages; returns caches, page lists, block table."""
    g = torch.Generator().manual_seed(seed)
    lens = (cu_k[1:] - cu_k[:-1]).tolist()
    need = [-(-n // page_size) for n in lens]
    num_pages = sum(need) + extra_pages
    perm = torch.randperm(num_pages, generator=g)
    kc = rand((num_pages, page_size) + tuple(k.shape[1:]), seed + 1)   # garbage everywhere else
    vc = rand((num_pages, page_size) + tuple(v.shape[1:]), seed + 2)
    pages, table = [], torch.full((len(lens), max(need + [1]) + 1), -7, dtype=torch.int32)
    at = 0
    for b, n in enumerate(lens):
        ps = perm[at:at + need[b]]
        at += need[b]
        for i, p in enumerate(ps.tolist()):
            rows = k[int(cu_k[b]) + i * page_size: int(cu_k[b]) + min(n, (i + 1) * page_size)]
            kc[p, :rows.shape[0]] = rows
            vc[p, :rows.shape[0]] = v[int(cu_k[b]) + i * page_size: int(cu_k[b]) + min(n, (i + 1) * page_size)]
        pages.append(ps)
        table[b, :need[b]] = ps.to(torch.int32)
    indptr = torch.tensor([0] + torch.tensor(need).cumsum(0).tolist(), dtype=torch.int32)
    return kc, vc, indptr, torch.cat(pages).to(torch.int32), table, torch.tensor(lens, dtype=torch.int32)


@settings(max_examples=15, deadline=None)
@given(lens=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 40)), min_size=1, max_size=3),
       dims=st.sampled_from([(128, 128), (192, 128)]), page_exp=st.integers(0, 2), causal=st.booleans(),
       ratio=st.sampled_from([1, 2]), seed=st.integers(0, 10_000))
def test_paged_equals_varlen_bitwise(lens, dims, page_exp, causal, ratio, seed):
    page_size = (8 if dims[0] == 128 else 16) << page_exp
    lq, lk = [a for a, _ in lens], [b for _, b in lens]
    q, cu_q = _pack(lq, 2 * ratio, dims[0], seed)
    k, cu_k = _pack(lk, 2, dims[0], seed + 1)
    v, _ = _pack(lk, 2, dims[1], seed + 2)
    want, lse_w = att.forward_varlen(q, k, v, cu_q, cu_k, max(lq), max(lk), causal=causal, return_lse=True)
    kc, vc, indptr, pages, table, lens_k = _paginate(k, v, cu_k, page_size, seed + 3)
    a, la = att.forward_paged(q, kc, vc, cu_q, lens_k, kv_indptr=indptr, kv_page_indices=pages, causal=causal,
                              return_lse=True)
    b, lb = att.forward_paged(q, kc, vc, cu_q, lens_k, block_table=table, causal=causal, return_lse=True)
    assert torch.equal(bf16_bits(a), bf16_bits(want)) and torch.equal(la, lse_w)
    assert torch.equal(bf16_bits(b), bf16_bits(want)) and torch.equal(lb, lse_w)
