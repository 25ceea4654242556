// The QK stage of the planned fp8-Q x MXFP4-KV MLA decode (docs/kernels/mla_decode_formats.md, "fp8-Q x MXFP4
// on the scaled MFMA"; its numerics: reference.mla_decode_q8_mxfp4), gfx950, alone: not an op, no public entry
// point. It exists so the stage's operand layouts and the 576 = 4.5 x 128 tail are tested against float64
// before the decode kernel is written (tests/test_q8_mxfp4_qk_stage.py).
//
// Instruction: v_mfma_scale_f32_16x16x128_f8f6f4, A = fp8 e4m3fn Q (CBSZ 0) with unit scales, B = the pool's
// E2M1 codes (BLGP 4) with the pool's own E8M0 block scales as B's scales: MXFP4's 32-column blocks run along
// QK's reduction axis, so K is multiplied as stored (no dequantisation). The mixed fp8 x fp4 pairing is the
// emulator's derived, UNVERIFIED one (docs/emulator.md, "Mixed fp8 x fp4").
//
// Work: one wave per workgroup; workgroup w takes tokens 16 w .. +15 of one request's local rows (pool slots
// kv_indices[t]) against the 16 rows of q8 [16, 576] (mla_q_quant's fused fp8 rows: 16 (position, head) rows).
// Output s [16, n] fp32 = q8 . k exactly (k the dequantised row; the caller's score factor comes later).
// Per 128-column chunk c = 0..3 and the tail c = 4 (columns 512..575), one MFMA:
//   A (fp8: two passes of 16 k per lane): lane 16 g + i holds q8[i][128 c + 16 g + e] in registers 0-3 and
//     q8[i][128 c + 64 + 16 g + e] in 4-7 (e < 16): two 16-byte loads; the tail's second pass is zero.
//   B (fp4: one pass of 32 k per lane): lane 16 g + j holds token j's codes of columns 128 c + 32 g .. +31 = the
//     16 bytes at 64 c + 16 g of its 288-byte row; in the tail lane groups 2 and 3 hold zero codes.
//   Scales: lane 16 g + j holds token j's E8M0 byte of block 4 c + g (op_sel byte 0); A's are 127 (2^0).
//   D[i][j]: lane 16 (i / 4) + j, register i % 4.
#include "moonmath/all.hpp"

namespace {

constexpr uint32_t kRow = 576, kCodesBytes = kRow / 2;  // 288 bytes of E2M1 codes per pool row
constexpr uint32_t kChunks = 5;                         // 4 full 128-column chunks and the 64-column tail
constexpr uint32_t kUnitScale = 127u;                   // E8M0 2^0
using Qk = mm::MfmaScaled16x16x128<mm::MxFormat::E4M3, mm::MxFormat::E2M1>;

}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(64) void mla_q8_mxfp4_qk(const uint8_t* __restrict__ q8, const uint8_t* __restrict__ pool,
                                                     const uint8_t* __restrict__ scales,
                                                     const int32_t* __restrict__ kv_indices, float* __restrict__ s,
                                                     uint32_t n, uint32_t slots, uint32_t scale_stride,
                                                     uint32_t scale_bytes) {
  const uint32_t lane = mm::lane_id(), g = lane / 16u, x = lane % 16u;  // x: Q row (A) / token (B)
  const uint32_t tok = 16u * mm::block_id_x() + x;
  const mm::buffer_rsrc qb = mm::make_buffer(q8, 16u * kRow);
  const mm::buffer_rsrc pb = mm::make_buffer(pool, slots * kCodesBytes);
  const mm::buffer_rsrc sb = mm::make_buffer(scales, scale_bytes);
  // a token past the window (or a slot past the pool) reads zero codes and a unit scale
  const uint32_t slot = tok < n ? static_cast<uint32_t>(kv_indices[tok]) : 0xFFFFFFFFu;
  const bool valid = slot < slots;
  mm::f32x4 acc = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (uint32_t c = 0; c < kChunks; ++c) {
    const bool tail = c == kChunks - 1;
    const mm::u32x4 a0 = mm::buffer_load_b128(qb, x * kRow + 128u * c + 16u * g);
    const mm::u32x4 a1 = tail ? mm::u32x4{0u, 0u, 0u, 0u} : mm::buffer_load_b128(qb, x * kRow + 128u * c + 64u + 16u * g);
    const bool has_b = valid && !(tail && g >= 2u);
    const mm::u32x4 b = has_b ? mm::buffer_load_b128(pb, slot * kCodesBytes + 64u * c + 16u * g) : mm::u32x4{0u, 0u, 0u, 0u};
    const uint32_t sc = has_b ? mm::buffer_load_u8(sb, slot * scale_stride + 4u * c + g) : kUnitScale;
    const mm::u32x8 a = __builtin_shufflevector(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7);
    acc = Qk::run<0, 0>(a, b, acc, kUnitScale, sc);
  }
  const mm::buffer_rsrc ob = mm::make_buffer(s, 16u * n * 4u);
  if (tok < n) {
#pragma unroll
    for (uint32_t r = 0; r < 4; ++r) mm::buffer_store_f32(acc[r], ob, 4u * ((4u * g + r) * n + tok));
  }
}
