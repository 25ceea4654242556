// Number formats: bf16 rounding (RTNE / RTNA / RTZ, canonical NaN), fp8, E2M1, E8M0 decode.
#pragma once
#include "moonmath/prelude.hpp"

namespace mm {

enum class Round { RTNE, RTNA, RTZ };

constexpr uint16_t kBf16CanonicalNaN = 0x7FFF;

// f32 -> bf16 bits. RTNE: u + 0x7FFF + lsb; RTNA: u + 0x8000; RTZ: truncate. Any NaN becomes the
// canonical 0x7FFF (the rounding add could otherwise carry a NaN payload into Inf).
template <Round R>
MM_DEVICE uint16_t f32_to_bf16(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if (__builtin_isnan(f)) return kBf16CanonicalNaN;
  if constexpr (R == Round::RTNE) u += 0x7FFFu + ((u >> 16) & 1u);
  else if constexpr (R == Round::RTNA) u += 0x8000u;
  return (uint16_t)(u >> 16);
}

#if defined(__gfx950__)
// Two f32 -> two bf16 (RTNE, denormals kept) by v_cvt_pk_bf16_f32 alone: pack_bf16x2<Round::RTNE>'s bits for
// every value but NaN, whose payload the conversion keeps. For values known to hold no NaN (one VALU a pair).
MM_DEVICE uint32_t pack_bf16x2_finite(float lo, float hi) {
  typedef float f32x2_t __attribute__((ext_vector_type(2)));
  typedef __bf16 bf16x2_t __attribute__((ext_vector_type(2)));
  return __builtin_bit_cast(uint32_t, __builtin_convertvector((f32x2_t{lo, hi}), bf16x2_t));
}
#endif

// Two f32 -> one dword of two bf16 (lo in bits 0..15). gfx950 RTNE: pack_bf16x2_finite after a NaN select (the
// f32 NaN 0x7FFF0000 becomes 0x7FFF): the same bits for every value in 3 VALU per pair instead of ~10.
template <Round R>
MM_DEVICE uint32_t pack_bf16x2(float lo, float hi) {
#if defined(__gfx950__)
  if constexpr (R == Round::RTNE) {
    const float qnan = __builtin_bit_cast(float, 0x7FFF0000u);
    return pack_bf16x2_finite(__builtin_isnan(lo) ? qnan : lo, __builtin_isnan(hi) ? qnan : hi);
  }
#endif
  return (uint32_t)f32_to_bf16<R>(lo) | ((uint32_t)f32_to_bf16<R>(hi) << 16);
}

MM_DEVICE float bf16_to_f32(uint16_t b) { return __builtin_bit_cast(float, (uint32_t)b << 16); }
MM_DEVICE float bf16_lo(uint32_t w) { return __builtin_bit_cast(float, w << 16); }
MM_DEVICE float bf16_hi(uint32_t w) { return __builtin_bit_cast(float, w & 0xFFFF0000u); }

// fp8 e4m3fnuz (gfx942's native fp8): bias 8, no Inf, 0x80 is the only NaN, max 240.
MM_DEVICE float fp8_e4m3fnuz_to_f32(uint32_t b) {
  b &= 0xFF;
  if (b == 0x80) return __builtin_nanf("");
  uint32_t sign = (b & 0x80u) << 24, exp = (b >> 3) & 0xF, man = b & 0x7;
  float mag;
  if (exp == 0) mag = (float)man * 0x1p-10f;  // subnormal: man * 2^(1-8-3)
  else mag = __builtin_bit_cast(float, ((exp + 127 - 8) << 23) | (man << 20));
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, mag) | sign);
}

// OCP fp8 e4m3fn (gfx950's native fp8): bias 7, no Inf, S.1111.111 is NaN, max 448.
MM_DEVICE float fp8_e4m3fn_to_f32(uint32_t b) {
  b &= 0xFF;
  if ((b & 0x7F) == 0x7F) return __builtin_nanf("");
  uint32_t sign = (b & 0x80u) << 24, exp = (b >> 3) & 0xF, man = b & 0x7;
  float mag;
  if (exp == 0) mag = (float)man * 0x1p-9f;  // subnormal: man * 2^(1-7-3)
  else mag = __builtin_bit_cast(float, ((exp + 127 - 7) << 23) | (man << 20));
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, mag) | sign);
}

// E2M1 (MXFP4 element): bias 1, values {0, 0.5, 1, 1.5, 2, 3, 4, 6} with a sign bit; no NaN/Inf.
MM_DEVICE float e2m1_to_f32(uint32_t nibble) {
  nibble &= 0xF;
  uint32_t exp = (nibble >> 1) & 0x3, man = nibble & 1;
  float mag = exp == 0 ? 0.5f * (float)man
                       : __builtin_bit_cast(float, ((exp + 127 - 1) << 23) | (man << 22));
  return (nibble & 8) ? -mag : mag;
}

// E8M0 (MX block scale): 2^(e - 127); 0xFF is NaN. e == 0 gives 2^-127 (an f32 subnormal).
MM_DEVICE float e8m0_to_f32(uint32_t e) {
  e &= 0xFF;
  if (e == 0xFF) return __builtin_nanf("");
  if (e == 0) return 0x1p-127f;
  return __builtin_bit_cast(float, e << 23);
}

}  // namespace mm
