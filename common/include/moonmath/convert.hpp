// Hardware number conversions (gfx942/gfx950): fp8 -> f32 with v_cvt_pk_f32_fp8 and f32 -> bf16
// packing with v_perm_b32. numerics.hpp has portable reference decoders; these are the fast paths
// for inner loops.
#pragma once
#include "moonmath/prelude.hpp"

namespace mm {

#if defined(__gfx942__) || defined(__gfx950__)
// Two fp8 bytes of `w` -> two f32 (exact). HighWord = false: bytes 0,1; true: bytes 2,3.
// The format is the arch's native fp8: e4m3fnuz on gfx942, OCP e4m3fn on gfx950.
template <bool HighWord>
MM_DEVICE f32x2 cvt_pk_f32_fp8(uint32_t w) {
  return __builtin_amdgcn_cvt_pk_f32_fp8((int)w, HighWord);
}
#endif

// v_perm_b32: byte i of the result is byte sel.byte[i] of the 8-byte value {hi:lo} (selector 0..3
// pick lo's bytes, 4..7 hi's; 0x0C gives 0x00). Byte shuffles and table lookups in one VALU op.
MM_DEVICE uint32_t perm(uint32_t hi, uint32_t lo, uint32_t sel) { return __builtin_amdgcn_perm(hi, lo, sel); }

// One dword of two bf16 from the high halves of two f32 (lo -> bits 0..15): truncation (RTZ), exact
// for values that are already bf16 (e.g. widened fp8). One v_perm_b32.
MM_DEVICE uint32_t pack_bf16x2_hi(float lo, float hi) {
  return perm(__builtin_bit_cast(uint32_t, hi), __builtin_bit_cast(uint32_t, lo), 0x07060302u);
}

// Two f32 -> two bf16, round to nearest with ties away from zero (u + 0x8000, then the high halves).
// For finite values only: a NaN whose low bits are all ones can carry into the sign (0x7FFFFFFF -> -0),
// and Inf-adjacent values round to Inf as RNA says. Use numerics.hpp's pack_bf16x2 where NaN can occur.
MM_DEVICE uint32_t pack_bf16x2_rna(float lo, float hi) {
  return perm(__builtin_bit_cast(uint32_t, hi) + 0x8000u, __builtin_bit_cast(uint32_t, lo) + 0x8000u, 0x07060302u);
}

// Two f32 -> one dword of two IEEE fp16 (lo -> bits 0..15), round to nearest even (v_cvt_f16_f32 in the
// default round mode; NaN stays NaN, overflow gives Inf), and back (exact).
// Two instructions: the high half's conversion writes its word in place (SDWA, the low word preserved), where
// the compiler's form converts both halves to zero-padded words and ORs them (three).
MM_DEVICE uint32_t pack_f16x2(float lo, float hi) {
  uint32_t r;
  asm("v_cvt_f16_f32 %0, %1\n\tv_cvt_f16_f32_sdwa %0, %2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:DWORD"
      : "=&v"(r) : "v"(lo), "v"(hi));
  return r;
}
// acc + w * (the low / high fp16 of h), one v_fma_mix_f32 (a single rounding), written out: from fpext + fma the
// SLP vectorizer can pair neighbouring accumulators into v_pk_fma_f32 behind a v_cvt_f32_f16 per value.
MM_DEVICE float fma_f16_lo(float w, uint32_t h, float acc) {
  float d;
  asm("v_fma_mix_f32 %0, %1, %2, %3 op_sel_hi:[0,1,0]" : "=v"(d) : "v"(w), "v"(h), "v"(acc));
  return d;
}
MM_DEVICE float fma_f16_hi(float w, uint32_t h, float acc) {
  float d;
  asm("v_fma_mix_f32 %0, %1, %2, %3 op_sel:[0,1,0] op_sel_hi:[0,1,0]" : "=v"(d) : "v"(w), "v"(h), "v"(acc));
  return d;
}
MM_DEVICE float f16_lo(uint32_t w) { return (float)__builtin_bit_cast(_Float16, (uint16_t)(w & 0xffffu)); }
MM_DEVICE float f16_hi(uint32_t w) { return (float)__builtin_bit_cast(_Float16, (uint16_t)(w >> 16)); }

}  // namespace mm
