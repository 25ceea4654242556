"""moonmath_amd as its real clients call it, on the emulator (gfx942 code objects).

Each test restates one call pattern of a client in our own code, with its argument forms:
- SGLang MoonmathMLABackend (python/sglang/srt/layers/attention/moonmath_mla_backend.py):
  `import moonmath_amd.mla as mla`, a fused-576 query split into contiguous halves, int32 seq_lens
  staged from int64 (decode) or from kv_indptr differences (TARGET_VERIFY), `kv_indptr[:B + 1]` views,
  `float(layer.k_scale)`, H = 12 (Kimi-K3 at TP8).
- vLLM MoonmathMLAImpl (vllm/v1/attention/backends/mla/moonmath_mla.py): transposed query views made
  contiguous, the paged cache viewed as [-1, 1, 576], the persistent kv_indices buffer cut at
  num_reqs * max_model_len, positional arguments.
- vLLM MoonmathW4A16SituExperts (.../fused_moe/experts/moonmath_mxfp4_moe.py): positional gate/up and down,
  chunked in-place repack over E, vLLM's aligner layout (n + E*(bm-1) sorted ids).
- SGLang moonmath MXFP4 MoE runner (.../moe_runner/moonmath_mxfp4_moe.py): every argument by keyword,
  topk_weights=None, a row-strided hidden_states view, SGLang's aligner layout (n + (E+1)*(bm-1)).
Tolerances are the original tests': MLA |o - ref| < 0.02, MoE max|d| / max|ref| < 2e-2.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import moonmath_amd as ma
from moonmath_common import use_arch, use_backend
from moonmath_common.numerics import e8m0_to_f32, unpack_e2m1

pytest.importorskip("moonmath_emu")

LAT, ROPE = 512, 64
SCALE, KV_SCALE = 576 ** -0.5, 0.02


@pytest.fixture(autouse=True)
def _emu_gfx942():
    with use_backend("emu"), use_arch("gfx942"):
        yield


# ---------------------------------------------------------------- MLA

def _mla_pool(slots, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(slots, 1, 576, generator=g) / KV_SCALE / 8).clamp(-240, 240).to(torch.float8_e4m3fnuz)


def _mla_reference(q_lat, q_pe, pool, seq_lens, kv_indices, kv_indptr, scale, kv_scale):
    o = torch.empty_like(q_lat)
    with use_backend("reference"):
        ma.mla_decode_a16w8(q_lat, q_pe, pool, o, seq_lens.clone(), kv_indices.clone(), kv_indptr.clone(),
                            float(scale), float(kv_scale))
    return o


def _sglang_call(mla, q, pool, seq_lens_i32, kv_indices, kv_indptr_buf, B, q_len, H, k_scale):
    q = q.reshape(B * q_len, H, 576)
    q_lat, q_pe = q[..., :LAT].contiguous(), q[..., LAT:].contiguous()
    out = torch.empty(B * q_len, H, LAT, dtype=torch.bfloat16)
    mla.mla_decode_a16w8(q_lat, q_pe, pool, out, seq_lens_i32[:B], kv_indices.to(torch.int32),
                         kv_indptr_buf[: B + 1].to(torch.int32), SCALE,
                         1.0 if k_scale is None else float(k_scale))
    return q_lat, q_pe, out


@pytest.mark.parametrize("q_len", [1, 3])   # decode, then TARGET_VERIFY with a 3-token draft window
def test_sglang_mla_backend(q_len):
    import moonmath_amd.mla as mla

    assert hasattr(mla, "mla_dcp_lse_merge_ranks")   # SGLang's check for the unified op
    g = torch.Generator().manual_seed(q_len)
    B, H = 3, 12
    lens = torch.tensor([37, 5, 20])
    slots = int(lens.sum()) + 11
    pool = _mla_pool(slots, seed=q_len)
    kv_indices = torch.randperm(slots, generator=g)[: int(lens.sum())].to(torch.int32)
    kv_indptr_buf = torch.zeros(64, dtype=torch.int32)       # a persistent buffer longer than B + 1
    kv_indptr_buf[1: B + 1] = torch.cumsum(lens, 0).to(torch.int32)
    seq_lens_i32 = torch.zeros(8192, dtype=torch.int32)      # the staged int32 buffer
    if q_len == 1:
        seq_lens_i32[:B].copy_(lens.to(torch.int64))         # sglang carries int64 seq_lens
    else:
        torch.sub(kv_indptr_buf[1: B + 1], kv_indptr_buf[:B], out=seq_lens_i32[:B])
    q = torch.randn(B * q_len, H * 576, generator=g).to(torch.bfloat16)
    k_scale = torch.tensor(KV_SCALE)                         # layer.k_scale: a 0-d tensor, float() taken
    q_lat, q_pe, out = _sglang_call(mla, q, pool, seq_lens_i32, kv_indices, kv_indptr_buf, B, q_len, H, k_scale)
    ref = _mla_reference(q_lat, q_pe, pool, seq_lens_i32[:B], kv_indices, kv_indptr_buf[: B + 1], SCALE, KV_SCALE)
    err = float((out.float() - ref.float()).abs().max())
    assert err < 0.02, err
    assert out.reshape(B * q_len, H * LAT).shape == (B * q_len, H * LAT)


def test_vllm_mla_impl():
    g = torch.Generator().manual_seed(7)
    num_reqs, q_len, H, max_model_len = 2, 2, 16, 64
    lens = torch.tensor([41, 9], dtype=torch.int32)
    num_blocks = 128                                         # the paged cache, block_size 1
    cache = _mla_pool(num_blocks, seed=7).view(num_blocks, 1, 576)
    persistent = torch.zeros(num_reqs * max_model_len + 100, dtype=torch.int32)   # longer than needed
    used = torch.randperm(num_blocks, generator=g)[: int(lens.sum())].to(torch.int32)
    persistent[: used.numel()] = used
    kv_indptr = torch.tensor([0, 41, 50], dtype=torch.int32)
    # q halves arrive as transposed views ([H, T, d] storage); the client makes them contiguous.
    q_lat = torch.randn(H, num_reqs * q_len, LAT, generator=g).to(torch.bfloat16).transpose(0, 1).contiguous()
    q_pe = torch.randn(H, num_reqs * q_len, ROPE, generator=g).to(torch.bfloat16).transpose(0, 1).contiguous()
    out = torch.empty_like(q_lat)
    k_scale = torch.tensor([KV_SCALE])                      # layer._k_scale: a one-element tensor
    kv_scale = float(k_scale)
    ma.mla_decode_a16w8(q_lat, q_pe, cache.view(-1, 1, LAT + ROPE), out, lens, persistent[: num_reqs * max_model_len],
                        kv_indptr, SCALE, kv_scale)
    ref = _mla_reference(q_lat, q_pe, cache.view(-1, 1, 576), lens, persistent[: num_reqs * max_model_len], kv_indptr,
                         SCALE, KV_SCALE)
    err = float((out.float() - ref.float()).abs().max())
    assert err < 0.02, err


@pytest.mark.parametrize("form", ["float", "0-d tensor", "1-elem tensor", "numpy"])
def test_mla_scale_forms(form):
    """kv_scale / scale as the clients hold them: the original calls float() on each."""
    conv = {"float": float, "0-d tensor": torch.tensor, "1-elem tensor": lambda v: torch.tensor([v]),
            "numpy": np.float32}[form]
    g = torch.Generator().manual_seed(3)
    B, H = 1, 4
    pool = _mla_pool(20, seed=3)
    kv_indices = torch.arange(20, dtype=torch.int32)
    kv_indptr = torch.tensor([0, 20], dtype=torch.int32)
    lens = torch.tensor([20], dtype=torch.int32)
    q_lat = torch.randn(B, H, LAT, generator=g).to(torch.bfloat16)
    q_pe = torch.randn(B, H, ROPE, generator=g).to(torch.bfloat16)
    out = torch.empty_like(q_lat)
    ma.mla_decode_a16w8(q_lat, q_pe, pool, out, lens, kv_indices, kv_indptr, conv(SCALE), conv(KV_SCALE))
    ref = _mla_reference(q_lat, q_pe, pool, lens, kv_indices, kv_indptr, SCALE, float(np.float32(KV_SCALE))
                         if form == "numpy" else KV_SCALE)
    assert float((out.float() - ref.float()).abs().max()) < 0.02


# ---------------------------------------------------------------- MoE

E, HID, INTER, TOPK = 8, 256, 384, 2


def _stock_weights(seed):
    g = torch.Generator().manual_seed(seed)
    w13 = torch.randint(0, 256, (E, 2 * INTER, HID // 2), generator=g, dtype=torch.int32).to(torch.uint8)
    s13 = torch.randint(118, 124, (E, 2 * INTER, HID // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    w2 = torch.randint(0, 256, (E, HID, INTER // 2), generator=g, dtype=torch.int32).to(torch.uint8)
    s2 = torch.randint(118, 124, (E, HID, INTER // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    return w13, s13, w2, s2


def _dense(w, s):
    return unpack_e2m1(w).double() * e8m0_to_f32(s).double().repeat_interleave(32, -1)


def _moe_reference(x, ids, wts, w13, s13, w2, s2):
    """Per-token loop over experts from the stock layout (shares no code with the repack)."""
    W13, W2 = _dense(w13, s13), _dense(w2, s2)
    T = x.shape[0]
    ref = torch.zeros(T, HID, dtype=torch.float64)
    for t in range(T):
        for j in range(ids.shape[1]):
            ex = int(ids[t, j])
            a = W13[ex] @ x[t].double()
            gte, up = a[:INTER], a[INTER:]
            act = ((4 * torch.tanh(gte / 4) * torch.sigmoid(gte)) * (25 * torch.tanh(up / 25))).to(torch.bfloat16)
            ref[t] += float(wts[t, j]) * (W2[ex] @ act.double())
    return ref


def _client_align(ids, bm, num_experts, extra_pad_experts):
    """The aligners of vLLM (extra 0) and SGLang (extra 1): sorted ids of n + (E + extra)*(bm - 1) entries,
    padded with the sentinel n; expert ids for cdiv(len, bm) blocks, uninitialised (here: garbage) past the
    padded total; the padded total in a [1] tensor."""
    flat = ids.reshape(-1).to(torch.int64)
    n = flat.numel()
    length = n + (num_experts + extra_pad_experts) * (bm - 1)
    sorted_ids = torch.full((length,), n, dtype=torch.int32)
    nblocks = -(-length // bm)
    expert_ids = torch.full((nblocks,), 12345, dtype=torch.int32)   # never read past the padded total
    pos = 0
    for e in range(num_experts):
        slots = torch.nonzero(flat == e).reshape(-1)
        if slots.numel() == 0:
            continue
        sorted_ids[pos: pos + slots.numel()] = slots.to(torch.int32)
        padded = -(-slots.numel() // bm) * bm
        expert_ids[pos // bm: (pos + padded) // bm] = e
        pos += padded
    assert length < nblocks * bm   # the point: shorter than num_m_blocks * block_m
    return sorted_ids, expert_ids, torch.tensor([pos], dtype=torch.int32)


def _routing(T, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, HID, generator=g).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(E, generator=g)[:TOPK] for _ in range(T)]).to(torch.int32)
    wts = torch.softmax(torch.randn(T, TOPK, generator=g), -1)
    return x, ids, wts


def _rel(out, ref):
    return float((out.double() - ref).abs().max() / ref.abs().max())


def _chunked_repack(stock, fn, out_shape, chunk=3):
    """vLLM's in-place repack: chunks over E rewritten into the same storage."""
    flat = stock.clone().view(-1)
    per = flat.numel() // stock.shape[0]
    for s in range(0, stock.shape[0], chunk):
        e = min(s + chunk, stock.shape[0])
        flat[s * per: e * per].copy_(fn(stock[s:e]).reshape(-1))
    return flat.view(*out_shape)


def test_vllm_situ_experts():
    w13, s13, w2, s2 = _stock_weights(1)
    W13 = _chunked_repack(w13, ma.repack_mxfp4, (E, HID // 32, 2 * INTER, 16))
    S13 = _chunked_repack(s13, ma.repack_mxfp4_scales, (E, HID // 32, 2 * INTER))
    W2 = _chunked_repack(w2, ma.repack_mxfp4, (E, INTER // 32, HID, 16))
    S2 = _chunked_repack(s2, ma.repack_mxfp4_scales, (E, INTER // 32, HID))
    assert torch.equal(W13, ma.repack_mxfp4(w13)) and torch.equal(S2, ma.repack_mxfp4_scales(s2))
    T = 5
    x, ids, wts = _routing(T, 1)
    rows, num_cus = T * TOPK, 304
    tw = wts.reshape(-1).to(torch.bfloat16)
    bm_g = ma.mxfp4_moe_gateup_block_m(rows, E)
    sg, eg, ng = _client_align(ids, bm_g, E, 0)
    inter = torch.empty((rows, INTER), dtype=torch.bfloat16)
    ma.mxfp4_moe_gateup(x, W13, S13, inter, tw, sg, eg, ng, eg.numel(), bm_g, rows, TOPK, epilogue=ma.EPI_SITU,
                        mul_routed_weight=False, situ_beta=4.0, situ_linear_beta=25.0)
    bm_d = ma.mxfp4_moe_down_block_m(rows, E, INTER)
    assert bm_d
    sd, ed, nd = (sg, eg, ng) if bm_d == bm_g else _client_align(ids, bm_d, E, 0)
    nt = ma.mxfp4_moe_down_nt(rows, E)
    ns = ma.mxfp4_moe_down_n_steps(ed.numel(), HID, num_cus, bm_d, nt)
    down = torch.empty((rows, HID), dtype=torch.bfloat16)
    ma.mxfp4_moe_down(inter, W2, S2, down, tw, sd, ed, nd, ed.numel(), bm_d, ns, nt, rows, 1,
                      mul_routed_weight=True)
    out = torch.sum(down.view(T, TOPK, HID), dim=1, dtype=torch.float32)
    ref = _moe_reference(x, ids, tw.float().view(T, TOPK), w13, s13, w2, s2)
    assert _rel(out, ref) < 2e-2


def test_sglang_mxfp4_moe_runner():
    import moonmath_amd as ma  # noqa: F811 - the runner imports it inside each helper

    w13, s13, w2, s2 = _stock_weights(2)
    W13, S13 = ma.repack_mxfp4(w13), ma.repack_mxfp4_scales(s13)
    W2, S2 = ma.repack_mxfp4(w2), ma.repack_mxfp4_scales(s2)
    assert ma.mxfp4_moe_gateup_supports_k(HID)
    T = 4
    x, ids, wts = _routing(T, 2)
    # hidden_states as a row-strided view (stride(1) == 1): passed through without a copy
    big = torch.zeros(T, HID + 64, dtype=torch.bfloat16)
    big[:, :HID] = x
    hidden_states = big[:, :HID]
    assert hidden_states.stride() == (HID + 64, 1)
    rows = T * TOPK
    bm_g = ma.mxfp4_moe_gateup_block_m(rows, E)
    bm_d = ma.mxfp4_moe_down_block_m(rows, E, INTER)
    align_g = _client_align(ids, bm_g, E, 1)
    align_d = align_g if bm_d == bm_g else _client_align(ids, bm_d, E, 1)
    s, e, n = align_g
    inter = torch.empty((rows, INTER), dtype=torch.bfloat16)
    ma.mxfp4_moe_gateup(A=hidden_states, B=W13, Bs=S13, C=inter, topk_weights=None, sorted_token_ids=s,
                        expert_ids=e, num_tokens_post_padded=n, num_m_blocks=e.numel(), block_m=bm_g,
                        num_valid_tokens=rows, top_k=TOPK, epilogue=ma.EPI_SITU, situ_beta=4.0,
                        situ_linear_beta=25.0)
    s, e, n = align_d
    nt = ma.mxfp4_moe_down_nt(rows, E)
    n_steps = ma.mxfp4_moe_down_n_steps(num_m_blocks=e.numel(), N=HID, num_cus=304, block_m=bm_d, nt=nt)
    down = torch.empty((rows, HID), dtype=torch.bfloat16)
    ma.mxfp4_moe_down(A=inter, B=W2, Bs=S2, C=down, topk_weights=None, sorted_token_ids=s, expert_ids=e,
                      num_tokens_post_padded=n, num_m_blocks=e.numel(), block_m=bm_d, n_steps=n_steps, nt=nt,
                      num_valid_tokens=rows, top_k=1)
    out = (down.double().view(T, TOPK, HID) * wts.double()[..., None]).sum(1)   # the runner's weighted reduce
    ref = _moe_reference(x, ids, wts, w13, s13, w2, s2)
    assert _rel(out, ref) < 2e-2
