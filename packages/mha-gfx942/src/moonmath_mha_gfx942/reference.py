"""Reference backend of the gfx942 MHA forward: plain torch, fp32 accumulation.

out = round_mode( softmax(q k^T / sqrt(128)) v )  computed in fp32 from the exact bf16 inputs, then
rounded once to bf16 by the requested rule (NaN -> canonical 0x7FFF). The kernel additionally rounds
the probabilities to bf16 before the PV product; that is an implementation error term, not part of
the specification (see docs/ops/forward.md for the tolerance).
"""
from __future__ import annotations

import math

import torch

from moonmath_common.numerics import round_bf16, softmax_attention

SCALE = 1.0 / math.sqrt(128.0)


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str, round_mode: str) -> torch.Tensor:
    """q [B,Sq,H,D] or [B,H,Sq,D] (per layout), k/v likewise with Skv; returns bf16 in q's layout."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    B, H, Sq, D = q.shape
    Skv = k.shape[2]
    o, _ = softmax_attention(q.reshape(B * H, Sq, D), k.reshape(B * H, Skv, D),
                             v.reshape(B * H, Skv, v.shape[-1]), SCALE)
    out = round_bf16(o, round_mode).view(B, H, Sq, v.shape[-1])
    return out.transpose(1, 2) if layout == "bshd" else out
