"""Reference backend of mla_decode_a16w8: plain torch, fp32 accumulation.

Each pool row (576 fp8 values c: e4m3fnuz or OCP e4m3fn by the pool's dtype, decoded exactly from the
bits) is both key and value after multiplication by kv_scale. For query row (t, h) of request b:
    s_j = scale * kv_scale * (q_lat[t,h] . c_j[:512] + q_pe[t,h] . c_j[512:])
    o   = kv_scale * sum_j softmax(s)_j c_j[:512]        rounded to bf16 RTNE (NaN -> 0x7FFF)
    lse = log2(sum_j exp(s_j))                           fp32, base 2
over the window j < end(t): end(t) = seq_len - (q_len - 1 - t) without DCP; under DCP
G = glen - (q_len - 1 - t) and end(t) = ceil((G - cp_rank) / cp_world) local rows (0 if G <= cp_rank).
Local row j of request b is pool slot kv_indices[kv_indptr[b] + j]. An empty window gives o = 0 and
lse = -inf.
"""
from __future__ import annotations

import math

import torch

from moonmath_common.numerics import e4m3fn_to_f32, e4m3fnuz_to_f32, round_bf16, softmax_attention

LOG2E = 1.0 / math.log(2.0)
KV_LORA_RANK = 512
ROPE_DIM = 64


def window_ends(seq_len: int, q_len: int, glen: int | None, cp_rank: int, cp_world: int) -> list[int]:
    """Number of local KV rows position t (0..q_len-1) of a request attends."""
    ends = []
    for t in range(q_len):
        if glen is None:
            ends.append(max(0, seq_len - (q_len - 1 - t)))
        else:
            g = glen - (q_len - 1 - t)
            ends.append(0 if g <= cp_rank else -(-(g - cp_rank) // cp_world))
    return ends


def mla_decode_a16w8(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, seq_lens: torch.Tensor,
                     kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float, kv_scale: float,
                     glen: torch.Tensor | None, cp_rank: int, cp_world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (o bf16 [T, H, 512], lse fp32 [T, H] base 2). glen is used when cp_world > 1."""
    T, H, _ = q_lat.shape
    B = kv_indptr.numel() - 1
    q_len = T // B
    lens = [int(x) for x in seq_lens.tolist()]
    ip = [int(x) for x in kv_indptr.tolist()]
    gl = [int(x) for x in glen.tolist()] if (glen is not None and cp_world > 1) else None
    pool = kv_pool.view(kv_pool.shape[0], kv_pool.shape[-1])  # explicit width: an empty pool is valid
    decode = e4m3fn_to_f32 if kv_pool.dtype == torch.float8_e4m3fn else e4m3fnuz_to_f32
    o = torch.empty(T, H, KV_LORA_RANK, dtype=torch.bfloat16, device=q_lat.device)
    lse = torch.empty(T, H, dtype=torch.float32, device=q_lat.device)
    for b in range(B):
        ends = window_ends(lens[b], q_len, None if gl is None else gl[b], cp_rank, cp_world)
        n = max(ends)
        slots = kv_indices[ip[b]:ip[b] + n].to(torch.int64)
        c = decode(pool[slots])                                           # [n, 576] exact
        rows = slice(b * q_len, (b + 1) * q_len)
        q = torch.cat([q_lat[rows], q_pe[rows]], dim=-1).float().reshape(1, q_len * H, -1)
        key_end = torch.tensor(ends, dtype=torch.int64, device=q.device).repeat_interleave(H)
        ob, lb = softmax_attention(q, c[None], c[None, :, :KV_LORA_RANK], scale * kv_scale, key_end)
        o[rows] = round_bf16(ob[0] * kv_scale, "rtne").view(q_len, H, KV_LORA_RANK)
        lse[rows] = (lb[0] * LOG2E).view(q_len, H)
    return o, lse


def attend(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_rows, seq_lens: torch.Tensor, kv_indices: torch.Tensor,
           kv_indptr: torch.Tensor, scale: float, glen: torch.Tensor | None, cp_rank: int, cp_world: int,
           out_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The absorbed decode over any KV format: ``kv_rows(slots)`` returns the fp32 rows [n, 576] of those pool
    slots (the format's dequantisation, exact); o = out_scale * softmax(scale * q . c) c[:512] rounded to bf16
    RTNE, lse base 2, over the window of each position (as mla_decode_a16w8, whose kv_scale is out_scale here
    with the scores' factor folded into ``scale``)."""
    T, H, _ = q_lat.shape
    B = kv_indptr.numel() - 1
    q_len = T // B
    lens = [int(x) for x in seq_lens.tolist()]
    ip = [int(x) for x in kv_indptr.tolist()]
    gl = [int(x) for x in glen.tolist()] if (glen is not None and cp_world > 1) else None
    o = torch.empty(T, H, KV_LORA_RANK, dtype=torch.bfloat16, device=q_lat.device)
    lse = torch.empty(T, H, dtype=torch.float32, device=q_lat.device)
    for b in range(B):
        ends = window_ends(lens[b], q_len, None if gl is None else gl[b], cp_rank, cp_world)
        n = max(ends)
        c = kv_rows(kv_indices[ip[b]:ip[b] + n].to(torch.int64)).float()   # [n, 576]
        rows = slice(b * q_len, (b + 1) * q_len)
        q = torch.cat([q_lat[rows], q_pe[rows]], dim=-1).float().reshape(1, q_len * H, -1)
        key_end = torch.tensor(ends, dtype=torch.int64, device=q.device).repeat_interleave(H)
        ob, lb = softmax_attention(q, c[None], c[None, :, :KV_LORA_RANK], scale, key_end)
        o[rows] = round_bf16(ob[0] * out_scale, "rtne").view(q_len, H, KV_LORA_RANK)
        lse[rows] = (lb[0] * LOG2E).view(q_len, H)
    return o, lse


def mla_decode_a16w16(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, seq_lens: torch.Tensor,
                      kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float, glen: torch.Tensor | None,
                      cp_rank: int, cp_world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 KV: the rows are used as stored (no scale)."""
    pool = kv_pool.view(kv_pool.shape[0], kv_pool.shape[-1])
    return attend(q_lat, q_pe, lambda s: pool[s], seq_lens, kv_indices, kv_indptr, scale, glen, cp_rank, cp_world)


def mxfp4_rows(kv_pool: torch.Tensor, kv_scales: torch.Tensor):
    """kv_rows for an MXFP4 pool: fp32 [n, 576] = E2M1 code (element 2b in the low nibble of byte b) times the
    E8M0 scale 2^(e - 127) of its 32-element block (scale row = the slot; columns 0..17 of kv_scales)."""
    from moonmath_common.numerics import e8m0_to_f32, unpack_e2m1

    codes = kv_pool.view(torch.uint8).reshape(kv_pool.shape[0], -1)
    sc = kv_scales.view(torch.uint8).reshape(kv_scales.shape[0], -1)

    def rows(slots: torch.Tensor) -> torch.Tensor:
        v = unpack_e2m1(codes[slots])                                          # [n, 576]
        s = e8m0_to_f32(sc[slots, :v.shape[-1] // 32]).repeat_interleave(32, dim=-1)
        return v * s
    return rows


def mla_decode_mxfp4(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, kv_scales: torch.Tensor,
                     seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float,
                     glen: torch.Tensor | None, cp_rank: int, cp_world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """MXFP4 KV: each row dequantised exactly (mxfp4_rows), bf16 Q, fp32 softmax."""
    return attend(q_lat, q_pe, mxfp4_rows(kv_pool, kv_scales), seq_lens, kv_indices, kv_indptr, scale, glen, cp_rank,
                  cp_world)
