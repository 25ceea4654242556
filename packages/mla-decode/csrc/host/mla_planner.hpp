// Host planner of mla_decode_a16w8 on gfx942: pure C++, no HIP types, a function of shapes only
// (plus an optional host length hint), so a captured graph replays correctly with new lengths and
// page tables: the kernel reads lengths, kv_indptr and kv_indices on the device.
//
// Work decomposition (see csrc/device/gfx942/mla_decode_a16w8*.hip):
//   rows      q_len * H per request, packed into n_rt = ceil(q_len * H / 16) MFMA row tiles;
//   parts     each request's window is cut into `nparts` runs of whole 16-token KV tiles;
//   variant   "wave":   one wave per (request, part, row tile), KV straight to registers,
//                       B * nparts * n_rt waves, 4 per workgroup;
//             "shared": one 4-wave workgroup per (request, part, group of 4 row tiles) that fetches
//                       and widens each KV tile once into LDS (n_rt >= 2 only).
// With nparts == 1 the kernel writes o/lse itself; otherwise it writes fp32 partials (O, m, l, ln) to a
// workspace and a merge kernel (a 4-wave workgroup per row) combines them in part order.
//
// Cost model (documented in docs/kernels/mla_decode_gfx942.md), in nanoseconds:
//   waves run one per SIMD (the kernels need > 256 registers), so a round holds cus * 4 waves;
//   waves     = B * nparts * n_rt (wave) or B * nparts * ceil(n_rt / 4) * 4 (shared)
//   rounds    = ceil(waves / (cus * 4))
//   t_compute = rounds * (ceil(tiles / nparts) * tile_ns + kWaveNs)      tiles = ceil(L / 16)
//               tile_ns = kTileNs (wave) or kSharedTileNs (shared)
//   t_memory  = (B * L * (576 + 4) + partial_bytes) / (kHbmBytesPerNs * busy_cus / cus)
//               busy_cus = min(cus, ceil(waves / 4)): HBM bandwidth needs every CU streaming
//               partial_bytes = 2 * B * q_len * H * nparts * (512 + 4) * 4   (written, then read)
//   cost      = max(t_compute, t_memory)
//               + (nparts > 1 ? kMergeLaunchNs + ceil(4 * B * q_len * H / (cus * 4)) * ceil(nparts / 16) * 1000 : 0)
//               (merge: a 4-wave workgroup per row, 16 parts in flight per workgroup, ~1 us per batch)
// (variant, nparts) is the first minimiser, shared (if n_rt >= 2) before wave, nparts ascending over 1..kMaxParts
// (a candidate must beat the best so far by 0.1%: ties keep fewer parts, less workspace).
// L is the length hint (tokens per request) or kDefaultLen when none is given.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace moonmath::mla {

constexpr int kLat = 512;
constexpr int kRope = 64;
constexpr int kRowBytes = kLat + kRope;  // fp8 pool row
constexpr int kMaxHeads = 128;
constexpr int kRowsPerTile = 16;
constexpr int kTileTokens = 16;
constexpr int kWavesPerBlock = 4;
constexpr int kBlockThreads = 64 * kWavesPerBlock;
constexpr int kMaxParts = 1024;

// gfx942 (MI300X) machine and kernel constants of the cost model.
constexpr int kDefaultCus = 304;
constexpr int kSimdsPerCu = 4;
constexpr int64_t kDefaultLen = 16384;
constexpr double kTileNs = 1100.0;        // one 16-token tile per wave: 68 MFMA (16 cycles) + ~330 VALU, ~2.1 GHz
constexpr double kSharedTileNs = 800.0;   // shared variant: 68 MFMA + ~150 VALU + 34 LDS reads + 2 barriers
constexpr double kWaveNs = 2000.0;        // Q load, first-tile latency, epilogue stores
constexpr double kHbmBytesPerNs = 4000.0; // ~4 TB/s achievable of the 5.3 TB/s peak
constexpr double kMergeLaunchNs = 4000.0; // a second kernel on the stream

struct Plan {
  int64_t batch = 0, heads = 0, q_len = 0;
  int64_t rows = 0;           // q_len * heads per request
  int64_t n_rt = 0;           // 16-row tiles per request
  int64_t nparts = 1;         // KV parts per request
  const char* variant = "wave";  // "wave": a wave per row tile; "shared": up to 4 row tiles share a KV tile in LDS
  int64_t waves = 0;          // wave: B * nparts * n_rt; shared: B * nparts * ceil(n_rt / 4) * 4
  int64_t grid = 0;           // workgroups of the main kernel (kBlockThreads each) = waves / 4
  int64_t block = kBlockThreads;
  int64_t merge_grid = 0;     // workgroups of the merge kernel, one per row (0: no merge)
  int64_t ws_o_floats = 0;    // workspace: partial O, [B*rows, nparts, 512] fp32
  int64_t ws_ml_floats = 0;   // workspace: partial (m, l, ln, 0), [B*rows, nparts, 4] fp32
  int64_t len_used = 0;       // the length the cost model assumed
  double cost_ns = 0;         // the model's estimate for the chosen plan
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

enum class Variant : int { kWave = 0, kShared = 1 };

// Waves a launch occupies (a shared-variant workgroup holds 4 waves even when its last row tiles are
// missing).
inline int64_t launch_waves(int64_t batch, int64_t n_rt, int64_t nparts, Variant v) {
  return v == Variant::kShared ? batch * nparts * ceil_div(n_rt, kWavesPerBlock) * kWavesPerBlock
                               : batch * nparts * n_rt;
}

// Modelled time (ns) of a launch with `nparts` parts and kernel variant `v`.
inline double plan_cost(int64_t batch, int64_t heads, int64_t q_len, int64_t len, int64_t nparts,
                        int64_t cus = kDefaultCus, Variant v = Variant::kWave) {
  const int64_t rows = q_len * heads, n_rt = ceil_div(rows, kRowsPerTile);
  const int64_t tiles = std::max<int64_t>(1, ceil_div(len, kTileTokens));
  const int64_t slots = cus * kSimdsPerCu;
  const int64_t waves = launch_waves(batch, n_rt, nparts, v);
  const int64_t rounds = ceil_div(waves, slots);
  const double tile_ns = v == Variant::kShared ? kSharedTileNs : kTileNs;
  const double t_compute = (double)rounds * ((double)ceil_div(tiles, nparts) * tile_ns + kWaveNs);
  const double partial = nparts > 1 ? 2.0 * (double)(batch * rows * nparts) * (kLat + 4) * 4.0 : 0.0;
  // HBM bandwidth is reached only with every CU streaming: scale it by the busy CUs (4 waves each).
  const double busy_cus = std::min<double>((double)cus, (double)ceil_div(waves, kSimdsPerCu));
  const double bw = kHbmBytesPerNs * busy_cus / (double)cus;
  const double t_memory = ((double)batch * (double)len * (kRowBytes + 4) + partial) / bw;
  double cost = std::max(t_compute, t_memory);
  if (nparts > 1) {
    // merge: one 4-wave workgroup per row, each wave 4 parts (2 KiB each) in flight at a time
    const double merge_rounds = (double)ceil_div(batch * rows * kWavesPerBlock, slots);
    cost += kMergeLaunchNs + merge_rounds * (double)ceil_div(nparts, 16) * 1000.0;
  }
  return cost;
}

// The launch configuration. Throws std::invalid_argument on shapes outside the kernel's domain.
// len_hint <= 0: no hint (kDefaultLen). Any batch size is served (more waves, more rounds).
// The shared variant is considered when there are two or more row tiles (with one, three of its four
// waves would idle).
inline Plan plan(int64_t batch, int64_t heads, int64_t q_len, int64_t len_hint = 0, int64_t cus = kDefaultCus) {
  if (batch < 1) throw std::invalid_argument("mla planner: batch must be >= 1, got " + std::to_string(batch));
  if (heads < 1 || heads > kMaxHeads)
    throw std::invalid_argument("mla planner: heads must be in [1, 128], got " + std::to_string(heads));
  if (q_len < 1) throw std::invalid_argument("mla planner: q_len must be >= 1, got " + std::to_string(q_len));
  if (cus < 1) throw std::invalid_argument("mla planner: cus must be >= 1, got " + std::to_string(cus));
  Plan p;
  p.batch = batch;
  p.heads = heads;
  p.q_len = q_len;
  p.rows = q_len * heads;
  p.n_rt = ceil_div(p.rows, kRowsPerTile);
  p.len_used = len_hint > 0 ? len_hint : kDefaultLen;
  const int64_t tiles = std::max<int64_t>(1, ceil_div(p.len_used, kTileTokens));
  const int64_t max_parts = std::min<int64_t>(kMaxParts, tiles);
  const int64_t total_rows = batch * p.rows;
  const int64_t limit = int64_t(1) << 32;  // 32-bit device offsets into every buffer
  // Shared first when it applies: it issues a quarter of the VMEM requests and widening VALU per row
  // tile, which the HBM-only memory term does not see, so on a tie it wins.
  const Variant first = p.n_rt >= 2 ? Variant::kShared : Variant::kWave;
  Variant best_v = first;
  int64_t best = 1;
  double best_cost = plan_cost(batch, heads, q_len, p.len_used, 1, cus, best_v);
  for (Variant v : {first, Variant::kWave}) {
    for (int64_t np = 1; np <= max_parts; ++np) {
      if (np > 1 && total_rows * np * kLat * 4 >= limit) break;  // the partial workspace must stay addressable
      const double c = plan_cost(batch, heads, q_len, p.len_used, np, cus, v);
      if (c < best_cost * 0.999) {  // strictly better by 0.1%: ties keep the earlier (fewer parts, wave)
        best = np;
        best_v = v;
        best_cost = c;
      }
    }
  }
  p.nparts = best;
  p.variant = best_v == Variant::kShared ? "shared" : "wave";
  p.cost_ns = best_cost;
  p.waves = launch_waves(batch, p.n_rt, p.nparts, best_v);
  p.grid = ceil_div(p.waves, kWavesPerBlock);
  if (p.nparts > 1) {
    p.merge_grid = total_rows;  // one 4-wave workgroup per row
    p.ws_o_floats = total_rows * p.nparts * kLat;
    p.ws_ml_floats = total_rows * p.nparts * 4;
  }
  if (total_rows * kLat * 2 >= limit || p.grid >= (int64_t(1) << 31))
    throw std::invalid_argument("mla planner: problem too large for 32-bit buffer offsets (B*q_len*H = " +
                                std::to_string(total_rows) + ")");
  return p;
}

}  // namespace moonmath::mla
