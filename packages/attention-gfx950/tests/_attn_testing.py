"""Helpers shared by the gfx950 attention tests: seeded inputs, the independent float64 reference of every feature
and its check at the seed's tolerance, and paged copies of packed K/V."""
from __future__ import annotations

import torch

import moonmath_attention_gfx950 as att

bf = torch.bfloat16
# The seed's tolerances (test_attention_gfx950_kernel.py): max|d| / max|ref| and absolute natural-log LSE.
TOL, LSE_TOL = 4e-3, 2e-5


def rnd(*shape, seed, scale=1.0):
    """A seeded normal bf16 tensor (times scale)."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale).to(bf)


def ref64(q, k, v, causal, scale, softcap=0.0, window=(-1, -1), sinks=None):
    """Independent float64 attention on [H, S, D] tensors: softmax / logsumexp of torch in float64, tanh written
    out as (e^2x - 1) / (e^2x + 1), the window as a boolean mask over (row, key) from flash-attn's definition
    (keys j with i' - left <= j <= i' + right, i' = i + Skv - Sq), sinks as gpt-oss writes them: one more logit
    column per head, softmax over all, the sink column dropped before the PV product. Rows seeing no key (and no
    sink): o = 0, lse = -inf."""
    H, Sq = q.shape[0], q.shape[1]
    Hk, Skv = k.shape[0], k.shape[1]
    kk = k.double().repeat_interleave(H // Hk, 0)
    vv = v.double().repeat_interleave(H // Hk, 0)
    s = torch.einsum("hid,hjd->hij", q.double(), kk) * scale
    if softcap:
        e = torch.exp(2.0 * (s / softcap).clamp(-40, 40))
        s = softcap * (e - 1.0) / (e + 1.0)
    j = torch.arange(Skv)[None, :]
    i = torch.arange(Sq)[:, None] + (Skv - Sq)
    left, right = window[0], 0 if causal else window[1]
    if right >= 0:
        s = s.masked_fill(j > i + right, float("-inf"))
    if left >= 0:
        s = s.masked_fill(j < i - left, float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks.double().view(H, 1, 1).expand(H, Sq, 1)], -1)
    lse = torch.logsumexp(s, -1) if s.shape[-1] else torch.full((H, Sq), float("-inf"), dtype=torch.float64)
    p = torch.softmax(s, -1).nan_to_num(0.0) if s.shape[-1] else torch.zeros(H, Sq, 0, dtype=torch.float64)
    if sinks is not None:
        p = p[..., :-1]
    return p @ vv, lse


def check(o, lse, ro, rl):
    """o/lse against float64 (o [H, S, Dv], lse [H, S]) at the seed's tolerance; empty rows exactly 0 / -inf."""
    den = ro.abs().max()
    err = float((o.double() - ro).abs().max() / den) if den > 0 else float(o.double().abs().max())
    assert err <= TOL, f"rel. error {err:.2e}"
    empty = torch.isneginf(rl)
    assert torch.equal(torch.isneginf(lse), empty)
    assert not o[empty].float().any(), "rows that see no key must be 0"
    d = (lse.double() - rl)[~empty].abs()
    assert d.numel() == 0 or float(d.max()) <= LSE_TOL, f"lse error {float(d.max()):.2e}"
    return err


def cu(lens):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)


def varlen_ref(q, k, v, lens_q, lens_k, causal, scale, softcap, window=(-1, -1), sinks=None):
    """float64 per sequence of packed THD tensors -> (o [total_q, H, Dv], lse [H, total_q]) over the sequences' rows."""
    cq, ck = cu(lens_q), cu(lens_k)
    n = int(cq[-1])
    o = torch.zeros(n, q.shape[1], v.shape[2], dtype=torch.float64)
    lse = torch.full((q.shape[1], n), float("-inf"), dtype=torch.float64)
    for b in range(len(lens_q)):
        q0, q1, k0, k1 = int(cq[b]), int(cq[b + 1]), int(ck[b]), int(ck[b + 1])
        ro, rl = ref64(q[q0:q1].transpose(0, 1), k[k0:k1].transpose(0, 1), v[k0:k1].transpose(0, 1), causal, scale,
                       softcap, window, sinks)
        o[q0:q1], lse[:, q0:q1] = ro.transpose(0, 1), rl
    return o, lse


def scatter_pages(k, v, cu_k, k_lens, page_size, perm_seed, spare_pages):
    """Packed k/v scattered into shuffled pages of NaN-filled caches (a read of any byte that is not a key of the
    sequence would show up as NaN): (k_cache, v_cache, kv_indptr, kv_page_indices, block_table)."""
    hk, dqk, dv = k.shape[1], k.shape[2], v.shape[2]
    need = [-(-n // page_size) for n in k_lens]
    num_pages = sum(need) + spare_pages
    perm = torch.randperm(num_pages, generator=torch.Generator().manual_seed(perm_seed)).to(torch.int32)
    kc = torch.full((num_pages, page_size, hk, dqk), float("nan"), dtype=bf)
    vc = torch.full((num_pages, page_size, hk, dv), float("nan"), dtype=bf)
    lists, at = [], 0
    for b, n in enumerate(k_lens):
        pg = perm[at:at + need[b]]
        at += need[b]
        lists.append(pg)
        for j in range(n):
            kc[pg[j // page_size], j % page_size] = k[int(cu_k[b]) + j]
            vc[pg[j // page_size], j % page_size] = v[int(cu_k[b]) + j]
    indptr = torch.tensor([0] + list(torch.tensor(need).cumsum(0)), dtype=torch.int32)
    indices = torch.cat(lists) if lists else torch.zeros(0, dtype=torch.int32)
    width = max(need + [1]) + 1
    table = torch.full((len(k_lens), width), 2**30, dtype=torch.int32)   # unused entries point nowhere
    for b, pg in enumerate(lists):
        table[b, :len(pg)] = pg
    return kc, vc, indptr, indices, table


def paged_case(q_lens, k_lens, page_size, hq, hk, dqk, dv, seed, spare_pages=5):
    """Packed q/k/v plus the same keys scattered into shuffled pages of a NaN-filled cache (scatter_pages)."""
    cu_q = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(k_lens).cumsum(0)), dtype=torch.int32)
    q = rnd(int(cu_q[-1]), hq, dqk, seed=seed)
    k = rnd(int(cu_k[-1]), hk, dqk, seed=seed + 2)
    v = rnd(int(cu_k[-1]), hk, dv, seed=seed + 3)
    kc, vc, indptr, indices, table = scatter_pages(k, v, cu_k, k_lens, page_size, seed + 1, spare_pages)
    return dict(q=q, k=k, v=v, cu_q=cu_q, cu_k=cu_k, kc=kc, vc=vc, lens=torch.tensor(k_lens, dtype=torch.int32),
                indptr=indptr, indices=indices, table=table, max_q=max(q_lens), max_k=max(k_lens))


def check_paged_equals_varlen(c, causal):
    o_ref, l_ref = att.forward_varlen(c["q"], c["k"], c["v"], c["cu_q"], c["cu_k"], c["max_q"], c["max_k"],
                                      causal=causal, return_lse=True)
    assert not torch.isnan(o_ref).any()
    o1, l1 = att.forward_paged(c["q"], c["kc"], c["vc"], c["cu_q"], c["lens"], kv_indptr=c["indptr"],
                               kv_page_indices=c["indices"], causal=causal, return_lse=True)
    o2, l2 = att.forward_paged(c["q"], c["kc"], c["vc"], c["cu_q"], c["lens"], block_table=c["table"],
                               causal=causal, return_lse=True)
    for o, l in ((o1, l1), (o2, l2)):
        assert torch.equal(o.view(torch.int16), o_ref.view(torch.int16))
        assert torch.equal(l, l_ref)
