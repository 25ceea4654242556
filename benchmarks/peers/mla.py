"""AITER's MLA decode kernels (absorbed MLA: 16 query heads share one 576-wide latent+rope KV row).

Families:
- gfx942 and gfx950 `mla/mla_a16w8_qh16_m16x4_n16x1_coex0_mask1_ps.co`: bf16 Q, the arch's fp8 KV
  (e4m3fnuz / OCP e4m3fn), persistent (a work list built here: one work item per request, so the kernel
  writes the final bf16 output). `run_aiter_mla_a16w8(..., arch=)`.
- gfx950 `mla/mla_a8w8_qh16_qseqlen1_gqaratio16.co`: fp8 Q and KV (OCP e4m3fn), q_len 1,
  non-persistent split-KV; the split outputs are merged on the host (AITER merges them with a separate
  Triton kernel, not a shipped code object). `run_aiter_mla_a8w8`.

Inputs follow our `mla_decode_a16w8`: q_lat [T, H, 512] and q_pe [T, H, 64] (T = B * q_len, H = 16),
kv_pool [slots, 1, 576] fp8, kv_indices / kv_indptr (page size 1), seq_lens [B]; position t of a request
attends its KV rows [0, L - q_len + t]. Argument layout: `MLA_ARGS` (both families share the struct).
"""
from __future__ import annotations

import math

import torch

from .harness import Field, launch

MLA_ARGS: tuple[Field, ...] = (
    Field(0, "split_out", "ptr", "split output, fp32 [n_partial * q_len, 1, H, 512] (unused when final)"),
    Field(16, "split_lse", "ptr", "split LSE, fp32 [n_partial * q_len, 1, H, 1]"),
    Field(32, "q", "ptr", "Q [T, H, 576] (latent 512, then rope 64)"),
    Field(48, "kv", "ptr", "KV pool [pages, page_size, 1, 576] fp8"),
    Field(64, "kv_indptr", "ptr", "int32 [B + 1], in pages"),
    Field(80, "kv_page_indices", "ptr", "int32 [pages used]"),
    Field(96, "kv_last_page_lens", "ptr", "int32 [B]"),
    Field(112, "scale", "f32", "softmax scale"),
    Field(128, "heads_x_qlen", "u32", "H * max q_len"),
    Field(144, "kv_splits", "u32", "KV splits per request (non-persistent kernels)"),
    Field(160, "q_request_stride", "u32", "bytes of one request's Q (Q.stride(0) * itemsize * q_len)"),
    Field(176, "page_stride", "u32", "bytes of one KV page"),
    Field(192, "log2_page_size", "u32", "log2(page_size)"),
    Field(208, "qo_indptr", "ptr", "int32 [B + 1], token rows"),
    Field(224, "work", "ptr", "persistent: -> {u64 &work_indptr[0], u64 &work_info[0]}; "
                               "non-persistent: int32 [B + 1] split indptr"),
    Field(240, "out", "ptr", "final output, bf16 [T, H, 512]"),
    Field(256, "q_scale", "ptr", "f32 [1] (a8w8 only)"),
    Field(272, "kv_scale", "ptr", "f32 [1]"),
)
HEADS = 16
LAT, ROPE = 512, 64
A16W8_PS = "mla/mla_a16w8_qh16_m16x4_n16x1_coex0_mask1_ps.co"
A8W8_Q1 = "mla/mla_a8w8_qh16_qseqlen1_gqaratio16.co"


def _check(q_lat, q_pe, kv_pool, seq_lens, kv_indices, kv_indptr, pool_dtype):
    for name, t, dt in (("q_lat", q_lat, torch.bfloat16), ("q_pe", q_pe, torch.bfloat16),
                        ("kv_pool", kv_pool, pool_dtype), ("seq_lens", seq_lens, torch.int32),
                        ("kv_indices", kv_indices, torch.int32), ("kv_indptr", kv_indptr, torch.int32)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor; got {type(t).__name__}")
        if t.dtype != dt or not t.is_contiguous() or t.device.type != "cpu":
            raise ValueError(f"{name} must be a contiguous {dt} CPU tensor; got {t.dtype} {list(t.shape)}")
    T, H, lat = q_lat.shape
    if H != HEADS or lat != LAT or list(q_pe.shape) != [T, H, ROPE]:
        raise ValueError(f"q_lat/q_pe must be [T, 16, 512] / [T, 16, 64] (AITER's qh16 kernels); got "
                         f"{list(q_lat.shape)} / {list(q_pe.shape)}")
    if kv_pool.dim() != 3 or kv_pool.shape[1:] != (1, LAT + ROPE):
        raise ValueError(f"kv_pool must be [slots, 1, 576]; got {list(kv_pool.shape)}")
    B = kv_indptr.numel() - 1
    if B < 1 or T % B or seq_lens.numel() != B:
        raise ValueError(f"T ({T}) must be B * q_len with B = kv_indptr.numel() - 1 = {B} = seq_lens.numel()")
    lens = (kv_indptr[1:] - kv_indptr[:-1]).tolist()
    if lens != seq_lens.tolist():
        raise ValueError("kv_indptr must delimit exactly seq_lens rows per request (page size 1)")
    return T, B, T // B


def _work_list(B: int, q_len: int, kv_indptr: torch.Tensor) -> torch.Tensor:
    """Persistent metadata in one int64 tensor: [&work_indptr, &work_info, work_indptr (int32 [B+1],
    padded), work_info (int32 [B, 8])]: one workgroup and one work item per request, partial_loc -1
    (write the final output), kv_offset 0 (the item ends where the request ends)."""
    n_ptr = math.ceil((B + 1) / 2)
    meta = torch.zeros(2 + n_ptr + 4 * B, dtype=torch.int64)
    i32 = meta.view(torch.int32)
    wi_off = 4 + 2 * n_ptr  # int32 index where work_info starts
    i32[4:4 + B + 1] = torch.arange(B + 1, dtype=torch.int32)
    info = i32[wi_off:wi_off + 8 * B].view(B, 8)
    ind = kv_indptr.to(torch.int32)
    info[:, 0] = torch.arange(B, dtype=torch.int32)
    info[:, 1] = -1
    info[:, 2] = torch.arange(B, dtype=torch.int32) * q_len
    info[:, 3] = info[:, 2] + q_len
    info[:, 4] = ind[:-1]
    info[:, 5] = ind[1:]
    base = meta.data_ptr()
    meta[0] = base + 16
    meta[1] = base + 4 * wi_off
    return meta


def a16w8_values(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, seq_lens: torch.Tensor,
                 kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float, kv_scale: float, *,
                 arch: str = "gfx942", work: torch.Tensor | None = None, n_partial: int = 0) -> dict:
    """The a16w8 persistent kernel's argument values. `work`: a metadata tensor in `_work_list`'s layout
    (default: one work item per request); `n_partial`: the query rows its split items write as partials."""
    pool_dtypes = {"gfx942": torch.float8_e4m3fnuz, "gfx950": torch.float8_e4m3fn}
    if arch not in pool_dtypes:
        raise ValueError(f"arch must be one of {sorted(pool_dtypes)}; got {arch!r}")
    T, B, q_len = _check(q_lat, q_pe, kv_pool, seq_lens, kv_indices, kv_indptr, pool_dtypes[arch])
    if q_len > 4:
        raise ValueError(f"AITER's qh16 a16w8 kernel serves q_len <= 4; got {q_len}")
    q = torch.cat([q_lat, q_pe], dim=-1).contiguous()
    rows = max(T, n_partial)
    return {
        "split_out": torch.zeros(rows, 1, HEADS, LAT, dtype=torch.float32),
        "split_lse": torch.zeros(rows, 1, HEADS, 1, dtype=torch.float32),
        "q": q, "kv": kv_pool, "kv_indptr": kv_indptr, "kv_page_indices": kv_indices,
        "kv_last_page_lens": torch.ones(B, dtype=torch.int32), "scale": float(scale),
        "heads_x_qlen": HEADS * q_len, "kv_splits": 1, "q_request_stride": q.stride(0) * 2 * q_len,
        "page_stride": kv_pool.stride(0), "log2_page_size": 0,
        "qo_indptr": torch.arange(B + 1, dtype=torch.int32) * q_len,
        "work": _work_list(B, q_len, kv_indptr) if work is None else work,
        "out": torch.zeros(T, HEADS, LAT, dtype=torch.bfloat16), "q_scale": None,
        "kv_scale": torch.tensor([kv_scale], dtype=torch.float32),
    }


def run_aiter_mla_a16w8(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, seq_lens: torch.Tensor,
                        kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float, kv_scale: float, *,
                        check_hazards: bool | str = False, arch: str = "gfx942") -> tuple[torch.Tensor, dict]:
    """a16w8 persistent MLA decode of `arch` (gfx942: e4m3fnuz KV, gfx950: OCP e4m3fn KV) on the emulator,
    one work item per request: (out bf16 [T, H, 512], counters)."""
    values = a16w8_values(q_lat, q_pe, kv_pool, seq_lens, kv_indices, kv_indptr, scale, kv_scale, arch=arch)
    B = kv_indptr.numel() - 1
    counters = launch(arch, A16W8_PS, MLA_ARGS, values, grid=(B, 1, 1), block=256, check_hazards=check_hazards)
    counters["kernel"] = A16W8_PS
    return values["out"], counters


def reference_mla(q_lat, q_pe, kv_pool, seq_lens, kv_indices, kv_indptr, scale, kv_scale,
                  q_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 reference from the math: (out [T, H, 512], lse [T, H], natural log)."""
    T, H, _ = q_lat.shape
    B = kv_indptr.numel() - 1
    q_len = T // B
    q = torch.cat([q_lat, q_pe], dim=-1).double() * q_scale
    out = torch.zeros(T, H, LAT, dtype=torch.float64)
    lse = torch.full((T, H), float("-inf"), dtype=torch.float64)
    for b in range(B):
        rows = kv_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long()
        kv = kv_pool[rows, 0].double() * kv_scale  # [L, 576]
        L = kv.shape[0]
        for t in range(q_len):
            n = L - q_len + t + 1
            if n <= 0:
                continue
            s = q[b * q_len + t] @ kv[:n].T * scale  # [H, n]
            m = s.amax(-1, keepdim=True)
            p = torch.exp(s - m)
            den = p.sum(-1, keepdim=True)
            out[b * q_len + t] = (p / den) @ kv[:n, :LAT]
            lse[b * q_len + t] = (m + den.log()).squeeze(-1)
    return out, lse


def make_inputs(B: int, S: int, q_len: int, arch: str = "gfx942", seed: int = 0):
    """Random MLA decode inputs in our op's conventions (a shuffled pool, page size 1)."""
    g = torch.Generator().manual_seed(seed)
    pool_dtype = torch.float8_e4m3fnuz if arch == "gfx942" else torch.float8_e4m3fn
    T = B * q_len
    q_lat = (torch.randn(T, HEADS, LAT, generator=g) * 0.5).bfloat16()
    q_pe = (torch.randn(T, HEADS, ROPE, generator=g) * 0.5).bfloat16()
    slots = B * S
    kv_pool = (torch.randn(slots, 1, LAT + ROPE, generator=g)).to(pool_dtype)
    kv_indices = torch.randperm(slots, generator=g).to(torch.int32)
    kv_indptr = torch.arange(B + 1, dtype=torch.int32) * S
    seq_lens = torch.full((B,), S, dtype=torch.int32)
    return q_lat, q_pe, kv_pool, seq_lens, kv_indices, kv_indptr, (LAT + ROPE) ** -0.5, 0.7


def quantize_q_fp8(q_lat: torch.Tensor, q_pe: torch.Tensor, dtype=torch.float8_e4m3fn) -> tuple[torch.Tensor, float]:
    """Per-tensor fp8 Q for the a8w8 kernel: (q [T, H, 576] fp8, q_scale) with q ~= q_fp8 * q_scale."""
    q = torch.cat([q_lat, q_pe], dim=-1).float()
    q_scale = float(q.abs().amax()) / torch.finfo(dtype).max or 1.0
    return (q / q_scale).to(dtype), q_scale


def run_aiter_mla_a8w8(q: torch.Tensor, q_scale: float, kv_pool: torch.Tensor, seq_lens: torch.Tensor,
                       kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float, kv_scale: float, *,
                       kv_splits: int = 1, check_hazards: bool | str = False) -> tuple[torch.Tensor, dict]:
    """gfx950 a8w8 q_len-1 MLA decode on the emulator (non-persistent, `kv_splits` KV splits per request).

    q: fp8 e4m3fn [B, 16, 576] (q_len 1) at the per-tensor `q_scale`; kv_pool fp8 e4m3fn [slots, 1, 576].
    With one split the kernel writes the bf16 output itself; with more, it writes fp32 split outputs and
    their LSE, which are merged here in float64 (AITER's second stage is a Triton kernel, not a code
    object: its cost is not in the counters). Returns (out bf16 [B, 16, 512], counters).
    """
    if not isinstance(q, torch.Tensor) or q.dtype != torch.float8_e4m3fn or q.dim() != 3 or \
            q.shape[1:] != (HEADS, LAT + ROPE) or not q.is_contiguous():
        raise ValueError(f"q must be a contiguous float8_e4m3fn [B, 16, 576] tensor; got {getattr(q, 'dtype', q)}")
    T = q.shape[0]
    _check(q[..., :LAT].to(torch.bfloat16).contiguous(), q[..., LAT:].to(torch.bfloat16).contiguous(), kv_pool,
           seq_lens, kv_indices, kv_indptr, torch.float8_e4m3fn)
    B = kv_indptr.numel() - 1
    if T != B:
        raise ValueError(f"the qseqlen1 kernel takes one query token per request; got T = {T}, B = {B}")
    if not isinstance(kv_splits, int) or kv_splits < 1:
        raise ValueError(f"kv_splits must be a positive int; got {kv_splits!r}")
    n = kv_splits
    final = torch.zeros(T, HEADS, LAT, dtype=torch.bfloat16)
    split_out = final.view(T, 1, HEADS, LAT) if n == 1 else torch.zeros(T, n, HEADS, LAT, dtype=torch.float32)
    split_lse = torch.full((T, n, HEADS, 1), float("-inf"), dtype=torch.float32)
    values = {
        "split_out": split_out, "split_lse": split_lse, "q": q, "kv": kv_pool, "kv_indptr": kv_indptr,
        "kv_page_indices": kv_indices, "kv_last_page_lens": torch.ones(B, dtype=torch.int32),
        "scale": float(scale), "heads_x_qlen": HEADS, "kv_splits": n, "q_request_stride": q.stride(0),
        "page_stride": kv_pool.stride(0), "log2_page_size": 0,
        "qo_indptr": torch.arange(B + 1, dtype=torch.int32),
        "work": torch.arange(B + 1, dtype=torch.int32) * n, "out": final,
        "q_scale": torch.tensor([q_scale], dtype=torch.float32),
        "kv_scale": torch.tensor([kv_scale], dtype=torch.float32),
    }
    counters = launch("gfx950", A8W8_Q1, MLA_ARGS, values, grid=(1, B, n), block=256, check_hazards=check_hazards)
    counters["kernel"] = A8W8_Q1
    if n > 1:
        final = merge_splits(split_out, split_lse, seq_lens)
    return final, counters


def merge_splits(split_out: torch.Tensor, split_lse: torch.Tensor, seq_lens: torch.Tensor,
                 rows_per_split: int = 64) -> torch.Tensor:
    """The second stage in float64: softmax-weighted sum of the valid splits (bf16 [T, H, 512]).
    A request of L rows has min(n, ceil(L / 64)) valid splits (AITER's rule for 16 heads, q_len 1)."""
    T, n = split_out.shape[:2]
    out = torch.zeros(T, HEADS, LAT, dtype=torch.float64)
    for t in range(T):
        valid = min(n, -(-int(seq_lens[t]) // rows_per_split))
        lse = split_lse[t, :valid, :, 0].double()  # [valid, H]
        w = torch.softmax(lse, dim=0)
        out[t] = (w[..., None] * split_out[t, :valid].double()).sum(0)
    return out.to(torch.bfloat16)


def reference_mla_fp8_p(q: torch.Tensor, q_scale: float, kv_pool, seq_lens, kv_indices, kv_indptr, scale, kv_scale,
                        tile: int = 64) -> torch.Tensor:
    """float64 model of the a8w8 kernel's arithmetic (q_len 1): online softmax over `tile`-row KV tiles,
    the probabilities rounded to fp8 e4m3fn relative to the running max before the P.V product, the
    normaliser from the unrounded probabilities. Inferred from the kernel's instruction mix
    (v_cvt_pk_fp8_f32 before the fp8 PV MFMAs) and confirmed by the match (~1.7e-3 rel., vs ~2.4e-2 of the
    exact math): it separates the kernel's designed fp8 error from emulator error."""
    B = kv_indptr.numel() - 1
    qd = q.double() * q_scale
    out = torch.zeros(B, HEADS, LAT, dtype=torch.float64)
    for b in range(B):
        rows = kv_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long()
        kv = kv_pool[rows, 0].double() * kv_scale
        s = qd[b] @ kv.T * scale
        m = s.amax(-1, keepdim=True)
        den = torch.exp(s - m).sum(-1, keepdim=True)
        run = torch.full((HEADS, 1), float("-inf"), dtype=torch.float64)
        p = torch.zeros_like(s)
        for t0 in range(0, s.shape[1], tile):
            st = s[:, t0:t0 + tile]
            run = torch.maximum(run, st.amax(-1, keepdim=True))
            p[:, t0:t0 + tile] = torch.exp(st - run).float().to(torch.float8_e4m3fn).double() * torch.exp(run - m)
        out[b] = (p @ kv[:, :LAT]) / den
    return out
