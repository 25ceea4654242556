// The PV stage of the planned fp8-Q x MXFP4-KV MLA decode, alone: not an op, no public entry point; it exists so
// the stage (mla_q8_mxfp4_stages.hpp: V's re-expression per 32 tokens x 32 columns, the fp8 x fp8 scaled PV) is
// tested against float64 and chained with the QK stage (tests/test_q8_mxfp4_pv_stage.py).
// One wave per workgroup; workgroup w takes tokens 128 w .. +127 (slots kv_indices[t]) and writes its partial
// o [16, 512] fp32 = sum_t P[i][t] 2^(sP[i][t / 32] - 127) v'[t][c] to out[w]. Inputs: P fp8 e4m3fn [16, n_pad]
// and its E8M0 bytes [16, n_pad / 32] (n_pad = 128 x tiles; zero P past n).
#include "mla_q8_mxfp4_stages.hpp"

MM_KERNEL MM_LAUNCH_BOUNDS(64) void mla_q8_mxfp4_pv(const uint8_t* __restrict__ p, const uint8_t* __restrict__ p_scales,
                                                     const uint8_t* __restrict__ pool, const uint8_t* __restrict__ scales,
                                                     const int32_t* __restrict__ kv_indices, float* __restrict__ out,
                                                     uint32_t n, uint32_t n_pad, uint32_t slots, uint32_t scale_stride,
                                                     uint32_t scale_bytes) {
  using namespace q8mx;
  alignas(16) MM_LDS uint8_t vt[kLat * kTile];  // v' token-major [128][512]
  MM_LDS uint8_t f_lds[(kTile / kGroupTokens) * kColBlocks];
  const uint32_t lane = mm::lane_id(), g = lane / 16u, x = lane % 16u;
  const uint32_t t0 = kTile * mm::block_id_x();
  reexpress_v(vt, f_lds, mm::make_buffer(pool, slots * kCodesBytes), mm::make_buffer(scales, scale_bytes), slots,
              scale_stride, lane,
              [&](uint32_t t) { return t0 + t < n ? static_cast<uint32_t>(kv_indices[t0 + t]) : 0xFFFFFFFFu; });
  mm::block_sync();
  const mm::buffer_rsrc ab = mm::make_buffer(p, 16u * n_pad);
  const mm::buffer_rsrc asb = mm::make_buffer(p_scales, 16u * (n_pad / kGroupTokens));
  const mm::u32x4 a0 = mm::buffer_load_b128(ab, x * n_pad + t0 + 16u * g);
  const mm::u32x4 a1 = mm::buffer_load_b128(ab, x * n_pad + t0 + 64u + 16u * g);
  const uint32_t sa = mm::buffer_load_u8(asb, x * (n_pad / kGroupTokens) + t0 / kGroupTokens + g);
  mm::f32x4 o[kColTiles];
#pragma unroll
  for (uint32_t ct = 0; ct < kColTiles; ++ct) o[ct] = mm::f32x4{0.f, 0.f, 0.f, 0.f};
  pv_tile(o, __builtin_shufflevector(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7), sa, vt, f_lds, g, x);
  const mm::buffer_rsrc ob = mm::make_buffer(out + 16u * kLat * mm::block_id_x(), 16u * kLat * 4u);
#pragma unroll
  for (uint32_t ct = 0; ct < kColTiles; ++ct)
#pragma unroll
    for (uint32_t r = 0; r < 4; ++r) mm::buffer_store_f32(o[ct][r], ob, 4u * ((4u * g + r) * kLat + 16u * ct + x));
}
