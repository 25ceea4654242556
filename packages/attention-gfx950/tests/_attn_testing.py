"""Helpers shared by the gfx950 attention tests."""
from __future__ import annotations

import torch

bf = torch.bfloat16


def rnd(*shape, seed, scale=1.0):
    """A seeded normal bf16 tensor (times scale)."""
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale).to(bf)
