"""MXFP4 weight layouts: the stock layout, the kernels' repacked layout, and the maps between them.

Stock weights ``[E, N, K/2]`` uint8: byte b of a row holds k = 2b (low nibble) and k = 2b + 1 (high
nibble), E2M1 codes. Stock scales ``[E, N, K/32]`` uint8 E8M0, one per 32 k of a column.

Repacked weights ``[E, K/32, N, 16]``: each 16-byte granule is the 32 k of one column for one scale
group; inside each 8-k group (4 bytes) byte j holds k = 8i + j (low nibble) and k = 8i + 4 + j (high
nibble), and the code 0x8 (-0) is written as 0x0 (+0). Repacked scales ``[E, K/32, N]``.
"""
from __future__ import annotations

import torch

from moonmath_common import checks


def _check_weights(name: str, B: object) -> torch.Tensor:
    checks.tensor(name, B, dtype=torch.uint8, ndim=3)
    if B.shape[2] % 16:
        raise ValueError(f"{name} must be [E, N, K/2] with K/2 a multiple of 16 (K a multiple of 32, one E8M0 scale "
                         f"per 32 k); got K/2 = {B.shape[2]} (shape {list(B.shape)})")
    return B


def repack_mxfp4(B: torch.Tensor) -> torch.Tensor:
    """Stock MXFP4 weights uint8 ``[E, N, K/2]`` -> the kernels' layout uint8 ``[E, K/32, N, 16]`` (contiguous).

    Do this once when loading weights. -0 codes become +0 (the only lossy step; values are unchanged).

    Args:
        B: uint8 ``[E, N, K/2]`` E2M1 codes, two per byte (k = 2b low nibble, 2b+1 high), K a multiple of 32.

    Returns:
        uint8 ``[E, K/32, N, 16]`` contiguous, on B's device.
    """
    _check_weights("B", B)
    E, N, half = B.shape
    x = B.reshape(E, N, half // 4, 4)
    codes = torch.stack((x & 0xF, x >> 4), dim=-1).reshape(E, N, half // 4, 8)  # natural k order per 8-k group
    codes = torch.where(codes == 0x8, torch.zeros_like(codes), codes)
    packed = codes[..., :4] | (codes[..., 4:] << 4)
    return packed.reshape(E, N, half // 16, 16).permute(0, 2, 1, 3).contiguous()


def repack_mxfp4_scales(Bs: torch.Tensor) -> torch.Tensor:
    """Stock E8M0 scales uint8 ``[E, N, K/32]`` -> uint8 ``[E, K/32, N]`` (contiguous).

    Args:
        Bs: uint8 ``[E, N, K/32]`` E8M0 scales, one per 32 k of a column.

    Returns:
        uint8 ``[E, K/32, N]`` contiguous.
    """
    checks.tensor("Bs", Bs, dtype=torch.uint8, ndim=3)
    return Bs.transpose(1, 2).contiguous()


def unrepack_mxfp4(B: torch.Tensor) -> torch.Tensor:
    """Inverse of repack_mxfp4: uint8 ``[E, K/32, N, 16]`` -> stock ``[E, N, K/2]`` (-0 comes back as +0).

    Args:
        B: uint8 ``[E, K/32, N, 16]``, a repack_mxfp4 output.

    Returns:
        uint8 ``[E, N, K/2]`` contiguous.
    """
    checks.tensor("B", B, dtype=torch.uint8, ndim=4)
    if B.shape[3] != 16:
        raise ValueError(f"B must be [E, K/32, N, 16] (repack_mxfp4 output); got {list(B.shape)}")
    E, G, N, _ = B.shape
    x = B.permute(0, 2, 1, 3).reshape(E, N, G * 4, 4)
    codes = torch.cat((x & 0xF, x >> 4), dim=-1)                                   # k = j, then 4 + j
    pairs = codes.reshape(E, N, G * 4, 4, 2)                                       # natural k order, pairs
    return (pairs[..., 0] | (pairs[..., 1] << 4)).reshape(E, N, G * 16)


def unrepack_mxfp4_scales(Bs: torch.Tensor) -> torch.Tensor:
    """Inverse of repack_mxfp4_scales: uint8 ``[E, K/32, N]`` -> ``[E, N, K/32]``.

    Args:
        Bs: uint8 ``[E, K/32, N]``, a repack_mxfp4_scales output.

    Returns:
        uint8 ``[E, N, K/32]`` contiguous.
    """
    checks.tensor("Bs", Bs, dtype=torch.uint8, ndim=3)
    return Bs.transpose(1, 2).contiguous()
