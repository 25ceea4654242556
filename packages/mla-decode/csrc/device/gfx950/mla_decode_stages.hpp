// gfx950 stage of the MLA decode kernels (included by ../mla_decode_common.hpp on gfx950).
//
// QK in 8-column steps (lane (i, g): 8 bf16 of K row i and of Q row j, reduction slots 8g + e) is one
// v_mfma_f32_16x16x32_bf16 (the tile layer's Mfma16x16x32Bf16: A/B k = 8 * (lane / 16) + e), so the
// 576-column score tile takes 18 MFMAs instead of gfx942's 36.
//
// Kept arch-neutral (and why):
//   - fp8 widening: v_cvt_pk_f32_fp8 decodes the arch's native fp8, OCP e4m3fn here (max 448, NaN
//     0x7F/0xFF); every e4m3fn value is a bf16 value, so the widening stays exact.
//   - PV: the 16-token tile is the reduction depth, so PV stays v_mfma_f32_16x16x16_bf16 (a 16x16x32 PV
//     would need 32-token tiles, i.e. a different softmax/pipeline granularity).
//   - no fp8 MFMA (v_mfma_f32_16x16x32_fp8_fp8): it would quantise Q (a16w8 keeps Q bf16) for QK and
//     P to e4m3 (3 mantissa bits, rel. error up to 2^-4 per p) for PV; both are outside this op's
//     definition (bf16 Q, bf16-rounded P).
#pragma once
#include "moonmath/all.hpp"
#include "moonmath/tile.hpp"

namespace mla {

constexpr const char* kArchName = "gfx950";

// s += K Q^T over one 8-column step (k, q: 8 bf16 each in the same slot order).
MM_DEVICE mm::f32x4 qk_step8(const mm::u32x4& k, const mm::u32x4& q, mm::f32x4 s) {
  return mm::Mfma16x16x32Bf16::run(k, q, s);
}

}  // namespace mla
