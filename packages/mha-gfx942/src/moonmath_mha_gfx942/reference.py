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
            v_descale: torch.Tensor | None = None) -> torch.Tensor:
    """q [B,Sq,H,D] or [B,H,Sq,D] (per layout), k/v likewise with Skv; returns bf16 in q's layout. softcap > 0:
    scores s -> softcap * tanh(s / softcap); sinks (fp32 [H]): one more logit per row with a zero value; fp8 k/v:
    dequantised by the fp32 [H] descales."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if k_descale is not None:
        k, v = _dequant(k, k_descale), _dequant(v, v_descale)
    B, H, Sq, D = q.shape
    Skv = k.shape[2]
    scale = 1.0 / math.sqrt(D)
    if softcap or sinks is not None:
        o = _featured(q.float(), k.float(), v.float(), scale, softcap, sinks).reshape(B * H, Sq, v.shape[-1])
    else:
        o, _ = softmax_attention(q.reshape(B * H, Sq, D), k.reshape(B * H, Skv, D),
                                 v.reshape(B * H, Skv, v.shape[-1]), scale)
    out = round_bf16(o, round_mode).view(B, H, Sq, v.shape[-1])
    return out.transpose(1, 2) if layout == "bshd" else out


def _dequant(t: torch.Tensor, descale: torch.Tensor) -> torch.Tensor:
    """[B, H, S, D] e4m3fnuz -> fp32 exact values times descale[h]."""
    return e4m3fnuz_to_f32(t) * descale.float().view(1, -1, 1, 1)


def _featured(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float,
              sinks: torch.Tensor | None) -> torch.Tensor:
    """[B, H, Sq, D] fp32 inputs: the soft-capped scores, the sink as an extra key with a zero value row."""
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if sinks is not None:
        B, H, Sq = s.shape[:3]
        s = torch.cat([s, sinks.float().to(s.device).view(1, H, 1, 1).expand(B, H, Sq, 1)], dim=-1)
        v = torch.cat([v, torch.zeros_like(v[..., :1, :])], dim=-2)
    return torch.softmax(s, dim=-1) @ v
