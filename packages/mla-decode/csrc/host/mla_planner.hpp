// Host planner of mla_decode_a16w8 on gfx942 and gfx950: pure C++, no HIP types, a function of shapes only
// (plus an optional host length hint), so a captured graph replays correctly with new lengths and
// page tables: the kernel reads lengths, kv_indptr and kv_indices on the device.
//
// Work decomposition (see csrc/device/mla_decode_a16w8_ws.hip, one source for both archs):
//   rows      q_len * H per request, packed into n_rt = ceil(q_len * H / 16) MFMA row tiles;
//   parts     each request's window is cut into `nparts` runs of whole 16-token KV tiles;
//   kernel    one 8-wave warp-specialised workgroup per (request, part, group of up to 4 row tiles): each
//             KV row fetched once at fp8 width, widened once into LDS, K and V^T served from that copy
//             (mla_decode_a16w8_ws.hip); any n_rt. One per CU (62 KB LDS). (The fourth session's "wave" and
//             "shared" a16w8 kernels are retired; Variant::kWave / kShared remain the KV-format kernels'
//             launch shapes, formats.py.)
// With nparts == 1 the kernel writes o/lse itself; otherwise it writes fp32 partials (O, m, l, ln) to a
// workspace and a merge kernel (cs column blocks of wpr waves per row) combines them in part order.
//
// Cost model (documented in docs/kernels/mla_decode_gfx942.md), in nanoseconds, per arch through a Machine
// (CUs, sustained clock, bandwidths, merge cycles: kGfx942, kGfx950; machine_for(arch)) and the decode
// kernels' row of kKernelCosts (kernel_cost(arch, kernel)). Its cycle constants are issue cycles
// measured on the emulator (benchmarks/calibrate_mla_planner_emu.py; the test
// test_mla_kernel_planner.py::test_cost_constants_match_the_emulator keeps them within 10% of it), so
// the planner sees what a part costs beyond its tiles (Q load, prologue, epilogue of partials) and
// what the merge costs, and stops splitting where a part's fixed cost and the merge outweigh the gain:
//   workgroups run in whole rounds of cus * cu_workgroups (kernel_cost: 1 for the 4-wave and ws kernels,
//   which fill a CU; 4 or 2 (a8w8: its waves share the CU's LDS and VMEM) for the one-wave _w1 kernels):
//   waves     = B * nparts * n_rt (wave), B * nparts * ceil(n_rt / 4) * 4 (shared), * 8 (ws)
//   rounds    = ceil(workgroups / (cus * cu_workgroups)), workgroups = waves / workgroup_waves (ws: one of
//               8 waves per 4 row tiles, its cycles the workgroup's issue cycles per SIMD: total / 4)
//   t_compute = rounds * (ceil(tiles / nparts) * tile_cycles + part_cycles) / clock + kPartLatencyNs
//               + (rounds - 1) * round_latency_ns (gfx942: kPartLatencyNs again per further round)
//               tiles = ceil(L / 16); tile_cycles = tile + (min(n_rt, 4) - 1) * rowtile (kernel_cost),
//               part_cycles = part + (min(n_rt, 4) - 1) * part_rowtile (a part's Q and partials grow with its rows)
//   t_memory  = (B * L * (576 + 4) + partial_bytes) / bw
//               bw = min(kHbmBytesPerNs, busy_cus * kCuBytesPerNs), busy_cus = min(cus, workgroups);
//               kCuBytesPerNs is a CU's share of HBM when all are busy (what the timing model serves)
//               partial_bytes = B * q_len * H * nparts * (512 * o_bytes + 16)   (written; the merge reads them;
//               o_bytes = partial_o_bytes: 4 fp32, 2 for the ws kernel's fp16 O / ln up to kHalfPartialsMaxParts)
//   cost      = max(t_compute, t_memory) + (nparts > 1 ? t_merge : 0)
//   balanced split (balance_split: 1 < B <= 64 and nparts > 1): part_cycles and the merge wave's
//               cycles grow by balance_request_cycles * B (0 now: located lane-parallel)
//   t_merge   = merge_cost: (cs, wpr) = spread_merge_shape (every kernel's, a16w8's too), its workgroups in
//               rounds over the CUs as the timing model runs them, each round a fixed start plus the busiest
//               CU's issue or bytes, whichever is longer, plus an HBM round trip per further iteration of a
//               wave (fitted to the timing model's merge: see there)
// kPartLatencyNs, kHbmLatencyNs and the bandwidths are assumptions about the hardware (the emulator
// has no timing); the cycle constants are measurements.
// nparts: the fewest parts whose cost is within the machine's split_slack (gfx942: 3%; gfx950: kSplitSlack,
// 5%; the format kernels: format_split_slack, gfx950 2%) of the minimum over nparts in
// 1..kMaxParts with no empty part: gains below the
// model's accuracy do not buy more work.
// L is the length hint (tokens per request) or kDefaultLen when none is given.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

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
constexpr int64_t kKvSplitWaves = 4;  // the _kv4 kernels' one-wave decoders per workgroup

// gfx942 (MI300X) machine constants (assumptions about the hardware).
constexpr int kDefaultCus = 304;
constexpr int kSimdsPerCu = 4;
constexpr int64_t kDefaultLen = 16384;
// Sustained engine clock under load, not the 2.1 GHz peak: AMD measured 1115-1230 MHz under a sustained
// BF16 GEMM and the timing model's calibrated effective clock is 1041 MHz (docs/performance.md). The
// issue cycles below are turned into time at this clock, beside latencies in ns, so the ratio of a
// part's work to a merge's latency is the one the timing model sees.
constexpr double kClockGhz = 1.1;
constexpr double kHbmBytesPerNs = 4000.0;  // ~4 TB/s achievable of the 5.3 TB/s peak
// One CU's share of HBM as the timing model serves it: 5.3 TB/s / 304 CUs = 17.4 B/ns (ninth session: the model
// charges HBM at the clock it turns cycles into seconds with, docs/performance.md "Session 9: HBM at the effective
// clock"; 8.6 before, the share per cycle of the 2.1 GHz config clock in time at 1041 MHz) -- what a launch on
// fewer CUs gets per CU. The full chip stays capped at kHbmBytesPerNs.
constexpr double kCuBytesPerNs = 5300.0 / 304.0;
constexpr double kPartLatencyNs = 2000.0;  // a part's first MFMA waits for its slots, then its KV
constexpr double kMergeLaunchNs = 4000.0;  // a second kernel on the stream
// A split must beat the fewer-part plans by more than 5%. (10% before: on the timing model at the seed's MLA
// table the parts it refused were real gains of 5-11% -- (32, 8192): 9 parts 149 us, 8 parts 161 us -- CUs
// left idle, not the model's uncertainty; benchmarks/timing/mla.py geomean 0.970 -> 1.018.)
constexpr double kSplitSlack = 1.05;
// The length-balanced split (device side) is used up to this batch (one wave's lanes hold the lengths).
constexpr int64_t kBalanceMaxBatch = 64;

// Issue cycles of one decode kernel, measured on the emulator (perfmodel weights: MFMA 16, VALU/DS/VMEM 4,
// trans 16, scalar 1) by benchmarks/calibrate_mla_planner_emu.py at H 16, per SIMD (a ws workgroup's total
// / 4): the model's time of a part is part_cycles + tiles * (tile_cycles + (row tiles - 1) * rowtile_cycles).
struct KernelCost {
  double tile_cycles;     // one 16-token KV tile with one 16-row tile
  double rowtile_cycles;  // each further row tile of a workgroup sharing the KV tile (ws; 0: per-wave kernels)
  double part_cycles;     // a part's fixed cost: prologue, Q load, split location, epilogue / partial write
  double token_bytes = kRowBytes + 4;  // HBM bytes per KV token: its pool record(s) and its kv_indices entry
  double call_launches = 0;    // launches of its own per call before the decode (a8w8: the Q amax)
  double call_row_cycles = 0;  // those launches' issue cycles per query row (B * q_len * H rows)
  double workgroup_waves = kWavesPerBlock;  // waves per workgroup of a non-ws launch (the "_w1" kernels: 1), so
                                            // the CUs it occupies (its share of HBM) are its workgroups'
  double part_rowtile_cycles = 0;  // each further row tile's share of a part's fixed cost (ws: its Q rows, its
                                   // partial stores); 0: the row measured once (part_cycles at one row tile)
  double partial_o_bytes = 4;      // bytes of one partial O element: fp32, or 2 (ws: fp16 O / ln)
  // Workgroups one CU runs at once at the rate tile_cycles measures: a round is cus * cu_workgroups workgroups.
  // 1 for the 4-wave and ws kernels (they fill a CU: occupancy 1). The one-wave "_w1" kernels are resident 4 per
  // CU, one per SIMD; mxfp4's and a16w16's overlap at 4 on the timing model (gfx950,
  // benchmarks/timing/mla_gfx950.py). a8w8's gain nothing past 2: at (64, 8192) 8 parts (2 per CU) and 16 (4 per
  // CU) model 95.3 and 95.7 us of decode, the 4 waves waiting on the CU's HBM share (waitcnt_vm 18 -> 55 %), which
  // this model's bandwidth (busy CUs x cu_bytes_per_ns) does not see; counted as 4, the planner took 10 parts
  // there (127.2 us modeled against 107.4 for its 8).
  // (Session 4 set 2 for another reason, since fixed: the timing model put every one-wave workgroup on SIMD 0.)
  double cu_workgroups = 1;
  // The kernel's KV tile (tokens): a part is whole tiles of it, tpp = ceil(ceil(len / tile) / nparts) (the
  // kernels' split, mla_decode_lds_tile.hpp), so a split into more parts than tiles leaves parts empty. a8w8's
  // 32-token tiles: at (4, 1024) 64 parts (16 tokens each as 16-token tiles) gave half the parts a 32-token tile
  // and the other half none, priced as if each decoded 16 tokens.
  double tile_tokens = kTileTokens;
  // "_kv4" kernels: each of the part's 4 waves decodes ceil(tpp / 4) of its tpp whole tiles, so a part shorter
  // than 4 tiles costs a whole tile per wave, not a quarter of the part (at (4, 1024) a8w8 the planner's quarter
  // priced 32 parts of one 32-token tile below the one-wave kernel's 64 parts: 19.7 against 17.1 us modeled).
  bool kv_split = false;
};
// The one table of decode-kernel costs: a row per (arch, kernel): the a16w8 ws kernel (plan()) and the KV-format
// kernels (formats.py, plan_format_parts()); a kernel without a row has no cost model (kernel_cost throws).
struct KernelCostRow {
  const char* arch;
  const char* kernel;  // "ws": the a16w8 kernel; "<format>", "<format>_w1": formats.py's
  KernelCost cost;
};
// Bytes per KV token of the format kernels: the pool record, MXFP4's 18 E8M0 scales, the kv_indices entry.
constexpr double kA16w16TokenBytes = 2 * kRowBytes + 4, kMxfp4TokenBytes = kRowBytes / 2 + kRowBytes / 32 + 4;
inline constexpr KernelCostRow kKernelCosts[] = {
    // ws: part_cycles at one row tile, part_rowtile_cycles per further row tile (measured at 4: q_len 4, H 16);
    // ninth session 831 / 424 -> 786 / 381: the contract waves publish 1 / ln (one division per row tile, not four)
    {"gfx942", "ws", {739.0, 432.0, 786.0, kRowBytes + 4, 0, 0, kWavesPerBlock, 381.0, 2.0}},
    // gfx950: the QK contraction is 18 v_mfma_f32_16x16x32_bf16 per tile instead of 36 16x16x16
    {"gfx950", "ws", {667.0, 360.0, 786.0, kRowBytes + 4, 0, 0, kWavesPerBlock, 381.0, 2.0}},
    // The KV-format kernels (formats.py), benchmarks/calibrate_mla_formats_emu.py: "<format>" the 4-wave
    // LDS-tile kernel (a wave per row tile, up to 4 sharing a KV tile: the "shared" launch shape, cycles per
    // wave at 4 row tiles), "<format>_w1" gfx950's one-wave kernel for one row tile (the "wave" shape).
    // Tiles of 16 tokens (a8w8 fetches 32-token tiles: half of one). "<format>_kv4" (gfx950, one row tile): a
    // 4-wave workgroup per (request, part) whose one-wave decoders split the part and merge in LDS (132 KiB: one
    // per CU); cycles per wave, the tile term per 16 tokens of the part (a wave decodes a quarter of them).
    // Fourteenth session: the one-wave decoders (_w1; a16w16's and a8w8's _kv4) peel their first tile
    // (mla_decode_lds_tile.hpp), their rows re-measured; the other rows are unchanged. Fifteenth session: a8w8's
    // Q launch (mla_q_amax_r<R>) issues 234 weighted cycles a query row at H 64 (209 before: its q_pe loads at
    // R < 8 rows a wave reduce a whole register for R rows), while the timing model's launch got faster.
    {"gfx942", "a16w16", {1934.0, 0.0, 2535.0, kA16w16TokenBytes}},
    {"gfx950", "a16w16_w1", {1824.0, 0.0, 1927.0, kA16w16TokenBytes, 0, 0, 1, 0, 4, 4}},
    {"gfx950", "a16w16", {1565.0, 0.0, 2036.0, kA16w16TokenBytes}},
    {"gfx950", "a16w16_kv4", {458.0, 0.0, 2895.0, kA16w16TokenBytes, 0, 0, 4, 0, 4, 1, 16, true}},
    {"gfx950", "a8w8_w1", {1175.0, 0.0, 3325.0, kRowBytes + 4, 1, 234.0, 1, 0, 4, 2, 32}},
    {"gfx950", "a8w8", {1023.0, 0.0, 3293.0, kRowBytes + 4, 1, 234.0, kWavesPerBlock, 0, 4, 1, 32}},
    {"gfx950", "a8w8_kv4", {288.0, 0.0, 3011.0, kRowBytes + 4, 1, 234.0, 4, 0, 4, 1, 32, true}},
    {"gfx950", "mxfp4_w1", {2744.0, 0.0, 2476.0, kMxfp4TokenBytes, 0, 0, 1, 0, 4, 4}},
    {"gfx950", "mxfp4_kv4", {708.0, 0.0, 3773.0, kMxfp4TokenBytes, 0, 0, 4, 0, 4, 1, 16, true}},
    {"gfx950", "mxfp4", {1750.0, 0.0, 2116.0, kMxfp4TokenBytes}},
};

inline const KernelCost& kernel_cost(const std::string& arch, const std::string& kernel) {
  for (const KernelCostRow& r : kKernelCosts)
    if (arch == r.arch && kernel == r.kernel) return r.cost;
  throw std::invalid_argument("mla planner: no cost row for kernel '" + kernel + "' on '" + arch + "'");
}

// One arch's machine model: the hardware assumptions and the merge kernel's issue cycles measured on the
// emulator for that arch's code object (benchmarks/calibrate_mla_planner_emu.py --arch); the decode
// kernels' cycles are kKernelCosts' rows for the arch.
struct Machine {
  const char* arch;
  int64_t cus;              // the full part's CUs (a live device may report fewer: plan's cus)
  double clock_ghz;         // sustained clock
  double hbm_bytes_per_ns;  // achievable HBM bandwidth of the full part
  double cu_bytes_per_ns;   // what one CU pulls from HBM when all are busy
  double merge_wave_cycles;       // a merge wave's fixed cost (locating its row's parts, the weights, o)
  double merge_iter_cycles;       // one merge iteration: four parts summed
  double balance_request_cycles;  // balanced split: per request, per decode and merge wave (0: lane-parallel)
  // plan(): a split must beat the fewer-part plans by more than this factor (format kernels: kSplitSlack).
  double split_slack = kSplitSlack;
  // The start latency (kPartLatencyNs) paid again by every further round of workgroups (0: once per launch).
  // gfx942 (sixth session): each round's parts wait for their slots, then their KV, as the first round's do;
  // once per launch, (512, 4096) split into 4 parts looked 4% faster than 1 part, which the timing model puts
  // 6% slower (1081.6 vs 1016.1 us, benchmarks/timing/mla.py's ours_shape with the parts overridden).
  double round_latency_ns = 0.0;
  // plan_format_parts (the KV-format kernels): the same rule's factor. gfx950 1.02: at 1.05 a8w8 (32, 1024) took
  // 4 parts (27.6 us modeled) where 8 model 25.6 (the planner priced 8 3% cheaper); with the _kv4 tile term
  // (kv_split) the other gfx950 shapes keep or gain (docs/kernels/mla_decode_gfx950.md, session 6b).
  double format_split_slack = kSplitSlack;
  // ws parts: a workgroup's Q load and partial stores at the CU's HBM share are serial with its compute, once per
  // round (1; 0: not priced). gfx942 (ninth session, HBM at the effective clock): the timing model's ws part at
  // q_len 4, H 16 costs 12.6k cycles beyond its tiles (135.4k at 1024 rows, 495.4k at 4096) where its issue
  // cycles are 1.9k; its 74 KB of Q and 67 KB of fp16 partials at 17.4 B/ns are 8.1 us of the 12.1 us. Unpriced,
  // (512, 16, 4, 4096) took 4 parts (906 us priced, 960 modeled) over 1 (955 both). gfx950: not re-fit.
  double ws_part_bytes_serial = 0.0;
  // A merge wave of one (row, quarter) (4 column blocks): its fixed cost and one iteration of 16 parts (four lane
  // groups of four steps); it sums its lane groups and stores a quarter row (eighteenth session).
  double merge_quarter_wave_cycles = 0.0;
  double merge_quarter_iter_cycles = 0.0;
  // spread_merge_shape's one wave per (row, quarter) in one-wave workgroups (up to 16 parts, two waves a SIMD)
  bool merge_one_wave_quarters = false;
};
// split_slack 1.03, chosen on the timing model (benchmarks/timing/mla.py's ours_shape with the parts overridden,
// H 16): 5% refused real gains at the seed's table (q_len 4): (8, 8192) 31 parts 63.5 us, 32: 61.8;
// (8, 32768) 36 / 38: 145.7 / 140.7; (2, 150000) 143 / 147: 171.5 / 166.6; (1, 150000) 276 / 293. The minimum
// itself (1.0 to 1.02) over-splits where the model is flat: (512, 4096) 4 parts 1180 us against 1 part 1016;
// B 2, q_len 1, S 8192: 171 parts 39.2 us against 57-64 parts 33-36.
// merge 1084 / 286 (ninth session: the scalar prologue, calibrate_mla_planner_emu.py on both archs; 1376 / 262 before,
// the sixth session's: a chunk's first O loads issued with its (m, l, ln) load; 2086 / 244 before that). Thirteenth
// session (packed FMAs on the partials' registers, gfx950's bf16 packing): measured 1060 / 271 on gfx942, kept (within
// 10 %; kMergeTiming is fitted with them), 955 / 271 on gfx950 (kGfx950). Eighteenth session (one merge kernel per
// partial layout, out-of-range loads for the missing parts, the (m, l, ln) load no longer ahead of the O loads, one
// DPP row's reductions up to 16 parts, a lane pair per lane group at 4 column blocks): 768 / 255 on gfx942, 663 /
// 255 on gfx950.
constexpr Machine kGfx942{"gfx942", kDefaultCus, kClockGhz, kHbmBytesPerNs, kCuBytesPerNs, 768.0, 255.0, 0.0, 1.03,
                          kPartLatencyNs, kSplitSlack, 1.0, 497.0, 630.0};
// MI355X (assumptions): 256 CUs, a sustained clock in the same proportion to its 2.4 GHz peak as
// gfx942's, 8 TB/s peak HBM of which ~6 TB/s achievable (the 4 / 5.3 fraction assumed on gfx942).
constexpr Machine kGfx950{"gfx950", 256, 1.26, 6000.0, 23.4, 663.0, 255.0, 0.0, kSplitSlack, 0.0, 1.02, 0.0, 392.0,
                          630.0, true};

// The machine model of `arch`; std::invalid_argument for an arch without MLA decode kernels.
inline const Machine& machine_for(const std::string& arch) {
  if (arch == "gfx942") return kGfx942;
  if (arch == "gfx950") return kGfx950;
  throw std::invalid_argument("mla planner: no machine model for arch '" + arch + "' (gfx942, gfx950)");
}

struct Plan {
  int64_t batch = 0, heads = 0, q_len = 0;
  int64_t rows = 0;           // q_len * heads per request
  int64_t n_rt = 0;           // 16-row tiles per request
  int64_t nparts = 1;         // KV parts per request
  const char* variant = "ws";  // the a16w8 decode kernel (the one variant)
  int64_t waves = 0;          // B * nparts * ceil(n_rt / 4) * 8
  int64_t grid = 0;           // workgroups of the main kernel (kBlockThreads each) = waves / 4
  int64_t block = kBlockThreads;
  int64_t merge_grid = 0;     // workgroups of the merge kernel (spread_merge_shape; 0: no merge)
  int64_t merge_wpr = 0;      // merge waves per (row, column block) (spread_merge_shape; 0: no merge)
  int64_t merge_cs = 0;       // merge column blocks per row (spread_merge_shape; 0: no merge)
  int64_t merge_waves = 0;    // waves per merge workgroup (spread_merge_shape; 0: no merge)
  bool balanced = false;      // parts shared out by request length on the device (balance_split)
  int64_t ws_o_floats = 0;    // workspace: partial O, [B*rows, nparts, 512] fp32 (ws: fp16, half the floats)
  int64_t ws_ml_floats = 0;   // workspace: partial (m, l, ln, 0), [B*rows, nparts, 4] fp32, then [B] request ends
  int64_t len_used = 0;       // the length the cost model assumed
  double cost_ns = 0;         // the model's estimate for the chosen plan
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The ws kernel writes its partial O as fp16 O / ln up to this many parts, fp32 beyond: at q_len 4, S 32768,
// 121 parts the fp16 rounding put o's error 0.15% above AITER's (1.8383e-3 vs 1.8356e-3); at <= 86 parts
// it stayed below (table_mla_kernel_emu.py's inputs).
constexpr int64_t kHalfPartialsMaxParts = 64;
inline bool ws_half_partials(int64_t nparts) { return nparts > 1 && nparts <= kHalfPartialsMaxParts; }

enum class Variant : int { kWave = 0, kShared = 1, kWs = 2 };
constexpr int kWsWaves = 8;  // waves of a ws workgroup
inline const char* variant_name(Variant v) {
  return v == Variant::kWs ? "ws" : (v == Variant::kShared ? "shared" : "wave");
}

// Waves a launch occupies (a shared-variant workgroup holds 4 waves even when its last row tiles are
// missing).
inline int64_t launch_waves(int64_t batch, int64_t n_rt, int64_t nparts, Variant v) {
  if (v == Variant::kWs) return batch * nparts * ceil_div(n_rt, kWavesPerBlock) * kWsWaves;
  return v == Variant::kShared ? batch * nparts * ceil_div(n_rt, kWavesPerBlock) * kWavesPerBlock
                               : batch * nparts * n_rt;
}
// Workgroups of the main kernel: 4 waves each, except ws (8 waves, one per 4 row tiles).
inline int64_t launch_grid(int64_t batch, int64_t n_rt, int64_t nparts, Variant v) {
  if (v == Variant::kWs) return batch * nparts * ceil_div(n_rt, kWavesPerBlock);
  return ceil_div(launch_waves(batch, n_rt, nparts, v), kWavesPerBlock);
}

// Waves of the merge kernel per row: one while its parts fit four iterations of four loads in flight,
// then two, then four (the latency of a long part list is shared).
// Column blocks of a merge row: 4 (each a quarter of the 512 columns with its own waves, four parts at a
// time per wave) for long part lists, whose bytes then spread over 4x the CUs; else 1.
inline int64_t merge_column_blocks(int64_t nparts) { return nparts > 64 ? 4 : 1; }
// Waves of the merge kernel per (row, column block): one while its parts fit four iterations of four
// loads in flight, then one more power of two per doubling, up to 8 (a 512-thread workgroup: at 1024
// threads the merge would be held to 128 VGPRs and spill).
inline int64_t merge_waves_per_row(int64_t nparts) {
  const int64_t per_wave = 16 * merge_column_blocks(nparts);
  int64_t w = 1;
  while (w < 8 && nparts > per_wave * w) w *= 2;
  return w;
}
// Waves of a merge workgroup: 4, or one row's wpr waves (8, 16) when that is more.
inline int64_t merge_block_waves(int64_t wpr) { return std::max<int64_t>(kWavesPerBlock, wpr); }

// A split whose last parts would get no tile (tiles = 64, nparts = 40: 2 tiles per part fill 32 parts)
// only adds empty waves and merge inputs; the planner considers only splits where every part has work.
inline bool parts_all_busy(int64_t tiles, int64_t nparts) {
  return ceil_div(tiles, ceil_div(tiles, nparts)) == nparts;
}

// Whether the B * nparts parts are shared out by request length (mla_decode_common.hpp, locate):
// whenever a batch splits, up to kBalanceMaxBatch requests (each wave then reads all B lengths).
inline bool balance_split(int64_t batch, int64_t nparts) { return nparts > 1 && batch > 1 && batch <= kBalanceMaxBatch; }

// The merge of a KV-format kernel's split (formats.spread_merge): where the a16w8 shape above (by nparts alone)
// gives fewer workgroups than CUs, a quarter of the columns per block of waves (cs 4), then twice the waves per
// (row, quarter) until the workgroups fill the CUs, at most 8 and one wave per 4 parts; not when even one wave per
// (row, quarter) would take more than one round of the CUs. On the timing model a
// CU's merge time is its workgroups' bytes over its HBM share: fewer bytes per workgroup, shorter merge.
struct MergeShape {
  int64_t cs, wpr, grid;
  int64_t waves;  // per workgroup: merge_block_waves(wpr), halved while whole rows leave CUs idle, or 1 (one (row, quarter) per one-wave workgroup)
};
inline int64_t merge_grid(int64_t total_rows, int64_t cs, int64_t wpr) {
  return ceil_div(total_rows * cs * wpr, merge_block_waves(wpr));
}
inline MergeShape merge_shape(int64_t total_rows, int64_t nparts) {
  const int64_t cs = merge_column_blocks(nparts), wpr = merge_waves_per_row(nparts);
  return {cs, wpr, merge_grid(total_rows, cs, wpr), merge_block_waves(wpr)};
}
// one_wave_quarters: the machine's merge_one_wave_quarters (the first rule below).
inline MergeShape spread_merge_shape(int64_t total_rows, int64_t nparts, int64_t cus, bool one_wave_quarters) {
  const MergeShape a = merge_shape(total_rows, nparts);
  if (nparts <= 1) return a;
  // One wave per (row, quarter) in one-wave workgroups, where a wave's parts fit its four lane groups' four
  // steps of loads (16 parts) and the waves fit two a SIMD: no cross-wave fold, no barrier, and the merge's bytes
  // spread over the most CUs (eighteenth session, timing model, gfx950 a8w8: (4, 1024), 8 parts, 2.49 -> 2.26 us
  // against wpr 2 in 4-wave workgroups; (32, 1024), 8 parts, 3.75 -> 3.32 against whole rows; at 16 waves a CU,
  // (64, 1024), 4 parts, 3.02 -> 3.60, not taken). 4 parts stay in: without them the gfx950 planner, whose merge
  // form prices the quarters' two rounds of SIMD slots above whole rows, took 4 parts at a8w8 (32, 1024) where the
  // timing model prefers 8. gfx950 only (Machine::merge_one_wave_quarters): the gfx942 planner's merge form put
  // these merges 20-22% off the timing model (a16w8 (2, 16) high, (8, 16) and (8, 37) low), past its 15%
  // (tests/test_mla_kernel_planner.py).
  const int64_t quarters = 4 * total_rows;
  if (one_wave_quarters && nparts <= 16 && quarters <= 8 * cus) return {4, 1, quarters, 1};
  if (a.grid >= cus) {
    // Whole rows already fill the CUs, but unevenly (the busiest CU carries ceil(grid / cus) workgroups): one
    // (row, quarter) per one-wave workgroup evens the bytes out (7 quarter rows instead of 2 rows) and drops
    // the cross-wave fold, where that puts no more waves on a CU than the whole rows did (seventh session,
    // timing model: gfx942 (8, 8192), 37 parts, 14.5 -> 12.2 us; at 14 waves per CU against 8, (16, 150000),
    // or 16 against 4, gfx950 a8w8 (64, 1024) 5.3 -> 7.6, it is not taken).
    if (a.cs == 1 && ceil_div(quarters, cus) <= ceil_div(a.grid, cus) * a.waves) return {4, 1, quarters, 1};
    return a;
  }
  int64_t wpr = a.cs == 1 ? 1 : a.wpr;
  while (merge_grid(total_rows, 4, wpr) < cus && wpr < 8 && 4 * wpr < nparts) wpr *= 2;
  const int64_t grid = merge_grid(total_rows, 4, wpr);
  // past one round of the CUs the spread only adds waves: (32, 1024) a8w8, 6 parts, 512 rows: 128 workgroups
  // of 4 rows 7.2 us on the timing model, 512 of a (row, quarter) 10.1 us
  if (grid > a.grid && grid <= cus) return MergeShape{4, wpr, grid, merge_block_waves(wpr)};
  // Whole rows then, in smaller workgroups while those still fit one round of the CUs (ninth session, timing
  // model: gfx950 a8w8 (32, 1024), 8 parts, 512 rows: 128 workgroups of 4 rows, merge round 7653 cycles; 256 of
  // 2 rows, 6035): the same waves, each CU's share of the bytes halved.
  MergeShape s = a;
  while (s.waves > s.wpr && s.waves > 1 && ceil_div(total_rows * s.cs * s.wpr, s.waves / 2) <= cus) {
    s.waves /= 2;
    s.grid = ceil_div(total_rows * s.cs * s.wpr, s.waves);
  }
  return s;
}

// The merge launch's time model (ninth session), fitted to the timing model's merge (benchmarks/timing/
// mla_merge_cost.py, both archs; docs/kernels/mla_decode_gfx942.md "Session 9"). The timing model runs a launch in
// rounds of per_cu co-resident workgroups per CU and charges each round the busiest CU's time; so does this:
//   per_cu   = min(merge_waves_per_cu / waves per workgroup, ceil(grid / cus)), rounds = ceil(grid / (cus * per_cu))
//   t_round  = t_start + max(t_issue, bytes_cu / share) + (iterations - 1) * iter_latency (share: a CU's
//              cu_bytes_per_ns among min(CUs, grid) busy CUs, as the timing model's busy_cus shares HBM)
//              bytes_cu = per_cu * a workgroup's bytes (its (row, column block)s: every part's O slice and
//              (m, l, ln) read, its o slice written); t_issue = waves per SIMD * a merge wave's issue cycles
//              (merge_wave_cycles + iterations * merge_iter_cycles, measured: calibrate_mla_planner_emu.py)
//   t_start  = start + start_wave / (waves per SIMD) + fold * (wpr - 1) (the cross-wave LDS fold, one wave's
//              partial O after another into the row's first), in cycles:
//              the dependent (m, l, ln) -> weights -> O chain and the last stores, hidden by the other waves of a
//              SIMD; the emulator's latencies are cycles, so one set serves both archs
//   iter_latency (cycles): a wave's loads of its next 4 parts wait the last iteration's HBM round trip; the
//              CU's waves step through their iterations together, so the other waves of a SIMD do not hide it
//              (the model's rounds, simulated cycles: at B 8, one wave per CU, cs 1, 16 parts (4 iterations) run
//              3726 longer than 4 parts (1), their issue and bytes 858 and 1486 longer; so added, not inside the
//              max; divided by the waves per SIMD (hidden by the others) it fit 19% at worst (16 launches), added 13%)
//   t_merge  = kMergeLaunchNs + max(rounds * t_round, total bytes / the chip's HBM bandwidth)
// The form it replaces (rounds over SIMD slots of one-iteration HBM round trips + bytes over the busy CUs' share)
// was 41% high at (512, 2) and 20% high at (64, 4), H 16, q_len 4, and the split's costs moved with it.
struct MergeTiming {
  double start_cycles;       // per round
  double start_wave_cycles;  // per round, shared by the waves of a SIMD
  double fold_cycles;        // per round, per further wave of a (row, column block) (wpr - 1)
  double iter_latency_cycles;  // per round, per iteration of a wave after its first
};
// Fitted to 23 gfx942 launches' rounds (a16w8 partials, B 1..512; the merge kernel's scalar prologue, HBM at the
// effective clock, ninth session), in this planner's cycles (each round's time on the model x clock_ghz): the
// iteration latency on a 10-cycle grid, the rest by least squares of the relative error: 1077 / 1650 / 595 / 1060,
// every launch within 13.1% ((1, 171) +13.1%, (8, 37) -13.0%). Before (1185 / 2905 / 725 once per folding round, no
// latency; simulated cycles, 16 gfx942 and 8 gfx950 launches) the one-round merges of few waves were 23-27% low
// ((2, 16), (8, 16), (8, 37)), (8, 4) / (512, 2) 28 / 18% high, and the folds of 4-8 waves at B 1-2 20-34% low
// ((1, 64) -32%, (1, 128) -34%, (1, 293) -24%, (2, 147) -20%; the 8-wave ones 47-48% low with the latency alone,
// one fold per round). mla_merge_cost.py --fit prints the merges in ns beside the model's and the fit.
// Re-fit in the twelfth session to its cheaper merge (request ends from the decode, DPP reductions; the ninth
// session's constants put (2, 128) 18% high): 1108 / 1295 / 519 / 810, the 23 launches within 12.8% ((512, 2) +12.8%,
// (2, 64) +12.6%, (8, 37) -12.0%; tests/test_mla_kernel_planner.py _MERGE_MEASURED).
// Re-fit in the thirteenth session (the merge's packed FMAs; the timing model's HBM and L2 shares of the launch's
// busy CUs, which made the one-round merges on fewer workgroups than CUs faster, (2, 128) 20% high; the round's
// bytes at that share): 877 / 1253 / 505 / 920. Re-fit in the eighteenth session to its merge kernels (one per
// partial layout, their occupancy in merge_waves_per_cu, a quarter wave's own issue cycles): 452 / 2053 / 570 / 690,
// the 23 launches within 14.3% ((8, 37) -14.3%, (128, 4) +14.2%).
constexpr MergeTiming kMergeTiming{452.0, 2053.0, 570.0, 690.0};
// gfx942 prices its merge in this form. gfx950 keeps the eighth session's (rounds over SIMD slots of one HBM
// round trip, kHbmLatencyNs, per iteration; bytes over the busy CUs' share) until its cu_bytes_per_ns is re-fit:
// at 23.4 B/ns, 1.5x the 15.5 the session-8 timing model served at gfx950's 1190 MHz, its decode estimates were
// low, and this form alone moved 5 of 32 gfx950 plans, a8w8 (32, 1024) 8 -> 4 parts, 21.6 -> 26.0 us modeled
// (geomean 46.7 -> 47.8; benchmarks/timing/mla_gfx950.py, ninth session, before HBM at the effective clock). The
// session-9 model serves 31.25 B/ns per CU (8 TB/s / 256); gfx950's constants were not re-fit to it.
inline bool merge_rounds_form(const Machine& mc) { return std::string(mc.arch) == "gfx942"; }
constexpr double kHbmLatencyNs = 1000.0;  // the eighth session's form: one dependent HBM round trip (assumption)
// Merge waves resident per CU on the timing model (timing.occupancy of the kernel's VGPRs; 16 for the one merge
// kernel before the eighteenth session). Since then one kernel per partial layout: the fp16-partial kernels take
// <= 64 VGPRs (8 waves a SIMD), the fp32 ones <= 96 (5 a SIMD; 2 workgroups of 8 waves); tests/
// test_mla_kernel_isa.py holds them to it.
inline int64_t merge_waves_per_cu(double partial_o_bytes, int64_t waves_per_workgroup) {
  if (partial_o_bytes <= 2.0) return 32;
  return waves_per_workgroup >= 8 ? 16 : 20;
}

// A merge wave's issue cycles: fixed, and per iteration (4 parts of a whole row, cs 1; 16 of a quarter, cs 4).
inline double merge_wave_issue(const Machine& mc, int64_t cs) {
  return cs == 4 ? mc.merge_quarter_wave_cycles : mc.merge_wave_cycles;
}
inline double merge_iter_issue(const Machine& mc, int64_t cs) {
  return cs == 4 ? mc.merge_quarter_iter_cycles : mc.merge_iter_cycles;
}

// The terms of merge_cost: one round's shape (the busiest CU's workgroups, its waves per SIMD, whether a
// row's waves fold) and work (a SIMD's issue cycles, the CU's bytes), and the launch's rounds and bytes.
struct MergeRound {
  int64_t per_cu, rounds, simd_waves;
  int64_t fold_waves;   // wpr - 1: the waves folded into a (row, column block)'s first
  int64_t iters;        // a wave's iterations, 4 parts each
  double issue_cycles;  // per SIMD
  double cu_bytes;      // per CU
  double total_bytes;
  double cu_bytes_per_ns;  // a busy CU's HBM share
};
inline MergeRound merge_round(int64_t total_rows, int64_t nparts, int64_t cus, double extra_wave_cycles,
                              const Machine& mc, double partial_o_bytes, bool spread) {
  const MergeShape ms = spread ? spread_merge_shape(total_rows, nparts, cus, mc.merge_one_wave_quarters)
                               : merge_shape(total_rows, nparts);
  const int64_t cs = ms.cs, wpr = ms.wpr;
  MergeRound r;
  r.per_cu = std::min<int64_t>(std::max<int64_t>(1, merge_waves_per_cu(partial_o_bytes, ms.waves) / ms.waves),
                               ceil_div(ms.grid, cus));
  r.rounds = ceil_div(ms.grid, cus * r.per_cu);
  r.simd_waves = ceil_div(r.per_cu * ms.waves, kSimdsPerCu);
  r.fold_waves = wpr - 1;
  r.iters = ceil_div(nparts, 4 * cs * wpr);
  r.issue_cycles = (double)r.simd_waves * (merge_wave_issue(mc, cs) + extra_wave_cycles +
                                           (double)r.iters * merge_iter_issue(mc, cs));
  // one (row, column block): its parts' O slice and (m, l, ln) read, its o slice (bf16) written
  const double cols = (double)kLat / (double)cs;
  const double unit_bytes = (double)nparts * (cols * partial_o_bytes + 16.0) + cols * 2.0;
  r.cu_bytes = (double)r.per_cu * ((double)ms.waves / (double)wpr) * unit_bytes;
  r.total_bytes = (double)(total_rows * cs) * unit_bytes;
  // a CU's HBM share among the launch's busy CUs, as the timing model serves it (busy_cus): a merge on fewer
  // workgroups than CUs leaves the idle CUs' shares to the busy ones
  r.cu_bytes_per_ns = mc.cu_bytes_per_ns * (double)mc.cus / (double)std::min<int64_t>(mc.cus, std::min(cus, ms.grid));
  return r;
}

inline double merge_cost(int64_t total_rows, int64_t nparts, int64_t cus, double extra_wave_cycles = 0.0,
                         const Machine& mc = kGfx942, double partial_o_bytes = 4.0, bool spread = false) {
  if (!merge_rounds_form(mc)) {  // gfx950: the eighth session's form (see merge_rounds_form)
    const MergeShape ms = spread ? spread_merge_shape(total_rows, nparts, cus, mc.merge_one_wave_quarters)
                               : merge_shape(total_rows, nparts);
    const int64_t cs = ms.cs, wpr = ms.wpr;
    const double rounds = (double)ceil_div(total_rows * cs * wpr, cus * kSimdsPerCu);
    const double iters = (double)ceil_div(nparts, 4 * cs * wpr);
    // whole-row waves' issue cycles whatever cs (this form was never fit to the quarter waves' own: priced with
    // them, mxfp4 (32, 8192) took 32 one-wave parts for 8 _kv4 ones, 75.1 -> 79.9 us on the timing model)
    const double t_issue = rounds * (iters * (kHbmLatencyNs + mc.merge_iter_cycles / mc.clock_ghz) +
                                     (mc.merge_wave_cycles + extra_wave_cycles) / mc.clock_ghz);
    const double bytes = (double)total_rows * ((double)nparts * (kLat * partial_o_bytes + 16.0) + kLat * 2.0);
    const double bw = std::min(mc.hbm_bytes_per_ns * (double)cus / (double)mc.cus,
                               (double)std::min<int64_t>(cus, ms.grid) * mc.cu_bytes_per_ns);
    return kMergeLaunchNs + std::max(t_issue, bytes / bw);
  }
  const MergeRound r = merge_round(total_rows, nparts, cus, extra_wave_cycles, mc, partial_o_bytes, spread);
  const MergeTiming& mt = kMergeTiming;
  const double t_start = (mt.start_cycles + mt.start_wave_cycles / (double)r.simd_waves +
                          (double)r.fold_waves * mt.fold_cycles + (double)(r.iters - 1) * mt.iter_latency_cycles) /
                         mc.clock_ghz;
  const double t_round = t_start + std::max(r.issue_cycles / mc.clock_ghz, r.cu_bytes / r.cu_bytes_per_ns);
  const double t_hbm = r.total_bytes / (mc.hbm_bytes_per_ns * (double)cus / (double)mc.cus);
  return kMergeLaunchNs + std::max((double)r.rounds * t_round, t_hbm);
}

// Modelled time (ns) of a launch of the kernel costed by `kc`, in launch shape `v`, with `nparts` parts;
// `spread_merge`: its merge in spread_merge_shape (the KV-format kernels'), else merge_shape (a16w8's).
inline double kernel_plan_cost(const KernelCost& kc, int64_t batch, int64_t heads, int64_t q_len, int64_t len,
                               int64_t nparts, int64_t cus, Variant v, const Machine& mc, bool spread_merge = false) {
  const int64_t rows = q_len * heads, n_rt = ceil_div(rows, kRowsPerTile);
  const int64_t slots = cus * kSimdsPerCu;
  const int64_t waves = launch_waves(batch, n_rt, nparts, v);
  const bool ws = v == Variant::kWs;
  // workgroups of the launch (ws: one per 4 row tiles; else waves / workgroup_waves), whole rounds of them
  const int64_t workgroups =
      ws ? launch_grid(batch, n_rt, nparts, v) : ceil_div(waves, (int64_t)kc.workgroup_waves);
  const int64_t rounds = ceil_div(workgroups, cus * (int64_t)kc.cu_workgroups);
  const double extra_rowtiles = (double)(std::min<int64_t>(n_rt, kWavesPerBlock) - 1);
  const double tile_cycles = kc.tile_cycles + kc.rowtile_cycles * extra_rowtiles;
  // balanced split: every wave locates its part (a ws workgroup: wave 0 only, the others read it from LDS)
  const double balance = balance_split(batch, nparts) ? mc.balance_request_cycles * (double)batch : 0.0;
  const double part_cycles = kc.part_cycles + kc.part_rowtile_cycles * extra_rowtiles + balance;
  // 16-token tiles a wave is charged: the part's whole kernel tiles, or (_kv4) 4x a wave's run of them
  const int64_t kt = (int64_t)kc.tile_tokens, tpp = ceil_div(ceil_div(len, kt), nparts);
  const int64_t wave_tiles = kc.kv_split ? kKvSplitWaves * ceil_div(tpp, kKvSplitWaves) : tpp;
  const double part_tiles = (double)(wave_tiles * kt) / (double)kTileTokens;
  double t_compute = (double)rounds * (part_tiles * tile_cycles + part_cycles) / mc.clock_ghz + kPartLatencyNs +
                          (double)(rounds - 1) * mc.round_latency_ns;
  // bytes of a partial O element: the row's (ws: fp16 up to kHalfPartialsMaxParts parts, then fp32)
  const double o_bytes = ws && !ws_half_partials(nparts) ? 4.0 : kc.partial_o_bytes;
  const double partial =  // written
      nparts > 1 ? (double)(batch * rows * nparts) * (kLat * o_bytes + 16.0) : 0.0;
  if (ws && mc.ws_part_bytes_serial > 0) {  // a workgroup's Q (bf16) in, its partials out, per round
    const double wg_rows = (double)std::min<int64_t>(rows, (int64_t)kRowsPerTile * kWavesPerBlock);
    const double wg_bytes = wg_rows * (2.0 * kRowBytes + (nparts > 1 ? kLat * o_bytes + 16.0 : 0.0));
    t_compute += mc.ws_part_bytes_serial * (double)rounds * wg_bytes / mc.cu_bytes_per_ns;
  }
  const double busy_cus = std::min<double>((double)cus, (double)workgroups);
  const double bw = std::min(mc.hbm_bytes_per_ns * (double)cus / (double)mc.cus, busy_cus * mc.cu_bytes_per_ns);
  const double t_memory = ((double)batch * (double)len * kc.token_bytes + partial) / bw;
  double cost = std::max(t_compute, t_memory);
  if (nparts > 1) cost += merge_cost(batch * rows, nparts, cus, balance, mc, o_bytes, spread_merge);
  // the kernel's own launches before the decode (a8w8's Q quantisation): independent of nparts, they still
  // move the split: the 5% slack is of the call's whole time
  if (kc.call_launches > 0)
    cost += kc.call_launches * kMergeLaunchNs +
            (double)ceil_div((int64_t)(kc.call_row_cycles * (double)(batch * rows)), slots) / mc.clock_ghz;
  return cost;
}

// Modelled time (ns) of an a16w8 (ws kernel) launch with `nparts` parts. Its merge is spread over the CUs like
// the KV-format kernels' (seventh session: with merge_shape alone a small batch's merge ran on few workgroups --
// gfx950 (4, 1024), 22 parts, 64 rows: 32 workgroups, 6.7 us on the timing model; spread, 256: 5.2 us).
inline double plan_cost(int64_t batch, int64_t heads, int64_t q_len, int64_t len, int64_t nparts,
                        int64_t cus = kDefaultCus, const Machine& mc = kGfx942) {
  return kernel_plan_cost(kernel_cost(mc.arch, "ws"), batch, heads, q_len, len, nparts, cus, Variant::kWs, mc, true);
}

// A KV-format kernel's launch shape: "<format>_w1" is a wave per (request, part), else a 4-wave workgroup
// per (request, part, group of 4 row tiles) ("<format>_kv4": one row tile, so a 4-wave workgroup per part).
inline Variant format_launch_shape(const std::string& kernel) {
  return kernel.size() > 3 && kernel.compare(kernel.size() - 3, 3, "_w1") == 0 ? Variant::kWave : Variant::kShared;
}

// The parts of a KV-format kernel's launch (formats.py), by the same rule as plan()'s over that kernel's
// own row of kKernelCosts: the fewest parts (none empty, offsets 32-bit) within mc.format_split_slack of the
// modelled minimum. Returns (nparts, modelled ns). Throws std::invalid_argument for a kernel without a row.
inline std::pair<int64_t, double> plan_format_parts(int64_t batch, int64_t heads, int64_t q_len, int64_t len_hint,
                                                    int64_t cus, const Machine& mc, const std::string& kernel) {
  if (cus <= 0) cus = mc.cus;
  if (batch < 1 || heads < 1 || heads > kMaxHeads || q_len < 1)
    throw std::invalid_argument("mla planner: batch, heads (1..128) and q_len must be >= 1");
  const KernelCost& kc = kernel_cost(mc.arch, kernel);
  const Variant v = format_launch_shape(kernel);
  const int64_t len = len_hint > 0 ? len_hint : kDefaultLen;
  const int64_t tiles = std::max<int64_t>(1, ceil_div(len, (int64_t)kc.tile_tokens));  // the kernel's
  const int64_t max_parts = std::min<int64_t>(kMaxParts, tiles), total_rows = batch * q_len * heads;
  auto usable = [&](int64_t np) {
    return parts_all_busy(tiles, np) && (np == 1 || total_rows * np * kLat * 4 < (int64_t(1) << 32));
  };
  auto cost = [&](int64_t np) { return kernel_plan_cost(kc, batch, heads, q_len, len, np, cus, v, mc, true); };
  double min_cost = cost(1);
  for (int64_t np = 2; np <= max_parts; ++np)
    if (usable(np)) min_cost = std::min(min_cost, cost(np));
  for (int64_t np = 1; np <= max_parts; ++np)
    if (usable(np) && cost(np) <= min_cost * mc.format_split_slack) return {np, cost(np)};
  return {1, cost(1)};
}

// The launch configuration. Throws std::invalid_argument on shapes outside the kernel's domain.
// len_hint <= 0: no hint (kDefaultLen). Any batch size is served (more waves, more rounds).
// cus <= 0: the machine's full part.
inline Plan plan(int64_t batch, int64_t heads, int64_t q_len, int64_t len_hint = 0, int64_t cus = kDefaultCus,
                 const Machine& mc = kGfx942) {
  if (cus <= 0) cus = mc.cus;
  if (batch < 1) throw std::invalid_argument("mla planner: batch must be >= 1, got " + std::to_string(batch));
  if (heads < 1 || heads > kMaxHeads)
    throw std::invalid_argument("mla planner: heads must be in [1, 128], got " + std::to_string(heads));
  if (q_len < 1) throw std::invalid_argument("mla planner: q_len must be >= 1, got " + std::to_string(q_len));
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
  // Pass 1: the modelled minimum. Pass 2: the fewest parts whose cost is within the machine's split_slack
  // of it (a split must buy more than the model's own uncertainty, else it only adds work; gfx942's 3%:
  // see kGfx942).
  auto addressable = [&](int64_t np) { return np == 1 || total_rows * np * kLat * 4 < limit; };
  auto candidate = [&](int64_t np) { return parts_all_busy(tiles, np); };
  auto cost = [&](int64_t np) { return plan_cost(batch, heads, q_len, p.len_used, np, cus, mc); };
  double min_cost = cost(1);
  for (int64_t np = 2; np <= max_parts && addressable(np); ++np)
    if (candidate(np)) min_cost = std::min(min_cost, cost(np));
  int64_t best = 0;
  double best_cost = 0;
  for (int64_t np = 1; np <= max_parts && addressable(np) && best == 0; ++np)
    if (candidate(np) && cost(np) <= min_cost * mc.split_slack) {
      best = np;
      best_cost = cost(np);
    }
  const Variant best_v = Variant::kWs;
  p.nparts = best;
  p.variant = variant_name(best_v);
  p.cost_ns = best_cost;
  p.waves = launch_waves(batch, p.n_rt, p.nparts, best_v);
  p.grid = launch_grid(batch, p.n_rt, p.nparts, best_v);
  p.block = best_v == Variant::kWs ? 64 * kWsWaves : kBlockThreads;
  if (p.nparts > 1) {
    const MergeShape ms = spread_merge_shape(total_rows, p.nparts, cus, mc.merge_one_wave_quarters);  // as priced
    p.merge_wpr = ms.wpr;
    p.balanced = balance_split(batch, p.nparts);
    p.merge_cs = ms.cs;
    p.merge_grid = ms.grid;
    p.merge_waves = ms.waves;
    // the ws kernel's partial O is fp16: two per float of the workspace
    p.ws_o_floats = total_rows * p.nparts * kLat / (best_v == Variant::kWs && ws_half_partials(p.nparts) ? 2 : 1);
    p.ws_ml_floats = total_rows * p.nparts * 4 + batch;  // + the balanced split's request ends (the merge's)
  }
  if (total_rows * kLat * 2 >= limit || p.grid >= (int64_t(1) << 31))
    throw std::invalid_argument("mla planner: problem too large for 32-bit buffer offsets (B*q_len*H = " +
                                std::to_string(total_rows) + ")");
  return p;
}

}  // namespace moonmath::mla
