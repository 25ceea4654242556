// Split-KV merge of mla_decode_a16w8_fwd's partials (gfx942 and gfx950: one source, no arch-specific stage).
//
// For one row R (row r of request b) with parts p = 0..n_b-1 (units first_b + p of the split, each
// holding row r at workspace slot unit * rows_per_request + r) holding (O_p[512] fp32 unnormalised, m_p, l_p, ln_p) where
// O_p = sum_j bf16(exp2(x_j - m_p)) v_j, l_p = sum_j exp2(x_j - m_p), ln_p = sum_j bf16(exp2(x_j - m_p)):
//   M = max_{l_p > 0} m_p,  w_p = exp2(m_p - M),  L = sum_p w_p l_p,  Ln = sum_p w_p ln_p,
//   o = o_scale * (sum_p w_p O_p) / Ln  (bf16 RTNE),  lse = M + log2(L)  (base 2).
// Parts with l_p = 0 (no token of the row in that part) carry no weight and are skipped after their
// (unconditional) loads. A row with L = 0 gives o = 0 and lse = -inf. A part whose l_p is NaN (its
// inputs held NaN/Inf) is not empty: it is folded in, so the row's lse and o are NaN.
//
// Work split: a workgroup of 4 waves serves 4 / wpr rows, wpr = waves per row in {1, 2, 4} (the host's
// merge_waves_per_row(nparts): one wave while its parts fit 4 iterations of 4 loads in flight, more
// waves only for long part lists, so short splits do not pay 4 waves of fixed cost per row). Wave s of
// a row folds the parts p = s, s + wpr, ... in order with a running max (lane: 8 consecutive columns,
// two 16-byte loads per part, four parts in flight); with wpr > 1 wave 0 of the row then folds the
// others' (M, L, Ln, sums) in wave order through LDS. The result equals the formula above up to fp32
// rounding. Fixed order for a given nparts everywhere: deterministic, no atomics.
#include "mla_decode_common.hpp"

namespace {
constexpr uint32_t kLat = 512;
constexpr uint32_t kWaves = 4;
constexpr uint32_t kUnroll = 4;

struct MergeState {
  float m = -__builtin_inff();
  float l = 0.f, ln = 0.f;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  // Fold one part (or another wave's state). l == 0: empty, no weight; NaN l is folded (NaN stays NaN).
  MM_DEVICE void fold(float m2, float l2, float ln2, const float* a2) {
    if (l2 == 0.f) return;
    const float m_new = __builtin_fmaxf(m, m2);
    const float s_old = m == -__builtin_inff() ? 0.f : mm::exp2(m - m_new);
    const float s_new = mm::exp2(m2 - m_new);
    m = m_new;
    l = l * s_old + s_new * l2;
    ln = ln * s_old + s_new * ln2;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = acc[e] * s_old + s_new * a2[e];
  }
};
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) void mla_decode_a16w8_merge(
    const float* __restrict__ ws_o,   // [B*nparts units, rows / B, 512] fp32
    const float* __restrict__ ws_ml,  // [B*nparts units, rows / B, 4] fp32 (m, l, ln, 0)
    uint16_t* __restrict__ o_lat,     // [rows, 512] bf16
    float* __restrict__ lse,          // [rows] fp32 (if flags & 1)
    uint32_t rows, uint32_t nparts, uint32_t flags, uint32_t o_scale_bits, uint32_t wpr,
    // the split's inputs (the decode kernel's): which units hold a row's parts (mla::locate)
    const int32_t* __restrict__ seq_lens, const int32_t* __restrict__ glen, const int32_t* __restrict__ kv_indptr,
    uint32_t n_idx, uint32_t B, uint32_t q_len, uint32_t cp_rank, uint32_t cp_world,
    const float* __restrict__ kv_scale_dev) {  // [1] fp32 on the device (o_scale read here), or null
  MM_LDS float part_acc[kWaves - 1][64][8];  // the state of waves s > 0 of each row (wave w at w - 1)
  MM_LDS float part_l[kWaves - 1][3];
  const uint32_t wave = mm::wave_id();
  const uint32_t row = mm::block_id_x() * (kWaves / wpr) + wave / wpr;
  const uint32_t sub = wave % wpr;
  const bool valid = row < rows;  // uniform per wave; the workgroup still meets at the barrier
  const uint32_t lane = mm::lane_id();
  const float o_scale = kv_scale_dev != nullptr ? *kv_scale_dev : mm::bit_cast<float>(o_scale_bits);
  const mm::buffer_rsrc ml = mm::make_buffer(ws_ml, rows * nparts * 16u);
  const mm::buffer_rsrc wo = mm::make_buffer(ws_o, rows * nparts * kLat * 4u);
  const uint32_t rows_req = rows / B;
  const uint32_t req = valid ? row / rows_req : 0u, r_in = row % rows_req;
  const mla::Units units =
      mla::locate(mla::SplitArgs{seq_lens, glen, kv_indptr, n_idx, B, nparts, q_len, cp_rank, cp_world, flags}, req,
                  true);
  const uint32_t n_own = units.valid ? units.count : 0u;  // this row's parts: units first .. first + n_own - 1

  // One pass per wave over its parts with a running max (no separate max pass: every load of the loop
  // is independent, four parts in flight).
  MergeState st;
  const uint32_t col_off = 8u * lane * 4u;
  const uint32_t stride = wpr * kUnroll;
  for (uint32_t p0 = sub; valid && p0 < n_own; p0 += stride) {
    mm::u32x4 meta[kUnroll], a[kUnroll], b[kUnroll];
#pragma unroll
    for (uint32_t u = 0; u < kUnroll; ++u) {
      const uint32_t p = p0 + wpr * u;
      if (p >= n_own) break;  // wave-uniform: no loads for parts the row does not have
      const uint32_t slot = (units.first + p) * rows_req + r_in;
      meta[u] = mm::buffer_load_b128(ml, slot * 16u);
      a[u] = mm::buffer_load_b128(wo, slot * kLat * 4u + col_off);
      b[u] = mm::buffer_load_b128(wo, slot * kLat * 4u + col_off + 16u);
    }
#pragma unroll
    for (uint32_t u = 0; u < kUnroll; ++u) {
      if (p0 + wpr * u >= n_own) break;  // wave-uniform
      float v[8];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[e] = mm::bit_cast<float>(a[u][e]);
        v[4 + e] = mm::bit_cast<float>(b[u][e]);
      }
      st.fold(mm::bit_cast<float>(meta[u][0]), mm::bit_cast<float>(meta[u][1]), mm::bit_cast<float>(meta[u][2]), v);
    }
  }

  if (wpr > 1) {  // uniform over the launch
    if (sub > 0) {
#pragma unroll
      for (int e = 0; e < 8; ++e) part_acc[wave - 1][lane][e] = st.acc[e];
      if (lane == 0) {
        part_l[wave - 1][0] = st.m;
        part_l[wave - 1][1] = st.l;
        part_l[wave - 1][2] = st.ln;
      }
    }
    mm::block_sync();
    if (sub != 0) return;
    for (uint32_t w = wave + 1; w < wave + wpr; ++w) {
      st.fold(part_l[w - 1][0], part_l[w - 1][1], part_l[w - 1][2], part_acc[w - 1][lane]);
    }
  }
  if (!valid) return;

  const float inv = mla::inv_norm(o_scale, st.ln);
  mm::u32x4 o;
#pragma unroll
  for (int e = 0; e < 4; ++e) o[e] = mm::pack_bf16x2<mm::Round::RTNE>(st.acc[2 * e] * inv, st.acc[2 * e + 1] * inv);
  mm::buffer_store_b128(o, mm::make_buffer(o_lat, rows * kLat * 2u), (row * kLat + 8u * lane) * 2u);
  if ((flags & 1u) && lane == 0) {
    mm::buffer_store_f32(mla::finish_lse(st.m, st.l), mm::make_buffer(lse, rows * 4u), row * 4u);
  }
}
