// The QK stage of the planned fp8-Q x MXFP4-KV MLA decode, alone: not an op, no public entry point; it exists so
// the stage (mla_q8_mxfp4_stages.hpp: operand layouts, the 576 = 4.5 x 128 tail) is tested against float64
// (tests/test_q8_mxfp4_qk_stage.py). The mixed fp8 x fp4 pairing it relies on is the emulator's derived,
// UNVERIFIED one (docs/emulator.md, "Mixed fp8 x fp4").
// One wave per workgroup; workgroup w takes tokens 16 w .. +15 (pool slots kv_indices[t]) against the 16 rows of
// q8 [16, 576] and writes s [16, n] fp32 = q8 . k exactly (k the dequantised row).
#include "mla_q8_mxfp4_stages.hpp"

MM_KERNEL MM_LAUNCH_BOUNDS(64) void mla_q8_mxfp4_qk(const uint8_t* __restrict__ q8, const uint8_t* __restrict__ pool,
                                                     const uint8_t* __restrict__ scales,
                                                     const int32_t* __restrict__ kv_indices, float* __restrict__ s,
                                                     uint32_t n, uint32_t slots, uint32_t scale_stride,
                                                     uint32_t scale_bytes) {
  using namespace q8mx;
  const uint32_t lane = mm::lane_id(), g = lane / 16u, x = lane % 16u;
  const uint32_t tok = 16u * mm::block_id_x() + x;
  const QOperand q = load_q(mm::make_buffer(q8, 16u * kRow), x * kRow, g);
  // a token past the window (or a slot past the pool) reads zero codes
  const uint32_t slot = tok < n ? static_cast<uint32_t>(kv_indices[tok]) : 0xFFFFFFFFu;
  mm::f32x4 acc = qk16(q, mm::make_buffer(pool, slots * kCodesBytes), mm::make_buffer(scales, scale_bytes), slot,
                             slots, scale_stride, g);
  pin(acc);  // the five MFMAs run here, under the full EXEC, not sunk under `tok < n`
  const mm::buffer_rsrc ob = mm::make_buffer(s, 16u * n * 4u);
  if (tok < n) {
#pragma unroll
    for (uint32_t r = 0; r < 4; ++r) mm::buffer_store_f32(acc[r], ob, 4u * ((4u * g + r) * n + tok));
  }
}
