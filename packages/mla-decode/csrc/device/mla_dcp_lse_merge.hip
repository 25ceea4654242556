// Cross-rank merge of decode-context-parallel partials (built for gfx942 and gfx950).
//
// For one row (t, h) with per-rank partial outputs part_r[512] and base-2 LSEs lse_r:
//   w_r = exp2(lse_r - max_r lse_r), out = (sum_r w_r * part_r) * (1 / sum_r w_r),
//   lse_out = max + log2(sum_r w_r).
// A rank whose |lse| >= 3e38 (+-inf included) is empty (weight 0, its part never read). A row with every
// rank empty gives out = 0 and lse_out = -inf. A rank with a NaN lse (its inputs held NaN/Inf) makes
// the row NaN (out 0x7FFF, lse_out NaN): never dropped as if empty. Ranks are summed in order 0..R-1.
//
// Work split: one wave per row, each lane owns 8 consecutive elements (one 16-byte load per rank).
#include "moonmath/all.hpp"

namespace {
constexpr int kDim = 512;
constexpr int kWavesPerBlock = 4;
constexpr uint32_t kRowBytes = kDim * 2;
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) void mla_dcp_lse_merge_ranks(
    const uint16_t* __restrict__ parts,  // [R, rows, 512] bf16
    const float* __restrict__ lse_in,    // [R, rows] fp32, base 2
    uint16_t* __restrict__ out,          // [rows, 512] bf16
    float* __restrict__ lse_out,         // [rows] fp32, or null
    int num_ranks, int rows) {
  const uint32_t row = mm::block_id_x() * kWavesPerBlock + mm::wave_id();
  if (row >= (uint32_t)rows) return;
  const uint32_t lane = mm::lane_id();

  // Every lane reads the same LSE; the loads are range-checked by the buffer, not by branches.
  const mm::buffer_rsrc lse_buf = mm::make_buffer(lse_in, (uint32_t)num_ranks * (uint32_t)rows * 4u);
  // Two passes over the LSEs (max, then weights) re-load them instead of keeping an array, which
  // the compiler would index with s_set_gpr_idx.
  mm::LseMerge merge;
  for (int r = 0; r < num_ranks; ++r) merge.see(mm::buffer_load_f32(lse_buf, ((uint32_t)r * rows + row) * 4u));

  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int r = 0; r < num_ranks; ++r) {
    const float w = merge.weight(mm::buffer_load_f32(lse_buf, ((uint32_t)r * rows + row) * 4u));
    merge.add(w);
    if (w == 0.f) continue;  // empty rank (or one that underflows): its part may hold anything, even NaN
    const uint16_t* rank_parts = parts + (size_t)r * rows * kDim;
    const mm::buffer_rsrc part_buf = mm::make_buffer(rank_parts, (uint32_t)rows * kRowBytes);
    const mm::u32x4 p = mm::buffer_load_b128(part_buf, row * kRowBytes + lane * 16u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[2 * i] += w * mm::bf16_lo(p[i]);
      acc[2 * i + 1] += w * mm::bf16_hi(p[i]);
    }
  }

  const float inv = merge.poisoned ? __builtin_nanf("") : merge.empty() ? 0.f : 1.0f / merge.sum_w;
  mm::u32x4 o;
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = mm::pack_bf16x2<mm::Round::RTNE>(acc[2 * i] * inv, acc[2 * i + 1] * inv);
  mm::buffer_store_b128(o, mm::make_buffer(out, (uint32_t)rows * kRowBytes), row * kRowBytes + lane * 16u);

  if (lse_out != nullptr && lane == 0) {
    mm::buffer_store_f32(merge.lse(), mm::make_buffer(lse_out, (uint32_t)rows * 4u), row * 4u);
  }
}
