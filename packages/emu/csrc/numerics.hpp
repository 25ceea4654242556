// moonmath-emu numerics: pure, header-only conversions between f32 and the narrow formats the
// CDNA3 (gfx942) and CDNA4 (gfx950) instructions use.
//
// Everything here is a pure function of its arguments: no MODE register, no global state. The
// caller (the VALU / MFMA executor) decides denormal flushing and rounding mode from the kernel
// descriptor / MODE register and picks the matching function.
//
// Formats (sources: the OCP 8-bit floating point spec rev 1.0 and OCP MX spec v1.0 for e4m3fn, e5m2,
// e2m3, e3m2, e2m1 and e8m0; AMD's CDNA3 ISA guide and its low-precision-types documentation for the
// FNUZ formats; summarised in AMD's "Matrix Core Programming on CDNA3 and CDNA4" ROCm blog table):
//
//   name        exp man bias  max finite  zero      NaN                     Inf
//   e4m3fnuz     4   3   8    240         0x00 only 0x80 only               none   (gfx942 "fp8")
//   e5m2fnuz     5   2  16    57344       0x00 only 0x80 only               none   (gfx942 "bf8")
//   e4m3fn       4   3   7    448         +-0       S.1111.111              none   (gfx950 "fp8", OCP)
//   e5m2         5   2  15    57344       +-0       S.11111.{01,10,11}      S.11111.00 (gfx950 "bf8")
//   e2m3 (fp6)   2   3   1    7.5         +-0       none                    none
//   e3m2 (bf6)   3   2   3    28          +-0       none                    none
//   e2m1 (fp4)   2   1   1    6           +-0       none                    none
//   e8m0 scale   8   0 127    2^127       none      0xFF                    none   value 2^(e-127)
//
// Encoding (f32 -> narrow) is round-to-nearest-even on the exact f32 value, with gradual underflow
// into the narrow format's denormals. What happens above the largest finite value is the
// instruction's business, so the encoders take an explicit overflow policy:
//   * saturate == false: a finite value whose RNE result would exceed max-finite becomes NaN (FNUZ:
//     0x80; e4m3fn: S.1111.111) or Inf (e5m2: S.11111.00); +-Inf input likewise becomes NaN / Inf.
//   * saturate == true : finite overflow and +-Inf clamp to +-max-finite. NaN stays NaN.
// The hardware conversions v_cvt_pk_fp8_f32 / v_cvt_pk_bf8_f32 / v_cvt_sr_* use RNE (their
// pseudocode forces ROUND_NEAREST_EVEN) and, as far as the public evidence goes, do NOT saturate
// unless the VOP3 clamp bit is set: AMD's own hip_fp8 headers clamp in software (v_med3 to +-240 /
// +-57344) before v_cvt_pk_fp8_f32 when saturation is wanted, and AMD's rocjitsu emulator returns
// NaN for E4M3 overflow of v_cvt_pk_fp8_f32. The ISA guide text for the clamp bit on these
// instructions was not available to us; "clamp => saturate (incl. Inf)" is our reading and is
// marked UNVERIFIED in docs/emulator.md.
// Formats without NaN/Inf (fp6/fp4) always saturate; a NaN input encodes as +-max (UNVERIFIED:
// the OCP MX spec leaves NaN -> fp6/fp4 conversion implementation defined).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace mmemu {
namespace num {

// ---------------------------------------------------------------------------------------------
// bit casts
inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t bits_from_f32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline double f64_from_bits(uint64_t u) { double d; std::memcpy(&d, &u, 8); return d; }
inline uint64_t bits_from_f64(double d) { uint64_t u; std::memcpy(&u, &d, 8); return u; }

inline bool f32_is_nan(uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu); }
inline bool f32_is_denorm(uint32_t u) { return (u & 0x7f800000u) == 0 && (u & 0x007fffffu); }

// Flush an f32 denormal to a signed zero (for callers honouring a "denormals off" mode).
inline uint32_t f32_flush_denorm(uint32_t u) { return f32_is_denorm(u) ? (u & 0x80000000u) : u; }

// Round a double to f32, round-to-nearest-even (the host's default rounding mode; we never
// change it). Denormal f32 results are kept (gradual underflow).
inline float f32_round(double d) { return static_cast<float>(d); }

// ---------------------------------------------------------------------------------------------
// bf16
inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// f32 -> bf16, round to nearest even. NaN: keep sign and the top 7 mantissa bits and force the
// quiet bit (bit 6), so a NaN never turns into Inf by truncation. Overflow rounds to +-Inf (IEEE).
inline uint16_t f32_to_bf16_rne(float f) {
  uint32_t u = bits_from_f32(f);
  if (f32_is_nan(u)) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

// f32 -> bf16, round toward zero (truncation). NaN handled as in the RNE form (quiet bit forced).
inline uint16_t f32_to_bf16_rtz(float f) {
  uint32_t u = bits_from_f32(f);
  if (f32_is_nan(u)) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>(u >> 16);
}

// f32 -> bf16, round half away from zero ("RTNA", one of AITER's bf16 conversion modes).
inline uint16_t f32_to_bf16_rna(float f) {
  uint32_t u = bits_from_f32(f);
  if (f32_is_nan(u)) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x8000u;
  return static_cast<uint16_t>(u >> 16);
}

// ---------------------------------------------------------------------------------------------
// IEEE binary16
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));  // Inf / NaN (payload kept)
  if (exp == 0) {
    // zero or denormal: value = man * 2^-24, exact in f32
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

// f32 -> f16 with round-to-nearest-even (rtz=false) or round-toward-zero (rtz=true).
// Denormal f16 results are produced (gradual underflow). Overflow: RNE -> +-Inf, RTZ -> +-65504.
// NaN -> quiet NaN keeping sign and the top 9 payload bits.
inline uint16_t f32_to_f16(float f, bool rtz = false) {
  uint32_t u = bits_from_f32(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t exp = (u >> 23) & 0xffu;
  uint32_t man = u & 0x7fffffu;
  if (exp == 0xff) {
    if (man) return static_cast<uint16_t>(sign | 0x7e00u | (man >> 13));
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  int e = static_cast<int>(exp) - 127;  // unbiased (for f32 denormals this is -127: result is 0 anyway)
  if (exp == 0) return sign;            // f32 denormals are far below the f16 denormal range
  uint32_t m = man | 0x800000u;         // 24-bit significand, value = m * 2^(e-23)
  int shift;                            // how many low bits of m to drop
  uint32_t hexp;
  if (e >= -14) { shift = 13; hexp = static_cast<uint32_t>(e + 15); }
  else { shift = 13 + (-14 - e); hexp = 0; }
  if (shift > 24) return sign;  // below half the smallest denormal: rounds to zero in both modes
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (!rtz && (rem > half || (rem == half && (q & 1u)))) q += 1;
  // q holds the significand including the implicit bit for normals (1024..2048), or the denormal
  // mantissa (0..1024) when hexp == 0; a carry into the next binade is handled by the addition.
  uint32_t result;
  if (hexp == 0) result = q;  // q == 1024 becomes the smallest normal automatically
  else result = (hexp << 10) + (q - 1024u);
  if (result >= 0x7c00u) return static_cast<uint16_t>(sign | (rtz ? 0x7bffu : 0x7c00u));
  return static_cast<uint16_t>(sign | result);
}
inline uint16_t f32_to_f16_rne(float f) { return f32_to_f16(f, false); }
inline uint16_t f32_to_f16_rtz(float f) { return f32_to_f16(f, true); }

// ---------------------------------------------------------------------------------------------
// Narrow "minifloat" formats (fp8 / fp6 / fp4)
enum class Fmt : uint8_t {
  E4M3FNUZ,  // gfx942 fp8
  E5M2FNUZ,  // gfx942 bf8
  E4M3FN,    // gfx950 fp8 (OCP)
  E5M2,      // gfx950 bf8 (OCP)
  E2M3,      // fp6
  E3M2,      // bf6
  E2M1,      // fp4
};

struct FmtDesc {
  int ebits, mbits, bias;
  int bits;            // total width
  bool fnuz;           // single NaN at the "-0" encoding, no -0
  bool ieee_inf;       // all-ones exponent: mantissa 0 = Inf, else NaN (e5m2)
  bool top_code_nan;   // S.1111.111 is NaN, the rest of the top binade is finite (e4m3fn)
  double max_finite;
};

inline const FmtDesc& fmt_desc(Fmt f) {
  static const FmtDesc d[] = {
      {4, 3, 8, 8, true, false, false, 240.0},
      {5, 2, 16, 8, true, false, false, 57344.0},
      {4, 3, 7, 8, false, false, true, 448.0},
      {5, 2, 15, 8, false, true, false, 57344.0},
      {2, 3, 1, 6, false, false, false, 7.5},
      {3, 2, 3, 6, false, false, false, 28.0},
      {2, 1, 1, 4, false, false, false, 6.0},
  };
  return d[static_cast<int>(f)];
}

// Decode a narrow code (low `bits` bits of `code`) to its exact value (as float: every value of
// these formats is exactly representable in f32). NaN encodings decode to a quiet f32 NaN with the
// code's sign (FNUZ NaN has no sign: +NaN); e5m2 Inf decodes to +-Inf.
inline float decode(Fmt f, uint32_t code) {
  const FmtDesc& d = fmt_desc(f);
  code &= (1u << d.bits) - 1u;
  const uint32_t sign_bit = 1u << (d.bits - 1);
  const bool neg = (code & sign_bit) != 0;
  const uint32_t mag = code & (sign_bit - 1u);
  const uint32_t e = mag >> d.mbits;
  const uint32_t m = mag & ((1u << d.mbits) - 1u);
  const uint32_t emax = (1u << d.ebits) - 1u;
  if (d.fnuz && code == sign_bit) return f32_from_bits(0x7fc00000u);
  if (d.ieee_inf && e == emax) {
    if (m == 0) return neg ? -INFINITY : INFINITY;
    return f32_from_bits((neg ? 0x80000000u : 0u) | 0x7fc00000u);
  }
  if (d.top_code_nan && mag == sign_bit - 1u) return f32_from_bits((neg ? 0x80000000u : 0u) | 0x7fc00000u);
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), 1 - d.bias - d.mbits);
  else v = std::ldexp(static_cast<float>(m | (1u << d.mbits)), static_cast<int>(e) - d.bias - d.mbits);
  return neg ? -v : v;
}

// The format's NaN code for a given sign (formats without NaN: not used).
inline uint32_t nan_code(Fmt f, bool neg) {
  const FmtDesc& d = fmt_desc(f);
  const uint32_t sign_bit = 1u << (d.bits - 1);
  if (d.fnuz) return sign_bit;
  if (d.top_code_nan) return (neg ? sign_bit : 0u) | (sign_bit - 1u);   // S.1111.111
  if (d.ieee_inf) return (neg ? sign_bit : 0u) | (sign_bit - 1u);       // S.11111.11
  return 0;
}
inline bool has_nan(Fmt f) { const FmtDesc& d = fmt_desc(f); return d.fnuz || d.top_code_nan || d.ieee_inf; }

// Largest finite code for a sign.
inline uint32_t max_code(Fmt f, bool neg) {
  const FmtDesc& d = fmt_desc(f);
  const uint32_t sign_bit = 1u << (d.bits - 1);
  uint32_t mag;
  if (d.top_code_nan) mag = sign_bit - 2u;                       // S.1111.110
  else if (d.ieee_inf) mag = ((1u << d.ebits) - 2u) << d.mbits | ((1u << d.mbits) - 1u);  // S.11110.11
  else mag = sign_bit - 1u;                                      // all ones (fnuz, fp6, fp4)
  return (neg ? sign_bit : 0u) | mag;
}

// Encode a double (callers pass exact f32 values, or f32 * 2^k) with round-to-nearest-even.
// See the header comment for the overflow policy.
inline uint32_t encode(Fmt f, double x, bool saturate) {
  const FmtDesc& d = fmt_desc(f);
  const uint32_t sign_bit = 1u << (d.bits - 1);
  const bool neg = std::signbit(x);
  if (std::isnan(x)) return has_nan(f) ? nan_code(f, neg) : max_code(f, neg);
  const double ax = std::fabs(x);
  if (std::isinf(x)) {
    if (saturate || !has_nan(f)) return max_code(f, neg);
    if (d.ieee_inf) return (neg ? sign_bit : 0u) | (((1u << d.ebits) - 1u) << d.mbits);
    return nan_code(f, neg);
  }
  if (ax == 0.0) return d.fnuz ? 0u : (neg ? sign_bit : 0u);
  // quantum: spacing of representable values at ax's binade, never below the denormal spacing
  int ex;
  std::frexp(ax, &ex);  // ax = fr * 2^ex, fr in [0.5,1) -> unbiased exponent ex-1
  int e_unb = ex - 1;
  const int emin = 1 - d.bias;
  if (e_unb < emin) e_unb = emin;
  const double q = std::ldexp(1.0, e_unb - d.mbits);
  const double r = ax / q;  // exact: division by a power of two (no underflow for our inputs)
  double n = std::floor(r);
  const double frac = r - n;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) != 0.0)) n += 1.0;
  const double v = n * q;  // rounded magnitude (may be the next binade's first value)
  if (v > d.max_finite) {
    if (saturate || !has_nan(f)) return max_code(f, neg);
    if (d.ieee_inf) return (neg ? sign_bit : 0u) | (((1u << d.ebits) - 1u) << d.mbits);
    return nan_code(f, neg);
  }
  if (v == 0.0) return d.fnuz ? 0u : (neg ? sign_bit : 0u);
  // build the code from v
  int ev;
  std::frexp(v, &ev);
  int ebu = ev - 1;
  uint32_t code;
  if (ebu < emin) {  // denormal
    code = static_cast<uint32_t>(v / std::ldexp(1.0, emin - d.mbits));
  } else {
    const uint32_t mant = static_cast<uint32_t>(v / std::ldexp(1.0, ebu - d.mbits)) - (1u << d.mbits);
    code = (static_cast<uint32_t>(ebu + d.bias) << d.mbits) | mant;
  }
  return (neg ? sign_bit : 0u) | code;
}

inline uint8_t f32_to_fmt(Fmt f, float x, bool saturate) { return static_cast<uint8_t>(encode(f, x, saturate)); }

// gfx942 / gfx950 fp8 helpers by the ISA's names: "fp8" = e4m3 flavour, "bf8" = e5m2 flavour.
inline Fmt fp8_fmt(bool gfx950) { return gfx950 ? Fmt::E4M3FN : Fmt::E4M3FNUZ; }
inline Fmt bf8_fmt(bool gfx950) { return gfx950 ? Fmt::E5M2 : Fmt::E5M2FNUZ; }

// ---------------------------------------------------------------------------------------------
// E8M0 block scale: 2^(e-127); 0xFF is NaN. No zero, no sign.
inline float e8m0_to_f32(uint8_t e) {
  if (e == 0xff) return f32_from_bits(0x7fc00000u);
  if (e == 0) return f32_from_bits(0x00400000u);  // 2^-127 is an f32 denormal
  return f32_from_bits(static_cast<uint32_t>(e) << 23);
}
inline double e8m0_to_f64(uint8_t e) {
  if (e == 0xff) return std::nan("");
  return std::ldexp(1.0, static_cast<int>(e) - 127);
}

// gfx950 v_cvt_scalef32_* conversions. The scale operand is an f32 of which only the exponent field
// (bits 30:23, "exponent(S.f32)" in the ISA pseudocode) is used, as the E8M0 value 2^(e-127).
// Down-conversions divide by the scale before rounding, up-conversions multiply by it (ROCDL's
// description of cvt.scalef32.pk.*: "dividing by / multiplying by the exponent in scale"); the
// ISA's f32_to_fp8_scale etc. helpers are not spelled out in the public pseudocode, so the
// treatment of an all-ones exponent (e = 255, returned as NaN here) and the saturation behaviour
// (non-saturating, like v_cvt_pk_fp8_f32 without clamp) are UNVERIFIED.
inline int scalef32_exponent(uint32_t scale_f32_bits) { return static_cast<int>((scale_f32_bits >> 23) & 0xffu); }

inline uint32_t scaled_encode(Fmt f, float x, uint32_t scale_f32_bits, bool saturate = false) {
  const int e = scalef32_exponent(scale_f32_bits);
  if (e == 255) return encode(f, std::nan(""), saturate);
  return encode(f, std::ldexp(static_cast<double>(x), 127 - e), saturate);  // exact: power-of-two scaling
}

// Exact value of code * 2^(e-127) (as double); callers round to their destination format.
inline double scaled_decode(Fmt f, uint32_t code, uint32_t scale_f32_bits) {
  const int e = scalef32_exponent(scale_f32_bits);
  if (e == 255) return std::nan("");
  return std::ldexp(static_cast<double>(decode(f, code)), e - 127);
}

// Stochastic rounding helper for v_cvt_sr_*: the ISA pseudocode adds (random bits) to the f32
// mantissa below the kept bits (wrapping within the 23-bit mantissa field, exponent unchanged) and
// then converts with RNE. `rnd_shift` is 12 for fp8 (S1[31:12]) and 11 for bf8 (S1[31:11]).
inline float sr_perturb(float x, uint32_t rnd, int rnd_shift) {
  uint32_t u = bits_from_f32(x);
  uint32_t m = ((u & 0x7fffffu) + (rnd >> rnd_shift)) & 0x7fffffu;
  return f32_from_bits((u & 0xff800000u) | m);
}

}  // namespace num
}  // namespace mmemu
