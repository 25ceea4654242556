// MFMA wrappers. Lane layouts (CDNA3 16x16x16 bf16): A[i][k] in lane 16*(k/4)+i, element k%4;
// B[k][j] in lane 16*(k/4)+j, element k%4; D[i][j] in register i%4 of lane 16*(i/4)+j.
// gfx950 16x16x32 bf16: the K slice per lane group is 8 wide (k = 8*(lane/16) + 0..7).
#pragma once
#include "moonmath/prelude.hpp"

namespace mm {

#if defined(__gfx942__) || defined(__gfx950__)
// D = A(16x16) * B(16x16) + C, bf16 inputs, fp32 accumulate.
MM_DEVICE f32x4 mfma_16x16x16_bf16(i16x4 a, i16x4 b, f32x4 c) {
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
}
// D = A(32x8) * B(8x32) + C over 32x32 outputs in 16 registers.
MM_DEVICE f32x16 mfma_32x32x8_bf16(i16x4 a, i16x4 b, f32x16 c) {
  return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);
}
#endif

#if defined(__gfx950__)
// gfx950: twice the K per instruction at the same issue cost.
MM_DEVICE f32x4 mfma_16x16x32_bf16(bf16x8 a, bf16x8 b, f32x4 c) {
  return __builtin_amdgcn_mfma_f32_16x16x32_bf16(a, b, c, 0, 0, 0);
}
MM_DEVICE f32x16 mfma_32x32x16_bf16(bf16x8 a, bf16x8 b, f32x16 c) {
  return __builtin_amdgcn_mfma_f32_32x32x16_bf16(a, b, c, 0, 0, 0);
}
#endif

}  // namespace mm
