"""Test-side quantisers for the MLA KV formats (our own definitions, documented in docs/numerics.md).

quantize_mxfp4: OCP MX v1.0 per 32-element block: shared exponent X = floor(log2(amax)) - 2 (E2M1's emax),
    E8M0 byte X + 127 (clamped to [0, 254]), elements x / 2^X rounded to nearest E2M1 (ties to the even
    code), saturating at +-6. A zero block gets X = -127 and zero codes.
quantize_fp8: dynamic per-tensor: scale = max(amax, 1e-12) / fp8 max; x / scale clamped to +-max, rounded
    RTNE to the fp8 dtype (torch's cast); dequantise as fp8 * scale.
"""
from __future__ import annotations

import torch

E2M1_GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., K] (K % 32 == 0) -> (codes uint8 [..., K/2] (element 2b in the low nibble of byte b),
    scales uint8 [..., K/32] (E8M0))."""
    K = x.shape[-1]
    xb = x.double().reshape(*x.shape[:-1], K // 32, 32)
    amax = xb.abs().amax(dim=-1, keepdim=True)
    X = torch.where(amax > 0, torch.floor(torch.log2(torch.where(amax > 0, amax, torch.ones_like(amax)))) - 2,
                    torch.full_like(amax, -127.0)).clamp(-127, 127)
    y = (xb.abs() / torch.exp2(X)).unsqueeze(-1)                             # [..., blocks, 32, 1]
    d = (y - E2M1_GRID).abs() + (torch.arange(8) % 2).double() * 1e-12       # ties -> even code
    mag = d.argmin(dim=-1)                                                   # saturates at 6 (code 7)
    code = (mag | ((xb < 0).long() << 3)).reshape(*x.shape[:-1], K).to(torch.uint8)
    packed = code[..., 0::2] | (code[..., 1::2] << 4)
    scales = (X.squeeze(-1) + 127).clamp(0, 254).to(torch.uint8)
    return packed, scales


def quantize_fp8(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn) -> tuple[torch.Tensor, float]:
    fmax = torch.finfo(dtype).max
    scale = max(float(x.float().abs().amax()), 1e-12) / fmax
    return (x.float() / scale).clamp(-fmax, fmax).to(dtype), scale
