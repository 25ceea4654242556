"""Reference backend of the gfx950 attention forward: plain torch, fp32 accumulation.

For every (batch or sequence, q head h): o = softmax(scale * q k^T [+ causal mask]) v over the keys of
KV head h // (Hq / Hkv), computed in fp32 from the exact bf16 inputs and rounded once to bf16 by RTNE
(NaN -> canonical 0x7FFF). Causal masks are bottom-right aligned: query row i of a sequence of Sq rows
against Skv keys sees keys j <= i + Skv - Sq. A row that sees no key gives o = 0 and lse = -inf.
lse is the natural-log log-sum-exp of the scaled scores, fp32.

softcap (Gemma 2; 0 = off): the scaled score s = scale * q.k becomes cap * tanh(s / cap) before the mask and
the softmax; lse is then the log-sum-exp of the capped scores.

window (left, right) (flash-attn's window_size, -1 = unbounded; causal means right = 0): row i, whose diagonal
key is d = i + Skv - Sq, sees keys d - left <= j <= d + right (bottom-right aligned like causal).

sinks (gpt-oss; fp32 [Hq], natural-log logits, not scaled): head h's sink joins every row's softmax
denominator as a logit with no value, o = sum_j e^(s_j) v_j / (e^(sink_h) + sum_j e^(s_j)); lse includes it
(lse = ln(e^(sink_h) + sum_j e^(s_j))); a row that sees no key gives o = 0 and lse = sink_h.
"""
from __future__ import annotations

import torch

from moonmath_common.numerics import round_bf16, softmax_attention


def _featured_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, cap: float,
                        key_begin: torch.Tensor | None, key_end: torch.Tensor | None,
                        sinks: torch.Tensor | None = None, rows_per_chunk: int = 256
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(s) v in fp32 with s = scale q k^T, soft-capped (cap * tanh(s / cap)) when cap > 0 and masked to keys
    key_begin[i] <= j < key_end[i]: (o [G, Sq, Dv], lse [G, Sq]). A row that sees no key gives o = 0, lse = -inf."""
    G, Sq = q.shape[0], q.shape[1]
    Skv, Dv = k.shape[1], v.shape[2]
    o = torch.zeros(G, Sq, Dv, dtype=torch.float32, device=q.device)
    lse = torch.full((G, Sq), float("-inf"), dtype=torch.float32, device=q.device)
    if G == 0 or Sq == 0 or (Skv == 0 and sinks is None):
        return o, lse
    sk = sinks.float().view(G, 1, 1) if sinks is not None else None
    # Scores: bf16 products summed in float64, then fp32 (torch's CPU fp32 matmul was measured to vary run to run
    # by up to ~8e-5 in the LSE on std-9 scores; this form is deterministic and at least as accurate).
    kd, vf = k.double(), v.float()
    cols = torch.arange(Skv, device=q.device)
    for r0 in range(0, Sq, rows_per_chunk):
        r1 = min(Sq, r0 + rows_per_chunk)
        s = (torch.matmul(q[:, r0:r1].double(), kd.transpose(1, 2)) * scale).float()
        if cap:
            s = cap * torch.tanh(s / cap)
        if key_end is not None:
            s = s.masked_fill(cols.view(1, 1, Skv) >= key_end[r0:r1].view(1, -1, 1), float("-inf"))
        if key_begin is not None:
            s = s.masked_fill(cols.view(1, 1, Skv) < key_begin[r0:r1].view(1, -1, 1), float("-inf"))
        m = s.amax(dim=-1, keepdim=True) if Skv else torch.full_like(s[..., :1], float("-inf"))
        if sk is not None:
            m = torch.maximum(m, sk.expand_as(m))
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
        p = torch.exp(s - m)
        den = p.sum(dim=-1, keepdim=True)
        if sk is not None:
            den = den + torch.exp(sk - m)
        o[:, r0:r1] = torch.matmul(p, vf) / torch.where(den == 0, torch.ones_like(den), den)
        lse[:, r0:r1] = (torch.log(den) + m).squeeze(-1)
    return o, lse


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, softcap: float = 0.0,
            window: tuple[int, int] = (-1, -1), sinks: torch.Tensor | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """q [Hq, Sq, Dqk], k [Hkv, Skv, Dqk], v [Hkv, Skv, Dv] -> (bf16 o [Hq, Sq, Dv], fp32 lse [Hq, Sq])."""
    Hq, Sq = q.shape[0], q.shape[1]
    Hkv, Skv = k.shape[0], k.shape[1]
    g = Hq // Hkv
    k = k.repeat_interleave(g, dim=0)
    v = v.repeat_interleave(g, dim=0)
    end = None
    left, right = window[0], 0 if causal else window[1]
    diag = torch.arange(Sq, device=q.device) + (Skv - Sq)
    if right >= 0:
        end = diag + (right + 1)
    if softcap or left >= 0 or sinks is not None:
        o, lse = _featured_attention(q, k, v, scale, softcap, diag - left if left >= 0 else None, end, sinks)
    else:
        o, lse = softmax_attention(q, k, v, scale, end)
    return round_bf16(o, "rtne"), lse


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str, causal: bool, scale: float,
            softcap: float = 0.0, window: tuple[int, int] = (-1, -1), sinks: torch.Tensor | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """q/k/v in `layout`; returns (o in q's layout with Dv, lse [B, Hq, Sq])."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    B, Hq, Sq = q.shape[0], q.shape[1], q.shape[2]
    o = torch.empty(B, Hq, Sq, v.shape[-1], dtype=torch.bfloat16, device=q.device)
    lse = torch.empty(B, Hq, Sq, dtype=torch.float32, device=q.device)
    for b in range(B):
        o[b], lse[b] = _attend(q[b], k[b], v[b], causal, scale, softcap, window, sinks)
    return (o.transpose(1, 2) if layout == "bshd" else o), lse


def forward_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: list[int], cu_k: list[int],
                   causal: bool, scale: float, out: torch.Tensor, lse: torch.Tensor | None,
                   softcap: float = 0.0, window: tuple[int, int] = (-1, -1),
                   sinks: torch.Tensor | None = None) -> None:
    """THD q [total_q, Hq, D], k/v [total_k, Hkv, D]; writes rows cu_q[b]:cu_q[b+1] of out (and lse [Hq, total_q])."""
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0:
            continue
        o, l = _attend(q[q0:q1].transpose(0, 1), k[k0:k1].transpose(0, 1), v[k0:k1].transpose(0, 1), causal, scale,
                       softcap, window, sinks)
        out[q0:q1] = o.transpose(0, 1)
        if lse is not None:
            lse[:, q0:q1] = l


def gather_pages(cache: torch.Tensor, pages: torch.Tensor, length: int) -> torch.Tensor:
    """Rows [0, length) of a sequence stored in `pages` of cache [num_pages, page_size, H, D] -> [length, H, D]."""
    page_size = cache.shape[1]
    need = -(-length // page_size)
    rows = cache[pages[:need].to(torch.int64)].reshape(need * page_size, cache.shape[2], cache.shape[3])
    return rows[:length]


def forward_paged(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cu_q: list[int],
                  lens_k: list[int], page_lists: list[torch.Tensor], causal: bool, scale: float,
                  out: torch.Tensor, lse: torch.Tensor | None, softcap: float = 0.0,
                  window: tuple[int, int] = (-1, -1), sinks: torch.Tensor | None = None) -> None:
    """Paged K/V: sequence b's keys are rows [0, lens_k[b]) of its pages page_lists[b] (in order)."""
    for b in range(len(cu_q) - 1):
        q0, q1 = cu_q[b], cu_q[b + 1]
        if q1 == q0:
            continue
        k = gather_pages(k_cache, page_lists[b], lens_k[b])
        v = gather_pages(v_cache, page_lists[b], lens_k[b])
        o, l = _attend(q[q0:q1].transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), causal, scale, softcap, window,
                       sinks)
        out[q0:q1] = o.transpose(0, 1)
        if lse is not None:
            lse[:, q0:q1] = l
