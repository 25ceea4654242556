"""Reference backend of the gfx942 MHA forward: plain torch, fp32 accumulation.

out = round_mode( softmax(q k^T / sqrt(D)) v )  computed in fp32 from the exact bf16 inputs, then
rounded once to bf16 by the requested rule (NaN -> canonical 0x7FFF). The kernel additionally rounds
the probabilities to bf16 before the PV product; that is an implementation error term, not part of
the specification (see docs/ops/forward.md for the tolerance). fp8 K/V (e4m3fnuz) enter as their exact
values times the head's descale: K = k_descale[h] * k, V = v_descale[h] * v.
"""
from __future__ import annotations

import math

import torch

from moonmath_common.numerics import e4m3fnuz_to_f32, round_bf16, softmax_attention


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str, round_mode: str, softcap: float = 0.0,
            sinks: torch.Tensor | None = None, k_descale: torch.Tensor | None = None,
            v_descale: torch.Tensor | None = None, window: tuple[int, int] = (-1, -1)) -> torch.Tensor:
    """q [B,Sq,H,D] or [B,H,Sq,D] (per layout), k/v likewise with Skv; returns bf16 in q's layout. softcap > 0:
    scores s -> softcap * tanh(s / softcap); sinks (fp32 [H]): one more logit per row with a zero value; fp8 k/v:
    dequantised by the fp32 [H] descales; window (left, right), -1 unbounded: row i sees keys
    d - left <= j <= d + right, d = i + Skv - Sq (a row seeing no key gives 0)."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if k_descale is not None:
        k, v = _dequant(k, k_descale), _dequant(v, v_descale)
    B, H, Sq, D = q.shape
    Skv = k.shape[2]
    scale = 1.0 / math.sqrt(D)
    if softcap or sinks is not None or max(window) >= 0:
        o = _featured(q.float(), k.float(), v.float(), scale, softcap, sinks, window).reshape(B * H, Sq, v.shape[-1])
    else:
        o, _ = softmax_attention(q.reshape(B * H, Sq, D), k.reshape(B * H, Skv, D),
                                 v.reshape(B * H, Skv, v.shape[-1]), scale)
    out = round_bf16(o, round_mode).view(B, H, Sq, v.shape[-1])
    return out.transpose(1, 2) if layout == "bshd" else out


def window_mask(sq: int, skv: int, window: tuple[int, int], device: torch.device | None = None) -> torch.Tensor:
    """bool [Sq, Skv]: True where row i sees key j (end-aligned flash-attn window, -1 = unbounded)."""
    i = torch.arange(sq, device=device).view(-1, 1) + (skv - sq)
    j = torch.arange(skv, device=device).view(1, -1)
    keep = torch.ones(sq, skv, dtype=torch.bool, device=device)
    if window[0] >= 0:
        keep &= j >= i - window[0]
    if window[1] >= 0:
        keep &= j <= i + window[1]
    return keep


def _dequant(t: torch.Tensor, descale: torch.Tensor) -> torch.Tensor:
    """[B, H, S, D] e4m3fnuz -> fp32 exact values times descale[h]."""
    return e4m3fnuz_to_f32(t) * descale.float().view(1, -1, 1, 1)


def _featured(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float,
              sinks: torch.Tensor | None, window: tuple[int, int] = (-1, -1)) -> torch.Tensor:
    """[B, H, Sq, D] fp32 inputs: the soft-capped scores, the window's keys only, the sink as an extra key with a
    zero value row. A row with no key (and no sink) gives 0."""
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    keep = window_mask(s.shape[2], s.shape[3], window, s.device) if max(window) >= 0 else None
    if keep is not None:
        s = s.masked_fill(~keep, -torch.inf)
    if sinks is not None:
        B, H, Sq = s.shape[:3]
        s = torch.cat([s, sinks.float().to(s.device).view(1, H, 1, 1).expand(B, H, Sq, 1)], dim=-1)
        v = torch.cat([v, torch.zeros_like(v[..., :1, :])], dim=-2)
    p = torch.softmax(s, dim=-1)
    if keep is not None:   # a row with no key: 0 (the sink's extra column, when present, already gives that)
        p = p.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)
    return p @ v
