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
    pool = kv_pool.view(kv_pool.shape[0], kv_pool.shape[-1])  # explicit width: an empty pool is valid
    decode = e4m3fn_to_f32 if kv_pool.dtype == torch.float8_e4m3fn else e4m3fnuz_to_f32
    return attend(q_lat, q_pe, lambda s: decode(pool[s]), seq_lens, kv_indices, kv_indptr, scale * kv_scale, glen,
                  cp_rank, cp_world, out_scale=kv_scale)


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


FP8_MAX = 448.0  # OCP e4m3fn
A8W8_TILE = 32   # the KV tile of the a8w8 kernel (the fp8 PV MFMA's depth): where its running max is taken
A8W8_P_OFFSET = 8  # fp8 P is e4m3fn(2^(x - m + 8)): p >= 2^-14 of the running max is a normal e4m3fn number


def quantize_q_a8w8(q_lat: torch.Tensor, q_pe: torch.Tensor) -> tuple[torch.Tensor, float]:
    """mla_decode_a8w8's per-tensor Q quantisation: amax = max |q| over q_lat and q_pe (NaN ignored),
    q_scale = fp32(amax / 448) and q8 = e4m3fn_RTNE(clamp(fp32(q * fp32(448 / amax)), +-448)) (amax = 0: both
    scales 1). Returns (q8 decoded exactly, fp32 [T, H, 576], q_scale)."""
    q = torch.cat([q_lat, q_pe], dim=-1).float()
    a = q.abs()
    a = a[~torch.isnan(a)]
    amax = torch.tensor(float(a.amax()) if a.numel() else 0.0, dtype=torch.float32)
    if float(amax) > 0:
        q_scale, inv = amax / FP8_MAX, torch.tensor(FP8_MAX, dtype=torch.float32) / amax
    else:
        q_scale = inv = torch.tensor(1.0, dtype=torch.float32)
    q8 = (q * inv).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return e4m3fn_to_f32(q8), float(q_scale)


def mla_decode_a8w8(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, seq_lens: torch.Tensor,
                    kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float, kv_scale: float,
                    glen: torch.Tensor | None, cp_rank: int, cp_world: int,
                    runs: list[list[int]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 Q (quantize_q_a8w8) x fp8 KV (OCP e4m3fn at kv_scale), P rounded to fp8:
        x_j = log2(e) * scale * kv_scale * q_scale * (q8 . c8_j)      (the base-2 score)
        per 32-row tile t of local KV rows (in order): m_t = max(m_{t-1}, max_{j in t} x_j) (the running max),
        p~_j = e4m3fn_RTNE(2^(x_j - m_t + 8)) for j in t
        o = kv_scale * sum_j p~_j 2^m_t c8_j[:512] / sum_j p~_j 2^m_t    bf16 RTNE
        lse = log2 sum_j 2^x_j                                          (unrounded)
    over each position's window (as mla_decode_a16w8). This is the kernel with one KV part; with a KV split each
    part starts its own running max at a tile boundary, so P is rounded against another reference there (as
    every kernel's P: the bf16 formats' too) and o moves within the fp8 P rounding (docs/numerics.md).
    ``runs`` (request b: the first tiles of its runs, ascending from 0) is that split: the running max restarts
    at each run's first tile (a KV part's; the _kv4 kernel's waves each decode a run of their part), the
    definition of the kernel at a given plan (tests; the op's reference backend is the one-run definition)."""
    q8, q_scale = quantize_q_a8w8(q_lat, q_pe)
    c_qk = float(torch.tensor(scale * kv_scale * LOG2E, dtype=torch.float32)) * q_scale
    pool = kv_pool.view(kv_pool.shape[0], kv_pool.shape[-1])
    o, lse = _outputs(q_lat)
    for rows, x, slots in _q8_scores(q8, c_qk, lambda s: e4m3fn_to_f32(pool[s]), seq_lens, kv_indices, kv_indptr,
                                     glen, cp_rank, cp_world, o, lse):
        c = e4m3fn_to_f32(pool[slots]).double()                                             # [n, 576]
        n = x.shape[1]
        nt = -(-n // A8W8_TILE)
        xt = torch.nn.functional.pad(x, (0, nt * A8W8_TILE - n), value=float("-inf")).view(-1, nt, A8W8_TILE)
        starts = [0] if runs is None else runs[rows.start // (q8.shape[0] // (kv_indptr.numel() - 1))]
        bounds = sorted({t for t in starts if 0 < t < nt} | {0, nt})
        tile_max = xt.amax(-1, keepdim=True)                                                # [rows, nt, 1]
        mi = torch.cat([tile_max[:, a:e].cummax(1).values for a, e in zip(bounds[:-1], bounds[1:])], 1)
        mi = torch.where(torch.isneginf(mi), torch.zeros_like(mi), mi)
        pq = e4m3fn_to_f32(torch.exp2(xt - mi + A8W8_P_OFFSET).float().to(torch.float8_e4m3fn)).double()
        # the normaliser over tiles holding a score (a run past a row's window holds none: its mi is a stand-in)
        top = torch.where(torch.isneginf(tile_max), torch.full_like(mi, float("-inf")), mi).amax(1, keepdim=True)
        top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
        w = (pq * torch.exp2(mi - top)).reshape(-1, nt * A8W8_TILE)[:, :n]
        den = w.sum(-1, keepdim=True)
        ob = _normalised(w @ c[:, :KV_LORA_RANK], den)
        o[rows] = round_bf16((ob * kv_scale).float(), "rtne").view(o[rows].shape)
        lse[rows] = torch.logsumexp(x * math.log(2.0), -1).mul(LOG2E).float().view(lse[rows].shape)
    return o, lse


def _normalised(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num / den per row; a row whose window held no score (den = 0) gives 0, a NaN den (a NaN score) NaN."""
    live = den != 0
    return torch.where(live, num / torch.where(live, den, torch.ones_like(den)), torch.zeros(1, dtype=num.dtype))


def _outputs(q_lat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    T, H, _ = q_lat.shape
    return (torch.empty(T, H, KV_LORA_RANK, dtype=torch.bfloat16, device=q_lat.device),
            torch.empty(T, H, dtype=torch.float32, device=q_lat.device))


def _q8_scores(q8, c_qk, kv_rows, seq_lens, kv_indices, kv_indptr, glen, cp_rank, cp_world, o, lse):
    """Per request with a non-empty window: (its output rows, the base-2 scores x = c_qk (q8 . c) [q_len * H, n] in
    float64 with the positions' windows masked to -inf, its pool slots [n]); empty requests get o = 0, lse = -inf
    here. kv_rows(slots) -> the fp32 rows [n, 576]."""
    T, H, _ = q8.shape
    B = kv_indptr.numel() - 1
    q_len = T // B
    lens = [int(x) for x in seq_lens.tolist()]
    ip = [int(x) for x in kv_indptr.tolist()]
    gl = [int(x) for x in glen.tolist()] if (glen is not None and cp_world > 1) else None
    for b in range(B):
        ends = window_ends(lens[b], q_len, None if gl is None else gl[b], cp_rank, cp_world)
        n = max(ends)
        rows = slice(b * q_len, (b + 1) * q_len)
        if n == 0:
            o[rows] = 0
            lse[rows] = float("-inf")
            continue
        slots = kv_indices[ip[b]:ip[b] + n].to(torch.int64)
        q = q8[rows].reshape(q_len * H, -1).double()
        x = (q @ kv_rows(slots).double().T) * c_qk                                          # [rows, n]
        key_end = torch.tensor(ends, dtype=torch.int64).repeat_interleave(H)
        yield rows, x.masked_fill(torch.arange(n)[None, :] >= key_end[:, None], float("-inf")), slots


Q8_MXFP4_BLOCK = 32    # tokens per P scale and per V requantisation group (the scaled MFMA's k-block)
Q8_MXFP4_P_OFFSET = 8  # p~ = e4m3fn(2^(x - E + 8)): a block's largest p is in [128, 256]


def mxfp4_v_as_fp8(kv_pool: torch.Tensor, kv_scales: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """V (the first 512 columns) of the fp8-Q x MXFP4 definition, PV on the scaled fp8 MFMA: per group of 32
    tokens (consecutive local rows, the last group padded) x 32 columns, F = the largest E8M0 exponent (e - 127)
    of the group's MXFP4 blocks, and v' = e4m3fn_RTNE(code * 2^(e - 127 - F)) * 2^F: exact when the element's
    own block scale is at most 2^8 below 2^F (E2M1 codes times 2^-8 are e4m3fn numbers), rounded below that
    (to 0 under 2^-10 * 2^F). Returns float64 [n, 512]."""
    from moonmath_common.numerics import e8m0_to_f32, unpack_e2m1

    codes = kv_pool.view(torch.uint8).reshape(kv_pool.shape[0], -1)[slots]
    sc = kv_scales.view(torch.uint8).reshape(kv_scales.shape[0], -1)[slots, :KV_LORA_RANK // 32]
    n = codes.shape[0]
    g = -(-n // Q8_MXFP4_BLOCK)
    v = torch.nn.functional.pad(unpack_e2m1(codes)[:, :KV_LORA_RANK].double(), (0, 0, 0, g * Q8_MXFP4_BLOCK - n))
    e = torch.nn.functional.pad(sc.to(torch.int32), (0, 0, 0, g * Q8_MXFP4_BLOCK - n))  # padding: scale 2^-127
    F = e.view(g, Q8_MXFP4_BLOCK, -1).amax(1, keepdim=True)                                # [g, 1, 16]
    shift = (e.view(g, Q8_MXFP4_BLOCK, -1) - F).double().repeat_interleave(32, dim=-1)      # <= 0
    q = e4m3fn_to_f32((v.view(g, Q8_MXFP4_BLOCK, -1) * torch.exp2(shift)).float().to(torch.float8_e4m3fn))
    nan = (e.view(g, Q8_MXFP4_BLOCK, -1) == 255).repeat_interleave(32, dim=-1)             # an E8M0 NaN scale
    out = q.double() * e8m0_to_f32(F.to(torch.uint8)).double().repeat_interleave(32, dim=-1)
    return out.masked_fill(nan, float("nan")).view(g * Q8_MXFP4_BLOCK, -1)[:n]


def q8_mxfp4_p(x: torch.Tensor) -> torch.Tensor:
    """The fp8-Q x MXFP4 definition's P as the PV MFMA weighs it, for base-2 scores x [rows, n] (float64, -inf
    masked): per 32-token block b, E_b = ceil(max x), w_j = e4m3fn_RTNE(2^(x_j - E_b + 8)) * 2^(E_b - 8 - max_b E_b)
    (0 for a block more than 2^-119 below the row's largest). Float64 [rows, n]."""
    from moonmath_common.numerics import e4m3fn_to_f32

    n = x.shape[1]
    g = -(-n // Q8_MXFP4_BLOCK)
    xb = torch.nn.functional.pad(x, (0, g * Q8_MXFP4_BLOCK - n), value=float("-inf")).view(-1, g, Q8_MXFP4_BLOCK)
    E = torch.ceil(xb.amax(-1, keepdim=True))                                              # [rows, g, 1]
    E = torch.where(torch.isneginf(E), torch.zeros_like(E), E)
    pq = e4m3fn_to_f32(torch.exp2(xb - E + Q8_MXFP4_P_OFFSET).float().to(torch.float8_e4m3fn)).double()
    rel = E - Q8_MXFP4_P_OFFSET - E.amax(1, keepdim=True)                                  # the E8M0 scale, relative
    return (pq * torch.where(rel >= -127, torch.exp2(rel), torch.zeros_like(rel))).reshape(x.shape[0], -1)[:, :n]


def mla_decode_q8_mxfp4(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, kv_scales: torch.Tensor,
                        seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float,
                        glen: torch.Tensor | None, cp_rank: int, cp_world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 Q x MXFP4 KV on the scaled MFMA (`v_mfma_scale_f32_16x16x128_f8f6f4`): the definition the one-part
    kernel mla_q8_mxfp4_fwd meets (no public op; docs/numerics.md, docs/kernels/mla_decode_formats.md "fp8-Q x MXFP4").
        q8, q_scale = quantize_q_a8w8 (per tensor, as mla_decode_a8w8)
        x_j = log2(e) * scale * q_scale * (q8 . k_j)        k_j the exact MXFP4 row (QK: fp8 x fp4 with K's own
                                                            E8M0 scales as the MFMA's B scales; 576 = 4.5 x 128,
                                                            the last 64 columns zero-padded, which adds nothing)
        per 32-token block b of local rows (aligned to row 0): E_b = ceil(max_{j in b} x_j),
        p~_j = e4m3fn_RTNE(2^(x_j - E_b + 8))               P's E8M0 scale per 32 tokens: 2^(E_b - 8)
        w_j = p~_j 2^(E_b - 8)                              (a block 2^-119 below the row's max is dropped)
        o = sum_j w_j v'_j / sum_j w_j                      v' = mxfp4_v_as_fp8 (fp8 V with an E8M0 scale per
                                                            32 tokens x 32 columns), bf16 RTNE
        lse = log2 sum_j 2^x_j                              (unrounded)
    P's rounding depends only on its own 32-token block, so any KV split at multiples of 32 tokens rounds P alike
    (split-independent up to fp32 accumulation order)."""
    q8, q_scale = quantize_q_a8w8(q_lat, q_pe)
    c_qk = float(torch.tensor(scale * LOG2E, dtype=torch.float32)) * q_scale
    kv_rows = mxfp4_rows(kv_pool, kv_scales)
    o, lse = _outputs(q_lat)
    for rows, x, slots in _q8_scores(q8, c_qk, kv_rows, seq_lens, kv_indices, kv_indptr, glen, cp_rank, cp_world,
                                     o, lse):
        w = q8_mxfp4_p(x)
        den = w.sum(-1, keepdim=True)
        v = mxfp4_v_as_fp8(kv_pool, kv_scales, slots)
        ob = _normalised(w @ v, den)
        o[rows] = round_bf16(ob.float(), "rtne").view(o[rows].shape)
        lse[rows] = torch.logsumexp(x * math.log(2.0), -1).mul(LOG2E).float().view(lse[rows].shape)
    return o, lse
