"""mla_decode_a16w8, reference backend, against an independent formulation: a per-request, per-position loop
over the global positions of the window, fp8 rows dequantised by torch's own fp8 cast, fp64 math."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import moonmath_mla_decode as mld
from moonmath_common import use_backend
from moonmath_common.numerics import bf16_bits
from moonmath_mla_decode.decode import mla_decode_a16w8

SCALE, KV_SCALE = 0.088, 0.02


@pytest.fixture(autouse=True)
def _reference():
    with use_backend("reference"):
        yield


def make(B, q_len, H, lens, *, slots_extra=5, seed=0, cp_world=1, cp_rank=0, glen=None,
         fp8=torch.float8_e4m3fnuz):
    """Random problem. lens are this rank's seq_lens; the pool holds them at random slots."""
    g = torch.Generator().manual_seed(seed)
    T = B * q_len
    q_lat = (torch.randn(T, H, 512, generator=g)).to(torch.bfloat16)
    q_pe = (torch.randn(T, H, 64, generator=g)).to(torch.bfloat16)
    n = sum(lens)
    slots = n + slots_extra
    pool = (torch.randn(slots, 1, 576, generator=g) * 3 / KV_SCALE * 0.02).to(fp8)
    kv_indices = torch.randperm(slots, generator=g)[:n].to(torch.int32)
    kv_indptr = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    return dict(q_lat=q_lat, q_pe=q_pe, kv_pool=pool, o_lat=torch.empty_like(q_lat),
                seq_lens=torch.tensor(lens, dtype=torch.int32), kv_indices=kv_indices, kv_indptr=kv_indptr,
                scale=SCALE, kv_scale=KV_SCALE, glen=None if glen is None else torch.tensor(glen, dtype=torch.int32),
                cp_rank=cp_rank, cp_world=cp_world)


def oracle(a):
    """fp64: for each request b, position t, head h: walk global positions p of the window, keep those on
    this rank, read local row p // W through kv_indices."""
    T, H, _ = a["q_lat"].shape
    B = a["kv_indptr"].numel() - 1
    q_len = T // B
    W, r = a["cp_world"], a["cp_rank"]
    o = torch.zeros(T, H, 512, dtype=torch.float64)
    lse = torch.full((T, H), -math.inf, dtype=torch.float64)
    for b in range(B):
        L = int(a["glen"][b]) if W > 1 else int(a["seq_lens"][b])
        for t in range(q_len):
            last = L - q_len + t                       # attends global positions [0, last]
            local = [p // W for p in range(0, last + 1) if p % W == r]
            if not local:
                continue
            slots = [int(a["kv_indices"][int(a["kv_indptr"][b]) + j]) for j in local]
            c = a["kv_pool"][slots, 0].to(torch.float64) * a["kv_scale"]       # [n, 576]
            row = b * q_len + t
            q = torch.cat([a["q_lat"][row], a["q_pe"][row]], -1).double()     # [H, 576]
            s = (q @ c.T) * a["scale"]
            lse[row] = torch.logsumexp(s, -1) / math.log(2.0)
            o[row] = torch.softmax(s, -1) @ c[:, :512]
    return o, lse


def run(a, with_lse=True):
    T, H = a["q_lat"].shape[:2]
    lse = torch.empty(T, H) if with_lse else None
    mla_decode_a16w8(**a, lse=lse) if with_lse else mla_decode_a16w8(**a)
    return a["o_lat"], lse


def bf16_ulp(x):
    return torch.pow(2.0, torch.floor(torch.log2(x.abs().clamp_min(2.0 ** -126))) - 7)


def check(a):
    o, lse = run(a)
    o_ref, lse_ref = oracle(a)
    err = (o.double() - o_ref).abs()
    assert bool((err <= 0.5 * bf16_ulp(o_ref) + 1e-5).all()), float(err.max())
    assert torch.equal(torch.isneginf(lse), torch.isneginf(lse_ref))
    fin = torch.isfinite(lse_ref)
    assert torch.allclose(lse[fin].double(), lse_ref[fin], atol=1e-4)
    return o, lse


@pytest.mark.parametrize("q_len,H", [(1, 1), (2, 12), (4, 16), (8, 3)])
def test_against_oracle(q_len, H):
    check(make(3, q_len, H, [37, 5, 64], seed=q_len * 100 + H))


def test_gfx950_ocp_e4m3fn_pool(monkeypatch):
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    a = make(2, 3, 4, [30, 9], seed=11, fp8=torch.float8_e4m3fn)
    a["kv_pool"][0, 0, :8] = torch.tensor([448.0, -448.0, 300.0, 2 ** -9, 0.0, -0.0, 1.0, -6.0]).to(torch.float8_e4m3fn)
    check(a)


def test_many_heads_and_export():
    assert mld.mla_decode_a16w8 is mla_decode_a16w8
    check(make(1, 1, 128, [19], seed=1))


def test_empty_windows_are_zero_and_minus_inf():
    a = make(3, 4, 2, [0, 2, 6], seed=2)
    o, lse = check(a)
    assert torch.all(o[0:4] == 0) and torch.all(torch.isneginf(lse[0:4]))   # seq_len 0
    assert torch.all(o[4:6] == 0) and torch.all(torch.isneginf(lse[4:6]))   # seq_len 2 < q_len 4: t = 0, 1 empty
    assert torch.all(torch.isfinite(lse[6:]))


def test_causal_window_end_aligned():
    a = make(1, 4, 2, [10], seed=3)
    o1, _ = run(a)
    o1 = o1.clone()
    # poison the last KV row (global position 9): only position t = 3 (window [0, 9]) sees it
    a["kv_pool"][int(a["kv_indices"][9])] = torch.full((1, 576), 200.0).to(torch.float8_e4m3fnuz)
    a["o_lat"] = torch.empty_like(a["q_lat"])
    o2, _ = run(a)
    assert torch.equal(bf16_bits(o1[:3]), bf16_bits(o2[:3]))
    assert not torch.equal(o1[3], o2[3])


def test_lse_does_not_change_output_and_o_lat_is_in_place():
    a = make(2, 2, 4, [7, 9], seed=4)
    o_in = a["o_lat"]
    o1, _ = run(a, with_lse=False)
    assert o1 is o_in
    a["o_lat"] = torch.empty_like(a["q_lat"])
    o2, _ = run(a, with_lse=True)
    assert torch.equal(bf16_bits(o1), bf16_bits(o2))


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), q_len=st.integers(1, 4), H=st.sampled_from([1, 2, 5]), cp_world=st.integers(1, 4),
       data=st.data(), seed=st.integers(0, 10_000))
def test_property_dcp(B, q_len, H, cp_world, data, seed):
    cp_rank = data.draw(st.integers(0, cp_world - 1))
    glen = data.draw(st.lists(st.integers(0, 40), min_size=B, max_size=B))
    # this rank's share of each global sequence: positions p < glen with p % W == r
    lens = [len(range(cp_rank, g, cp_world)) for g in glen]
    extra = data.draw(st.lists(st.integers(0, 3), min_size=B, max_size=B)) if cp_world > 1 else [0] * B
    lens = [n + e for n, e in zip(lens, extra)]  # seq_lens may exceed what the window reads
    a = make(B, q_len, H, lens, seed=seed, cp_world=cp_world, cp_rank=cp_rank,
             glen=glen if cp_world > 1 else None)
    check(a)


def test_dcp_ranks_merge_to_the_single_rank_result():
    B, q_len, H, W = 2, 3, 4, 3
    glen = [23, 11]
    full = make(B, q_len, H, glen, seed=5, slots_extra=0)
    o_full, lse_full = run(dict(full))
    idx, ip = full["kv_indices"], full["kv_indptr"]
    parts, lses = [], []
    for r in range(W):
        rows = [[int(idx[int(ip[b]) + p]) for p in range(r, glen[b], W)] for b in range(B)]
        n = [len(x) for x in rows]
        a = dict(full, o_lat=torch.empty_like(full["q_lat"]), seq_lens=torch.tensor(n, dtype=torch.int32),
                 kv_indices=torch.tensor(sum(rows, []), dtype=torch.int32),
                 kv_indptr=torch.tensor([0] + torch.tensor(n).cumsum(0).tolist(), dtype=torch.int32),
                 glen=torch.tensor(glen, dtype=torch.int32), cp_rank=r, cp_world=W)
        o, lse = run(a)
        parts.append(o.double())
        lses.append(lse.double())
    L = torch.stack(lses)                              # [W, T, H], base 2
    m = L.amax(0)
    w = torch.where(torch.isneginf(L), torch.zeros_like(L), torch.exp2(L - m))
    merged = (w[..., None] * torch.stack(parts)).sum(0) / w.sum(0)[..., None]
    lse_merged = m + torch.log2(w.sum(0))
    assert torch.allclose(lse_merged, lse_full.double(), atol=1e-4)
    assert bool(((merged - o_full.double()).abs() <= 2 * bf16_ulp(o_full.double()) + 1e-4).all())
