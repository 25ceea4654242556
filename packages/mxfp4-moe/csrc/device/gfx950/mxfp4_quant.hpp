// AITER's per-1x32 MXFP4 quantisation of bf16 values (its a4w4 MoE path quantises the activations and
// the bf16 stage-1 output this way), restated from its documented rule (docs/numerics.md):
//   amax  = max(1e-10, max |x|) over the 32 values, in fp32
//   P     = amax rounded to a power of two on its fp32 bits: exponent + 1 when mantissa bit 22 is set
//           (and bit 21, any lower bit or the exponent is non-zero); an all-ones exponent stays (inf)
//   scale = the fp32 exponent field of P * 0.25 (0.25 = 2^-floor(log2 6)): the E8M0 byte
//   codes = E2M1(x / 2^(scale - 127)), round to nearest even, saturating at +-6: the hardware's
//           v_cvt_scalef32_pk_fp4_bf16, which AITER's quantiser issues as well
// Used by the quantise kernel (mxfp4_quant.hip) and the a4w4 gate/up epilogue (mxfp4_moe_a4w4.hip).
// MXFP8 (a8w4 activations): the same amax and P, scale = the exponent field of P / 256 (256 =
// 2^floor(log2 448), AITER's per_1x32_f8_scale_f8_quant with E8M0 scales), codes = OCP e4m3
// (x / 2^(scale - 127), round to nearest even) by v_cvt_scalef32_pk_fp8_bf16; |x| / 2^(scale-127) < 384,
// so no code saturates.
#pragma once
#include "moonmath/all.hpp"

namespace mm::moe {

constexpr float kAmaxFloor = 1e-10f;
typedef __bf16 bf16x2_t __attribute__((ext_vector_type(2)));

// The E8M0 byte of a group whose fp32 amax (already floored at kAmaxFloor) is `amax`: P / 2^LOG2_MAX, where
// 2^LOG2_MAX is the format's largest power of two (E2M1: 4 = 2^floor(log2 6); E4M3: 256 = 2^floor(log2 448)).
template <int LOG2_MAX = 2>
MM_DEVICE uint32_t quant_scale_byte(float amax) {
  const uint32_t u = __builtin_bit_cast(uint32_t, amax);
  uint32_t e = (u >> 23) & 0xFFu;
  if (e != 0xFFu && (u & 0x400000u) && ((u & 0x200000u) || (u & 0x1FFFFFu) || e)) e += 1u;
  const float scale = __builtin_bit_cast(float, e << 23) * (1.0f / (float)(1 << LOG2_MAX));
  return (__builtin_bit_cast(uint32_t, scale) >> 23) & 0xFFu;
}
constexpr int kLog2MaxE4M3 = 8;

// The fp32 operand of the scaled conversions whose exponent field is the E8M0 byte `scale`.
MM_DEVICE float scale_operand(uint32_t scale) { return __builtin_bit_cast(float, scale << 23); }

// Two bf16 (one dword: lo half, hi half) -> one E2M1 byte (lo nibble = lo half) placed in byte Sel of
// `old`, the other bytes kept.
template <int Sel>
MM_DEVICE uint32_t cvt_fp4x2(uint32_t old, uint32_t bf16x2_bits, float scale) {
  return __builtin_amdgcn_cvt_scalef32_pk_fp4_bf16(old, __builtin_bit_cast(bf16x2_t, bf16x2_bits), scale, Sel);
}

// |x| of both halves of a bf16 pair, max'ed into amax (fp32, NaN-ignoring max as v_max_f32).
MM_DEVICE float amax_bf16x2(float amax, uint32_t w) {
  amax = __builtin_fmaxf(amax, __builtin_fabsf(bf16_lo(w)));
  return __builtin_fmaxf(amax, __builtin_fabsf(bf16_hi(w)));
}

// Four bf16 pairs (8 consecutive k) -> one dword of 8 E2M1 codes in the standard order.
MM_DEVICE uint32_t cvt_fp4x8(const uint32_t* w, float scale) {
  uint32_t c = 0;
  c = cvt_fp4x2<0>(c, w[0], scale);
  c = cvt_fp4x2<1>(c, w[1], scale);
  c = cvt_fp4x2<2>(c, w[2], scale);
  c = cvt_fp4x2<3>(c, w[3], scale);
  return c;
}

struct Mxfp4Group {
  u32x4 codes;     // 16 bytes: k = 2b (lo nibble), 2b + 1 (hi nibble) of byte b
  uint32_t scale;  // E8M0 byte
};

// The floored amax of one group of 32 bf16 (16 dwords).
MM_DEVICE float group_amax(const uint32_t (&w)[16]) {
  float amax = kAmaxFloor;
#pragma unroll
  for (int i = 0; i < 16; ++i) amax = amax_bf16x2(amax, w[i]);
  return amax;
}

// One group of 32 bf16 (16 dwords, k order) -> its codes and scale.
MM_DEVICE Mxfp4Group quantize_group32(const uint32_t (&w)[16]) {
  Mxfp4Group g;
  g.scale = quant_scale_byte(group_amax(w));
  const float s = scale_operand(g.scale);
  g.codes = u32x4{cvt_fp4x8(w + 0, s), cvt_fp4x8(w + 4, s), cvt_fp4x8(w + 8, s), cvt_fp4x8(w + 12, s)};
  return g;
}

typedef short i16x2_t __attribute__((ext_vector_type(2)));

// Two bf16 (one dword) -> two e4m3 bytes placed in word Word of `old`, the other word kept.
template <bool Word>
MM_DEVICE uint32_t cvt_fp8x2(uint32_t old, uint32_t bf16x2_bits, float scale) {
  return __builtin_bit_cast(uint32_t, __builtin_amdgcn_cvt_scalef32_pk_fp8_bf16(
      __builtin_bit_cast(i16x2_t, old), __builtin_bit_cast(bf16x2_t, bf16x2_bits), scale, Word));
}

struct Mxfp8Group {
  u32x4 codes[2];  // 32 bytes: byte b = k b (e4m3)
  uint32_t scale;  // E8M0 byte
};

// One group of 32 bf16 (16 dwords, k order) -> its e4m3 codes and scale.
MM_DEVICE Mxfp8Group quantize_group32_fp8(const uint32_t (&w)[16]) {
  Mxfp8Group g;
  g.scale = quant_scale_byte<kLog2MaxE4M3>(group_amax(w));
  const float s = scale_operand(g.scale);
  uint32_t c[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) c[i] = cvt_fp8x2<true>(cvt_fp8x2<false>(0u, w[2 * i], s), w[2 * i + 1], s);
  g.codes[0] = u32x4{c[0], c[1], c[2], c[3]};
  g.codes[1] = u32x4{c[4], c[5], c[6], c[7]};
  return g;
}

}  // namespace mm::moe
