// MXFP4 MoE host planners for gfx950 (MI355X: 256 CUs, 160 KiB LDS per CU, 4 SIMDs x 512 VGPRs per
// lane): pure functions of shapes and of the kernel's resources (no HIP, no torch types).
//
// The gfx950 a16w4 kernels are the gfx942 kernels' tiling built for gfx950 (same variants, same LDS),
// so the tile rules are the gfx942 ones (moe_planners.hpp; tuned on MI300X, NOT re-tuned on MI355X: no
// hardware here). What differs is the machine:
//   workgroups_per_cu : how many 8-wave workgroups of a variant one CU holds, by VGPRs (512 per lane per
//                       SIMD in granules of 8, at most 8 waves per SIMD) and by LDS (160 KiB, where
//                       gfx942 has 64 KiB: the down kernel's 52 KiB tile fits three times, not once)
//   down_plan         : the gfx942 block_m / nt rules; n_steps from the CU count (default 256) scaled
//                       by the resident workgroups per CU relative to gfx942's, so each CU keeps the
//                       same number of column chunks in flight per resident workgroup.
//   layer_block_m     : the one-launch a4w4 layer's M tile from the rows routed to each expert: the gate/up
//                       rule's tile, unless a taller one (up to 48) puts fewer workgroups on the busiest
//                       CU (ceil(blocks / num_cus), blocks = sum of ceil(rows_e / block_m)); then the shortest
//                       such tile. A second workgroup on a few CUs doubles the launch's time in the timing
//                       model (docs/kernels/mxfp4_moe_gfx950.md: bs 128 gives 258 blocks of 16, 254 of 32).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "moe_planners.hpp"

namespace moonmath {
namespace moe {
namespace gfx950 {

constexpr int64_t kNumCus = 256;
constexpr int64_t kLdsBytes = 160 * 1024;
constexpr int64_t kGfx942LdsBytes = 64 * 1024;
constexpr int kWavesPerWorkgroup = 8;  // both MoE kernels: 512 threads

// Workgroups of kWavesPerWorkgroup waves one CU holds, given per-lane VGPRs (arch VGPRs + AGPRs) and LDS
// bytes per workgroup, with `lds_bytes_per_cu` of LDS (gfx950: kLdsBytes). 0 when it does not fit.
inline int workgroups_per_cu(int64_t vgprs, int64_t lds_bytes, int64_t lds_bytes_per_cu = kLdsBytes) {
  require(vgprs >= 1 && vgprs <= 512, "vgprs must be in [1, 512]; got " + std::to_string(vgprs));
  require(lds_bytes >= 0, "lds_bytes must be >= 0; got " + std::to_string(lds_bytes));
  require(lds_bytes_per_cu >= 1, "lds_bytes_per_cu must be >= 1; got " + std::to_string(lds_bytes_per_cu));
  const int64_t granule = ceil_div(vgprs, 8) * 8;
  const int64_t waves_per_simd = std::min<int64_t>(8, 512 / granule);
  const int64_t by_vgpr = 4 * waves_per_simd / kWavesPerWorkgroup;
  const int64_t by_lds = lds_bytes ? lds_bytes_per_cu / lds_bytes : by_vgpr;
  return static_cast<int>(std::min(by_vgpr, by_lds));
}

inline int gateup_block_m(int64_t num_valid_tokens, int64_t num_active_experts) {
  return moe::gateup_block_m(num_valid_tokens, num_active_experts);
}

constexpr int kLayerBlockMs[] = {16, 32, 48};

// Workgroups (M blocks) of a launch with tile block_m over experts holding expert_rows[e] slots each.
inline int64_t m_blocks(const std::vector<int64_t>& expert_rows, int block_m) {
  int64_t blocks = 0;
  for (int64_t r : expert_rows) blocks += ceil_div(r, block_m);
  return blocks;
}

// expert_rows: slots routed to each expert (entries >= 0, each <= 2^32 - 1, their sum too); num_cus <= 0
// means the full MI355X (256). Returns 16, 32 or 48 (16 when nothing is routed).
inline int layer_block_m(const std::vector<int64_t>& expert_rows, int64_t num_cus) {
  const int64_t cus = num_cus > 0 ? num_cus : kNumCus;
  check_range("num_cus", cus, 1, kMaxCus);
  int64_t nvt = 0, active = 0;
  for (int64_t r : expert_rows) {
    check_range("expert_rows[e]", r, 0, kMaxU32);
    nvt += r;
    active += r > 0;
    check_range("sum(expert_rows)", nvt, 0, kMaxU32);
  }
  if (active == 0) return 16;
  const int base = gateup_block_m(nvt, active);
  int best = base;
  int64_t best_per_cu = ceil_div(m_blocks(expert_rows, base), cus);
  for (int bm : kLayerBlockMs) {
    if (bm <= base) continue;
    const int64_t per_cu = ceil_div(m_blocks(expert_rows, bm), cus);
    if (per_cu < best_per_cu) best = bm, best_per_cu = per_cu;
  }
  return best;
}

// The down plan on gfx950. vgprs / lds_bytes: the chosen variant's resources (kernel metadata), used to
// compare its residency with gfx942's; num_cus <= 0 means the full MI355X (256).
inline DownPlan down_plan(int64_t num_valid_tokens, int64_t num_active_experts, int64_t N, int64_t K,
                          int64_t m_blocks, int64_t num_cus, int64_t vgprs, int64_t lds_bytes) {
  const int64_t cus = num_cus > 0 ? num_cus : kNumCus;
  DownPlan p = moe::down_plan(num_valid_tokens, num_active_experts, N, K, m_blocks, cus);
  if (p.block_m == 0) return p;
  const int here = workgroups_per_cu(vgprs, lds_bytes, kLdsBytes);
  const int there = workgroups_per_cu(vgprs, lds_bytes, kGfx942LdsBytes);
  require(here >= 1, "the down variant does not fit a gfx950 CU (vgprs " + std::to_string(vgprs) + ", lds " +
                         std::to_string(lds_bytes) + ")");
  // More resident workgroups per CU act as more CUs for the chunk split (never fewer than gfx942's).
  const int64_t eff_cus = cus * std::max(here, std::max(there, 1)) / std::max(there, 1);
  p.n_steps = down_n_steps(m_blocks, N, eff_cus, p.block_m, p.nt);
  return p;
}

}  // namespace gfx950
}  // namespace moe
}  // namespace moonmath
