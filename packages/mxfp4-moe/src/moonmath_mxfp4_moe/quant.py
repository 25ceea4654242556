"""MXFP4 activations for the a4w4 MoE path: AITER's per-1x32 quantisation rule, its reference, and the
device op (gfx950: csrc/device/gfx950/mxfp4_quant.hip).

The rule (AITER's per_1x32 fp4 quantiser, which its fused_moe a4w4 path applies to the hidden states and
to the bf16 stage-1 output; docs/numerics.md restates it): for each group of 32 consecutive k of a row,
    amax  = max(1e-10, max |x|) in fp32
    P     = amax rounded to a power of two on its fp32 bits: the exponent field E goes up by one when
            mantissa bit 22 is set (for a normal amax; the floor keeps it normal); E = 255 stays
    scale = the fp32 exponent field of P * 0.25                                    (the E8M0 byte)
    code  = E2M1(x / 2^(scale - 127)): nearest of 0, .5, 1, 1.5, 2, 3, 4, 6, ties to the even code,
            saturating at 6, sign kept (-0 and small negatives give code 0x8); scale 255 gives 0x7
            (the hardware conversion reads the scale as NaN)
Layout: codes uint8 ``[rows, K/2]``, byte b = k 2b (low nibble), 2b + 1 (high nibble) (AITER's fp4x2);
scales uint8 ``[rows, K/32]`` (AITER's unshuffled scale layout).

MXFP8 activations (a8w4): AITER's per_1x32_f8_scale_f8_quant with E8M0 scales, dtype max 2^floor(log2 448) =
256 in place of 4: the same amax (floored at 1e-10 as our fp4 quantiser does; AITER's torch form has no floor,
which changes only the scale byte of an all-zero group), the same P, scale = the exponent field of P / 256,
code = OCP e4m3 (float8_e4m3fn) of x / 2^(scale - 127), round to nearest even. |x| / 2^(scale - 127) < 1.5 * 256
= 384 < 448, so no code saturates. Layout: codes float8_e4m3fn ``[rows, K]``, scales uint8 ``[rows, K/32]``.
"""
from __future__ import annotations

import torch

from moonmath_common import checks, get_backend, target_arch
from moonmath_common.numerics import e8m0_to_f32, unpack_e2m1

GROUP = 32
AMAX_FLOOR = 1e-10
LOG2_MAX_E4M3 = 8  # 256 = 2^floor(log2 448)
THREADS = 64  # per workgroup: the groups of a decode batch spread over more CUs (mxfp4_quant.hip)
# |v| upper bounds of E2M1 codes 0..6 under round-to-nearest-even: the midpoints between neighbours, a
# midpoint going to the even code (0, 2, 4, 6), i.e. included in the lower code when that one is even.
_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def scale_bytes(amax: torch.Tensor, log2_max: int = 2) -> torch.Tensor:
    """E8M0 bytes (uint8) of fp32 group maxima ``amax`` (already floored at 1e-10) by AITER's rule: P / 2^log2_max,
    2^log2_max the format's largest power of two (E2M1: 4; E4M3: 256, LOG2_MAX_E4M3)."""
    u = amax.to(torch.float32).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    e = (u >> 23) & 0xFF
    m = u & 0x7FFFFF
    up = (e != 0xFF) & ((m & 0x400000) != 0) & (((m & 0x200000) != 0) | ((m & 0x1FFFFF) != 0) | (e != 0))
    e = e + up.to(torch.int64)
    p = (e << 23).to(torch.int32).view(torch.float32)          # 2^(e-127); e = 255 is +inf
    return ((p * 2.0 ** -log2_max).view(torch.int32).to(torch.int64) >> 23 & 0xFF).to(torch.uint8)


def e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (uint8, 0..15) of float64 values: round to nearest even, saturate at +-6, sign kept."""
    a = v.abs()
    mag = torch.zeros(a.shape, dtype=torch.int64, device=a.device)
    for code, bound in enumerate(_BOUNDS):
        above = (a > bound) if code % 2 == 0 else (a >= bound)  # a tie goes to the even code
        mag = torch.where(above, torch.full_like(mag, code + 1), mag)
    sign = torch.signbit(v).to(torch.int64) << 3
    return (mag | sign).to(torch.uint8)


def quantize_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """AITER's per-1x32 MXFP4 quantisation of bf16 ``x [rows, K]`` (K % 32 == 0) in plain torch:
    (codes uint8 ``[rows, K/2]``, scales uint8 ``[rows, K/32]``)."""
    rows, K = x.shape
    g, amax = _group_amax(x)
    s = scale_bytes(amax)
    v = g / torch.pow(2.0, s.to(torch.float64) - 127.0)[..., None]
    codes = e2m1_codes(v)
    codes = torch.where((s == 0xFF)[..., None], torch.full_like(codes, 0x7), codes)
    codes = codes.reshape(rows, K)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return packed.contiguous(), s.contiguous()


def _group_amax(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x as float64 groups [rows, K/32, 32], their fp32 amax floored at 1e-10)."""
    rows, K = x.shape
    g = x.to(torch.float64).reshape(rows, K // GROUP, GROUP)
    return g, torch.maximum(g.abs().amax(dim=-1).to(torch.float32), torch.tensor(AMAX_FLOOR, dtype=torch.float32))


def mxfp8_quantize_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """MXFP8 quantisation of bf16 ``x [rows, K]`` (K % 32 == 0) by the rule above in plain torch:
    (codes float8_e4m3fn ``[rows, K]``, scales uint8 ``[rows, K/32]``). x finite."""
    rows, K = x.shape
    g, amax = _group_amax(x)
    s = scale_bytes(amax, LOG2_MAX_E4M3)
    v = g * torch.pow(2.0, 127.0 - s.to(torch.float64))[..., None]  # exact: a power-of-two factor
    return v.reshape(rows, K).to(torch.float8_e4m3fn).contiguous(), s.contiguous()


def dequantize_mxfp8(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """fp32 ``[rows, K]`` values of MXFP8 activations (codes float8_e4m3fn ``[rows, K]``, scales ``[rows, K/32]``)."""
    return codes.to(torch.float32) * e8m0_to_f32(scales).repeat_interleave(GROUP, dim=1)


def dequantize(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """fp32 ``[rows, K]`` values of MXFP4 activations (codes ``[rows, K/2]``, scales ``[rows, K/32]``); exact."""
    v = unpack_e2m1(codes)
    return v * e8m0_to_f32(scales).repeat_interleave(GROUP, dim=1)


def _check_x(x) -> tuple[int, int]:
    checks.tensor("x", x, dtype=torch.bfloat16, ndim=2, last_dim_contiguous=True)
    rows, K = x.shape
    if K % GROUP or K == 0:
        raise ValueError(f"x must have K (x.shape[1]) a positive multiple of 32 (one E8M0 scale per 32 k); got {K}")
    return rows, K


def _check(x, q, s, fp8: bool = False) -> tuple[int, int]:
    rows, K = _check_x(x)
    if fp8:
        checks.tensor("out_codes", q, dtype=torch.float8_e4m3fn, shape=[rows, K], contiguous=True)
    else:
        checks.tensor("out_codes", q, dtype=torch.uint8, shape=[rows, K // 2], contiguous=True)
    checks.tensor("out_scales", s, dtype=torch.uint8, shape=[rows, K // GROUP], contiguous=True)
    checks.same_device(x=x, out_codes=q, out_scales=s)
    checks.no_overlap("out_codes", q, x=x, out_scales=s)
    checks.no_overlap("out_scales", s, x=x)
    return rows, K


def mxfp4_quantize(x: torch.Tensor, out_codes: torch.Tensor | None = None, out_scales: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise bf16 activations to MXFP4 by AITER's per-1x32 rule (module docstring; docs/numerics.md),
    bit for bit on every backend (the device kernel is gfx950's).

    Args:
        x: bf16 ``[rows, K]``, contiguous k, any row stride; K a positive multiple of 32.
        out_codes: optional uint8 ``[rows, K/2]`` contiguous (byte b: k = 2b low nibble, 2b + 1 high nibble).
        out_scales: optional uint8 ``[rows, K/32]`` contiguous (E8M0, one per 32 k).

    Returns ``(codes, scales)`` (out_codes / out_scales when given).
    """
    return _quantize(x, out_codes, out_scales, False)


def mxfp8_quantize(x: torch.Tensor, out_codes: torch.Tensor | None = None, out_scales: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise bf16 activations to MXFP8 (e4m3 + one E8M0 scale per 32 k) by AITER's per_1x32 fp8 rule (module
    docstring; docs/numerics.md), bit for bit on every backend (the device kernel is gfx950's): the a8w4 ops'
    activations.

    Args:
        x: bf16 ``[rows, K]``, contiguous k, any row stride; K a positive multiple of 32; finite.
        out_codes: optional float8_e4m3fn ``[rows, K]`` contiguous.
        out_scales: optional uint8 ``[rows, K/32]`` contiguous (E8M0, one per 32 k).

    Returns ``(codes, scales)`` (out_codes / out_scales when given).
    """
    return _quantize(x, out_codes, out_scales, True)


def _quantize(x, out_codes, out_scales, fp8: bool) -> tuple[torch.Tensor, torch.Tensor]:
    rows, K = _check_x(x)
    if out_codes is None:
        out_codes = torch.empty(rows, K if fp8 else K // 2, dtype=torch.float8_e4m3fn if fp8 else torch.uint8,
                                device=x.device)
    if out_scales is None:
        out_scales = torch.empty(rows, K // GROUP, dtype=torch.uint8, device=x.device)
    _check(x, out_codes, out_scales, fp8)
    if rows:
        _quant_op(x, out_codes, out_scales, fp8)
    return out_codes, out_scales


@torch.library.custom_op("moonmath::mx_quantize", mutates_args=("q", "s"))
def _quant_op(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, fp8: bool) -> None:
    if get_backend() == "reference":
        rq, rs = (mxfp8_quantize_reference if fp8 else quantize_reference)(x)
        q.copy_(rq)
        s.copy_(rs)
        return
    if fp8:
        launch_quant(x, q, s, "moonmath_mxfp4_moe.mxfp8_quantize", kernel="mxfp8_quant_bf16")
    else:
        launch_quant(x, q, s)


@_quant_op.register_fake
def _(x, q, s, fp8) -> None:
    return None


def launch_quant(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, op: str = "moonmath_mxfp4_moe.mxfp4_quantize",
                 kernel: str = "mxfp4_quant_bf16") -> dict | None:
    """Run mxfp4_quant_bf16 or mxfp8_quant_bf16 (gfx950). x rows must start on 16-byte boundaries (else x is
    copied)."""
    from .kernel import KERNELS

    rows, K = x.shape
    stride = x.stride(0) if rows > 1 else K
    if x.data_ptr() % 16 or (rows > 1 and stride * 2 % 16):
        x = x.clone(memory_format=torch.contiguous_format)
        stride = K
    groups = rows * (K // GROUP)
    if groups >= 1 << 32:
        raise ValueError(f"{op}: {groups} groups of 32; the kernel numbers them with 32 bits (split the call)")
    grid = (-(-groups // THREADS), 1, 1)
    return KERNELS.launch(op, target_arch(), "mxfp4_quant", kernel, grid, THREADS,
                          [x, q, s, rows, K, stride])
