// Tile constants of the gfx942 MHA forward, shared by the device code (mha_fwd.hip) and the host planner
// (csrc/host/mha_tail_planner.hpp, which includes this directory): plain C++, no device types.
#pragma once

namespace moonmath::mha::config {

constexpr unsigned kHeadDim = 128;
constexpr unsigned kWaves = 8;          // waves per workgroup (512 threads, two waves per SIMD)
constexpr unsigned kQTilesPerWave = 2;  // 16-row q tiles held in registers by each wave
constexpr unsigned kCtaRows = kWaves * kQTilesPerWave * 16;  // q rows per workgroup: 256
constexpr unsigned kCtaThreads = kWaves * 64;
constexpr unsigned kKvBlock = 64;       // kv rows per main-loop step
constexpr unsigned kMergeRowsPerCta = 8;  // merge kernel: 8 rows x 32 threads
// merge kernel: D / 4 threads a row (4 columns each); 96: 8 rows of 24 threads (64 threads idle)
constexpr unsigned merge_rows_per_cta(unsigned head_dim) { return head_dim == 96 ? 8 : 256 * 4 / head_dim; }

}  // namespace moonmath::mha::config
