// gfx942 stage of the MLA decode kernels (included by ../mla_decode_common.hpp on gfx942).
//
// The kernels' QK contraction goes in 8-column steps: lane (i, g) holds 8 bf16 of K row i and 8 of Q row
// j (one u32x4 each) for reduction slots 8g + e. gfx942's deepest bf16 MFMA is 16x16x16 (4 per lane), so
// a step is two of them, columns e = 0..3 then 4..7. Everything else (fp8 widening: v_cvt_pk_f32_fp8
// decodes the arch's native e4m3fnuz; the PV MFMA 16x16x16 over a 16-token tile) is arch-neutral.
#pragma once
#include "moonmath/all.hpp"
#include "moonmath/tile.hpp"

namespace mla {

constexpr const char* kArchName = "gfx942";

// s += K Q^T over one 8-column step (k, q: 8 bf16 each in the same slot order).
MM_DEVICE mm::f32x4 qk_step8(const mm::u32x4& k, const mm::u32x4& q, mm::f32x4 s) {
#pragma unroll
  for (int h = 0; h < 2; ++h)  // the tile layer's 16x16x16 shape: A/B k = 4 * (lane / 16) + e
    s = mm::Mfma16x16x16Bf16::run(mm::u32x2{k[2 * h], k[2 * h + 1]}, mm::u32x2{q[2 * h], q[2 * h + 1]}, s);
  return s;
}

}  // namespace mla
