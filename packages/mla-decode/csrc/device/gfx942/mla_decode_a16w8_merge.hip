// Split-KV merge of mla_decode_a16w8_fwd's partials (gfx942).
//
// For one row R with parts p = 0..nparts-1 holding (O_p[512] fp32 unnormalised, m_p, l_p, ln_p) where
// O_p = sum_j bf16(exp2(x_j - m_p)) v_j, l_p = sum_j exp2(x_j - m_p), ln_p = sum_j bf16(exp2(x_j - m_p)):
//   M = max_{l_p > 0} m_p,  w_p = exp2(m_p - M),  L = sum_p w_p l_p,  Ln = sum_p w_p ln_p,
//   o = o_scale * (sum_p w_p O_p) / Ln  (bf16 RTNE),  lse = M + log2(L)  (base 2).
// Parts with l_p = 0 (no token of the row in that part) carry no weight and are skipped after their
// (unconditional) loads. A row with L = 0 gives o = 0 and lse = -inf. A part whose l_p is NaN (its
// inputs held NaN/Inf) is not empty: it is folded in, so the row's lse and o are NaN.
//
// Work split: one workgroup (4 waves) per row. Wave w folds the parts p = w, w+4, w+8, ... in order
// with a running max (lane: 8 consecutive columns, two 16-byte loads per part, four parts in flight);
// wave 0 then folds the other waves' (M, L, Ln, sums) in wave order through LDS. The result equals
// the formula above up to fp32 rounding. Fixed order everywhere: deterministic, no atomics.
#include "mla_decode_common.hpp"

namespace {
constexpr uint32_t kLat = 512;
constexpr uint32_t kWaves = 4;
constexpr uint32_t kUnroll = 4;
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) void mla_decode_a16w8_merge(
    const float* __restrict__ ws_o,   // [rows, nparts, 512] fp32
    const float* __restrict__ ws_ml,  // [rows, nparts, 4] fp32 (m, l, ln, 0)
    uint16_t* __restrict__ o_lat,     // [rows, 512] bf16
    float* __restrict__ lse,          // [rows] fp32 (if flags & 1)
    uint32_t rows, uint32_t nparts, uint32_t flags, uint32_t o_scale_bits) {
  MM_LDS float part_acc[kWaves - 1][64][8];  // waves 1..3's column sums
  MM_LDS float part_l[kWaves - 1][3];        // and their (M, L, Ln)
  const uint32_t row = mm::block_id_x();
  if (row >= rows) return;  // uniform over the workgroup: no barrier is skipped by part of it
  const uint32_t wave = mm::wave_id();
  const uint32_t lane = mm::lane_id();
  const float o_scale = mm::bit_cast<float>(o_scale_bits);
  const mm::buffer_rsrc ml = mm::make_buffer(ws_ml, rows * nparts * 16u);
  const mm::buffer_rsrc wo = mm::make_buffer(ws_o, rows * nparts * kLat * 4u);

  // One pass per wave over its parts with a running max (no separate max pass: every load of the loop
  // is independent, four parts in flight). Wave w takes parts w, w+4, w+8, ... in order.
  float big_m = -__builtin_inff();
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  float big_l = 0.f, big_ln = 0.f;
  const uint32_t col_off = 8u * lane * 4u;
  for (uint32_t p0 = wave; p0 < nparts; p0 += kWaves * kUnroll) {
    mm::u32x4 meta[kUnroll], a[kUnroll], b[kUnroll];
#pragma unroll
    for (uint32_t u = 0; u < kUnroll; ++u) {
      const uint32_t p = p0 + kWaves * u;
      const uint32_t slot = row * nparts + (p < nparts ? p : 0u);
      meta[u] = mm::buffer_load_b128(ml, slot * 16u);
      a[u] = mm::buffer_load_b128(wo, slot * kLat * 4u + col_off);
      b[u] = mm::buffer_load_b128(wo, slot * kLat * 4u + col_off + 16u);
    }
#pragma unroll
    for (uint32_t u = 0; u < kUnroll; ++u) {
      const uint32_t p = p0 + kWaves * u;
      const float m = mm::bit_cast<float>(meta[u][0]), l = mm::bit_cast<float>(meta[u][1]);
      const float ln = mm::bit_cast<float>(meta[u][2]);
      if (!(p < nparts) || l == 0.f) continue;  // wave-uniform: an empty part carries no weight
      const float m_new = __builtin_fmaxf(big_m, m);
      const float s_old = big_m == -__builtin_inff() ? 0.f : mm::exp2(big_m - m_new);
      const float s_new = mm::exp2(m - m_new);
      big_m = m_new;
      big_l = big_l * s_old + s_new * l;
      big_ln = big_ln * s_old + s_new * ln;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[e] = acc[e] * s_old + s_new * mm::bit_cast<float>(a[u][e]);
        acc[4 + e] = acc[4 + e] * s_old + s_new * mm::bit_cast<float>(b[u][e]);
      }
    }
  }

  // Waves 1..3 hand (M, L, Ln, acc) to wave 0, which folds them in wave order.
  if (wave > 0) {
#pragma unroll
    for (int e = 0; e < 8; ++e) part_acc[wave - 1][lane][e] = acc[e];
    if (lane == 0) {
      part_l[wave - 1][0] = big_m;
      part_l[wave - 1][1] = big_l;
      part_l[wave - 1][2] = big_ln;
    }
  }
  mm::block_sync();
  if (wave != 0) return;
#pragma unroll
  for (uint32_t w = 0; w < kWaves - 1; ++w) {
    const float m = part_l[w][0], l = part_l[w][1], ln = part_l[w][2];
    if (l == 0.f) continue;
    const float m_new = __builtin_fmaxf(big_m, m);
    const float s_old = big_m == -__builtin_inff() ? 0.f : mm::exp2(big_m - m_new);
    const float s_new = mm::exp2(m - m_new);
    big_m = m_new;
    big_l = big_l * s_old + s_new * l;
    big_ln = big_ln * s_old + s_new * ln;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = acc[e] * s_old + s_new * part_acc[w][lane][e];
  }

  const float inv = mla::inv_norm(o_scale, big_ln);
  mm::u32x4 o;
#pragma unroll
  for (int e = 0; e < 4; ++e) o[e] = mm::pack_bf16x2<mm::Round::RTNE>(acc[2 * e] * inv, acc[2 * e + 1] * inv);
  mm::buffer_store_b128(o, mm::make_buffer(o_lat, rows * kLat * 2u), (row * kLat + 8u * lane) * 2u);
  if ((flags & 1u) && lane == 0) {
    const float out = mla::finish_lse(big_m, big_l);
    mm::buffer_store_f32(out, mm::make_buffer(lse, rows * 4u), row * 4u);
  }
}
