// Split-KV merge of mla_decode_a16w8_fwd's partials (gfx942).
//
// For one row R with parts p = 0..nparts-1 holding (O_p[512] fp32 unnormalised, m_p, l_p, ln_p) where
// O_p = sum_j bf16(exp2(x_j - m_p)) v_j, l_p = sum_j exp2(x_j - m_p), ln_p = sum_j bf16(exp2(x_j - m_p)):
//   M = max_{l_p > 0} m_p,  w_p = exp2(m_p - M),  L = sum_p w_p l_p,  Ln = sum_p w_p ln_p,
//   o = o_scale * (sum_p w_p O_p) / Ln  (bf16 RTNE),  lse = M + log2(L)  (base 2).
// Parts with l_p = 0 (no token of the row in that part) carry no weight and are never read. A row
// with L = 0 gives o = 0 and lse = -inf. Parts are summed in order 0..nparts-1: deterministic.
//
// Work split: one wave per row; lane owns 8 consecutive columns (two 16-byte loads per part).
#include "moonmath/all.hpp"

namespace {
constexpr uint32_t kLat = 512;
constexpr uint32_t kWavesPerBlock = 4;
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) void mla_decode_a16w8_merge(
    const float* __restrict__ ws_o,   // [rows, nparts, 512] fp32
    const float* __restrict__ ws_ml,  // [rows, nparts, 4] fp32 (m, l, ln, 0)
    uint16_t* __restrict__ o_lat,     // [rows, 512] bf16
    float* __restrict__ lse,          // [rows] fp32 (if flags & 1)
    uint32_t rows, uint32_t nparts, uint32_t flags, uint32_t o_scale_bits) {
  const uint32_t row = mm::block_id_x() * kWavesPerBlock + mm::wave_id();
  if (row >= rows) return;
  const uint32_t lane = mm::lane_id();
  const float o_scale = mm::bit_cast<float>(o_scale_bits);
  const mm::buffer_rsrc ml = mm::make_buffer(ws_ml, rows * nparts * 16u);
  const mm::buffer_rsrc wo = mm::make_buffer(ws_o, rows * nparts * kLat * 4u);

  float big_m = -__builtin_inff();
  for (uint32_t p = 0; p < nparts; ++p) {
    const mm::u32x2 v = mm::buffer_load_b64(ml, (row * nparts + p) * 16u);
    const float m = mm::bit_cast<float>(v[0]), l = mm::bit_cast<float>(v[1]);
    if (l > 0.f) big_m = __builtin_fmaxf(big_m, m);
  }
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  float big_l = 0.f, big_ln = 0.f;
  for (uint32_t p = 0; p < nparts; ++p) {
    const mm::u32x4 v = mm::buffer_load_b128(ml, (row * nparts + p) * 16u);
    const float m = mm::bit_cast<float>(v[0]), l = mm::bit_cast<float>(v[1]), ln = mm::bit_cast<float>(v[2]);
    if (!(l > 0.f)) continue;  // wave-uniform: every lane reads the same (m, l, ln)
    const float w = mm::exp2(m - big_m);
    big_l += w * l;
    big_ln += w * ln;
    const uint32_t off = ((row * nparts + p) * kLat + 8u * lane) * 4u;
    const mm::u32x4 a = mm::buffer_load_b128(wo, off);
    const mm::u32x4 b = mm::buffer_load_b128(wo, off + 16u);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc[e] += w * mm::bit_cast<float>(a[e]);
      acc[4 + e] += w * mm::bit_cast<float>(b[e]);
    }
  }
  const float inv = big_ln > 0.f ? o_scale / big_ln : 0.f;
  mm::u32x4 o;
#pragma unroll
  for (int e = 0; e < 4; ++e) o[e] = mm::pack_bf16x2<mm::Round::RTNE>(acc[2 * e] * inv, acc[2 * e + 1] * inv);
  mm::buffer_store_b128(o, mm::make_buffer(o_lat, rows * kLat * 2u), (row * kLat + 8u * lane) * 2u);
  if ((flags & 1u) && lane == 0) {
    const float out = big_l > 0.f ? big_m + mm::log2(big_l) : -__builtin_inff();
    mm::buffer_store_f32(out, mm::make_buffer(lse, rows * 4u), row * 4u);
  }
}
