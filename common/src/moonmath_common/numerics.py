"""Bit-exact number formats shared by every reference backend (plain torch, any device).

- bf16 rounding of fp32 values by an explicit rule: RTNE (ties to even), RTNA (ties away from zero),
  RTZ (truncate). Every mode writes NaN as the canonical bf16 NaN 0x7FFF; infinities and overflow
  behave as the rule says (RTNE/RTNA round a finite value past the bf16 max to +-inf, RTZ never does).
- fp8 decoding: e4m3fnuz (gfx942: bias 8, no infinities, 0x80 is the only NaN, max 240) and OCP e4m3fn
  (gfx950: bias 7, no infinities, 0x7F/0xFF are NaN, max 448), decoded from their bit patterns.
- MXFP4: E2M1 nibbles (magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign) and E8M0 scale bytes
  (2^(e-127); 0xFF is NaN).

The rounding rules are the usual integer forms on the fp32 bit pattern u (the bf16 result is the high
half): RTNE u + 0x7FFF + ((u >> 16) & 1), RTNA u + 0x8000, RTZ u.
"""
from __future__ import annotations

import torch

ROUND_MODES = ("rtne", "rtna", "rtz")
BF16_CANONICAL_NAN = 0x7FFF


def round_bf16(x: torch.Tensor, mode: str = "rtne") -> torch.Tensor:
    """Round a float tensor to bf16 with `mode` in {"rtne", "rtna", "rtz"}; NaN becomes 0x7FFF.

    Values of other float dtypes are first converted to fp32 (exactly for bf16/fp16; fp64 is rounded
    to fp32 by torch's RTNE first, so pass fp32 for a single rounding)."""
    if mode not in ROUND_MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, ROUND_MODES))}; got {mode!r}")
    f = x.to(torch.float32).contiguous()
    u = f.view(torch.int32)
    if mode == "rtne":
        u = u + (0x7FFF + ((u >> 16) & 1))
    elif mode == "rtna":
        u = u + 0x8000
    # int32 arithmetic cannot overflow here: finite |x| keeps u + 0x8000 inside its sign's range,
    # and NaN patterns (which could wrap) are replaced below.
    hi = (u >> 16).to(torch.int16)
    hi = torch.where(torch.isnan(f), torch.full_like(hi, BF16_CANONICAL_NAN), hi)
    return hi.view(torch.bfloat16)


def bf16_bits(x: torch.Tensor) -> torch.Tensor:
    """The 16-bit patterns of a bf16 tensor as int32 in [0, 65535] (for bitwise comparisons)."""
    if x.dtype != torch.bfloat16:
        raise TypeError(f"x must have dtype bfloat16; got {x.dtype}")
    return x.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def _fp8_table(bias: int, fnuz: bool) -> torch.Tensor:
    """fp32 values of the 256 e4m3 byte patterns (fnuz: 0x80 is NaN; fn: 0x7F and 0xFF are NaN)."""
    b = torch.arange(256, dtype=torch.int64)
    sign = torch.where((b & 0x80) != 0, -1.0, 1.0).to(torch.float64)
    exp = (b >> 3) & 0xF
    man = (b & 0x7).to(torch.float64)
    normal = (1.0 + man / 8.0) * torch.pow(2.0, (exp - bias).to(torch.float64))
    subnormal = (man / 8.0) * 2.0 ** (1 - bias)
    val = sign * torch.where(exp == 0, subnormal, normal)
    if fnuz:
        nan = b == 0x80
    else:
        nan = (b & 0x7F) == 0x7F
    val = torch.where(nan, torch.full_like(val, float("nan")), val)
    return val.to(torch.float32)


_E4M3FNUZ = _fp8_table(bias=8, fnuz=True)
_E4M3FN = _fp8_table(bias=7, fnuz=False)


def _fp8_bytes(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if x.dtype == dtype:
        return x.contiguous().view(torch.uint8)
    if x.dtype == torch.uint8:
        return x
    raise TypeError(f"x must have dtype {str(dtype).replace('torch.', '')} or uint8 (raw bytes); got "
                    f"{str(x.dtype).replace('torch.', '')}")


def e4m3fnuz_to_f32(x: torch.Tensor) -> torch.Tensor:
    """Exact fp32 values of float8_e4m3fnuz data (or its raw uint8 bytes), decoded from the bits."""
    idx = _fp8_bytes(x, torch.float8_e4m3fnuz).to(torch.int64)
    return _E4M3FNUZ.to(idx.device)[idx]


def e4m3fn_to_f32(x: torch.Tensor) -> torch.Tensor:
    """Exact fp32 values of OCP float8_e4m3fn data (or its raw uint8 bytes), decoded from the bits."""
    idx = _fp8_bytes(x, torch.float8_e4m3fn).to(torch.int64)
    return _E4M3FN.to(idx.device)[idx]


_E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E2M1 = torch.tensor(list(_E2M1_MAGNITUDES) + [-m for m in _E2M1_MAGNITUDES], dtype=torch.float32)


def e2m1_to_f32(nibbles: torch.Tensor) -> torch.Tensor:
    """fp32 values of E2M1 codes given one per element (integer tensor with values 0..15)."""
    if nibbles.dtype not in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        raise TypeError(f"nibbles must be an integer tensor; got {nibbles.dtype}")
    return _E2M1.to(nibbles.device)[(nibbles.to(torch.int64) & 0xF)]


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """Stock MXFP4 bytes [..., K/2] (byte b: k = 2b in the low nibble, 2b+1 in the high) -> fp32 [..., K]."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed must have dtype uint8; got {packed.dtype}")
    lo = packed & 0xF
    hi = packed >> 4
    codes = torch.stack((lo, hi), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)
    return e2m1_to_f32(codes)


def e8m0_to_f32(scales: torch.Tensor) -> torch.Tensor:
    """fp32 values 2^(e - 127) of E8M0 scale bytes; 0xFF is NaN. e = 0 gives 2^-127 (an fp32 subnormal)."""
    if scales.dtype != torch.uint8:
        raise TypeError(f"scales must have dtype uint8; got {scales.dtype}")
    e = scales.to(torch.float64) - 127.0
    v = torch.pow(torch.full_like(e, 2.0), e)
    v = torch.where(scales == 0xFF, torch.full_like(v, float("nan")), v)
    return v.to(torch.float32)


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                      key_end: torch.Tensor | None = None, *, chunk_elems: int = 1 << 24,
                      acc_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(scale * q k^T) v over independent groups, in `acc_dtype`, rows chunked to bound memory.

    q [G, Sq, D], k [G, Skv, D], v [G, Skv, Dv] (any float dtype; upcast exactly). Row i of group g
    attends keys j < key_end[g, i] (key_end [G, Sq] or [Sq] integers, clamped to [0, Skv]); no
    key_end means every key. Returns (o [G, Sq, Dv], lse [G, Sq]) in acc_dtype, lse the natural-log
    log-sum-exp of the scaled scores. A row that sees no key gives o = 0 and lse = -inf.
    """
    G, Sq, _ = q.shape
    Skv, Dv = k.shape[1], v.shape[2]
    o = torch.zeros(G, Sq, Dv, dtype=acc_dtype, device=q.device)
    lse = torch.full((G, Sq), float("-inf"), dtype=acc_dtype, device=q.device)
    if G == 0 or Sq == 0 or Skv == 0:
        return o, lse
    if key_end is not None:
        key_end = key_end.to(torch.int64).clamp(0, Skv).expand(G, Sq)
    rows = max(1, chunk_elems // max(1, G * Skv))
    kf, vf = k.to(acc_dtype), v.to(acc_dtype)
    cols = torch.arange(Skv, device=q.device)
    for r0 in range(0, Sq, rows):
        r1 = min(Sq, r0 + rows)
        s = torch.matmul(q[:, r0:r1].to(acc_dtype), kf.transpose(1, 2)) * scale
        if key_end is not None:
            live = cols.view(1, 1, Skv) < key_end[:, r0:r1, None]
            s = s.masked_fill(~live, float("-inf"))
        m = s.amax(dim=-1, keepdim=True)
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # empty rows: exp(-inf) = 0
        p = torch.exp(s - m)
        denom = p.sum(dim=-1, keepdim=True)
        oc = torch.matmul(p, vf) / denom
        empty = denom == 0
        o[:, r0:r1] = torch.where(empty, torch.zeros_like(oc), oc)
        lse[:, r0:r1] = (m + torch.log(denom)).squeeze(-1)
    return o, lse


__all__ = [
    "BF16_CANONICAL_NAN", "ROUND_MODES", "bf16_bits", "e2m1_to_f32", "e4m3fn_to_f32", "e4m3fnuz_to_f32",
    "e8m0_to_f32", "round_bf16", "softmax_attention", "unpack_e2m1",
]
