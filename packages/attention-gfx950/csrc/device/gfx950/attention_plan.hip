// Device-side planner of VarlenPlan (issue 13): writes the plan of packed-varlen lengths that live on
// the device, and it is the host planner's plan item for item (both follow the shared rules of
// csrc/shared/attention_fwd_plan.h: tile_key_range, split_ways, split_tile), so planning needs no host
// read (graph capturable; a replay follows the current lengths) and the outputs are the host plan's
// bit for bit, KV splits included. The buffer layout and its capacities (device_plan_caps) are the
// shared header's; the host writes the AttnFwdArgs header at run time.
//
// One workgroup of 256 threads (4 waves), four stages, each a loop over chunks of 256 (sequences or
// tiles) with barriers in uniform control flow:
//   1. tiles  thread t takes sequence b: offsets clamped into [0, total], lengths into [0, max_seqlen]
//             (a non-monotone pair gives length 0); an exclusive scan of tile counts gives its first
//             tile; its tiles (key ranges and block counts) go to the scratch in sequence order. Tiles
//             past caps.tiles (only when the device lengths break the caller's promise) are dropped.
//   2. sort   the tile order, stably by key blocks descending (the host's std::stable_sort): an LSD
//             radix sort of (max_blocks - blocks), 8-bit digits, 256 bins (one per thread). A digit's
//             rank within a chunk: lanes of equal digit by 8 ballots, earlier waves' counts from LDS.
//   3. split  ways = split_ways(tiles x heads_q); per tile in sorted order split_tile's parts; exclusive
//             scans of (items, slots, merges) give each tile its item, slot and merge positions.
//   4. write  its items (one final item, or the parts with their slots and sink_part) and merge item;
//             then empty items and merges up to the capacities, and the counts (AttnPlanCounts).
// LDS: two 256-entry scan rows, 4 x 256 per-wave digit counts, 256 bin starts (7 KiB).
#include "moonmath/all.hpp"
#include "shared/attention_fwd_plan.h"

namespace {
using namespace attn950;
constexpr int32_t kThreads = 256;
constexpr int32_t kPlanWaves = kThreads / (int32_t)mm::kWaveSize;
constexpr int32_t kDigitBits = 8;

MM_DEVICE int32_t clamp(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : x > hi ? hi : x; }

// Exclusive prefix sum of v over the workgroup; total = the sum of all. Hillis-Steele over a ping-pong
// pair of LDS rows, one barrier per step, and one at the end so that the rows can be reused at once.
MM_DEVICE int32_t block_exclusive_scan(int32_t v, int32_t (*rows)[kThreads], int32_t& total) {
  const int32_t t = (int32_t)mm::thread_id_x();
  int32_t cur = 0;
  rows[0][t] = v;
  mm::block_sync();
  for (int32_t d = 1; d < kThreads; d <<= 1) {
    rows[cur ^ 1][t] = rows[cur][t] + (t >= d ? rows[cur][t - d] : 0);
    cur ^= 1;
    mm::block_sync();
  }
  const int32_t inclusive = rows[cur][t];
  total = rows[cur][kThreads - 1];
  mm::block_sync();
  return inclusive - v;
}

// Rank of this thread's digit among the lower threads of the workgroup with the same digit (valid
// threads only); counts[w][digit] gets wave w's count of each digit. The caller folds and clears the
// counts (after a barrier) before the next chunk.
MM_DEVICE int32_t digit_rank(int32_t digit, bool valid, int32_t (*counts)[kThreads]) {
  const uint32_t wave = mm::wave_id();
  uint64_t same = mm::ballot(valid);
  for (int32_t bit = 0; bit < kDigitBits; ++bit) {
    const bool on = ((digit >> bit) & 1) != 0;
    const uint64_t set = mm::ballot(valid && on);
    same &= on ? set : ~set;
  }
  const int32_t below = (int32_t)mm::lanes_below(same);
  if (valid && below == 0) counts[wave][digit] = __builtin_popcountll(same);
  mm::block_sync();
  int32_t rank = below;
  if (valid)
    for (uint32_t w = 0; w < wave; ++w) rank += counts[w][digit];
  return rank;
}

// Thread t owns bin t: add the chunk's counts of digit t to acc and clear them for the next chunk.
MM_DEVICE int32_t fold_counts(int32_t (*counts)[kThreads], int32_t acc) {
  const int32_t t = (int32_t)mm::thread_id_x();
  mm::block_sync();   // every thread has read the counts (digit_rank)
  for (int32_t w = 0; w < kPlanWaves; ++w) {
    acc += counts[w][t];
    counts[w][t] = 0;
  }
  mm::block_sync();
  return acc;
}

MM_DEVICE int32_t sort_digit(const AttnPlanTile* tiles, int32_t index, int32_t max_blocks, int32_t shift) {
  return ((max_blocks - tiles[index].blocks) >> shift) & ((1 << kDigitBits) - 1);
}

}  // namespace

// cu_q, cu_k: int32 [batch + 1] on the device. caps: device_plan_caps of (batch, max_q, total_q, max_k,
// heads_q, policy), as the host sized the buffer. window: -1 = unbounded (causal: right = 0).
MM_KERNEL MM_LAUNCH_BOUNDS(256) void attn_fwd_plan_varlen(
    AttnFwdArgs* __restrict__ plan, const int32_t* cu_q, const int32_t* cu_k, int32_t batch, int32_t cap_tiles,
    int32_t cap_items, int32_t cap_merges, int32_t total_q, int32_t total_k, int32_t max_q, int32_t max_k,
    int32_t causal, int32_t window_left, int32_t window_right, int32_t heads_q, int32_t num_cus,
    int32_t min_part_blocks, int32_t max_parts) {
  MM_LDS int32_t scan[2][kThreads];
  MM_LDS int32_t counts[kPlanWaves][kThreads];
  MM_LDS int32_t bin_start[kThreads];
  const AttnPlanCaps caps{cap_tiles, cap_items, cap_merges, 0};
  const AttnSplitPolicy policy{num_cus, min_part_blocks, max_parts};
  uint8_t* const base = reinterpret_cast<uint8_t*>(plan);
  AttnWorkItem* const items = reinterpret_cast<AttnWorkItem*>(plan + 1);
  AttnMergeItem* const merges = reinterpret_cast<AttnMergeItem*>(base + device_plan_merges_offset(caps));
  AttnPlanCounts* const written = reinterpret_cast<AttnPlanCounts*>(base + device_plan_counts_offset(caps));
  AttnPlanTile* const tiles = reinterpret_cast<AttnPlanTile*>(written + 1);
  int32_t* const order[2] = {reinterpret_cast<int32_t*>(tiles + cap_tiles),
                             reinterpret_cast<int32_t*>(tiles + cap_tiles) + cap_tiles};
  const int32_t t = (int32_t)mm::thread_id_x();
  for (int32_t w = 0; w < kPlanWaves; ++w) counts[w][t] = 0;

  // 1. tiles, in sequence order.
  int32_t n_tiles = 0;   // uniform: tiles of the chunks so far
  for (int32_t b0 = 0; b0 < batch; b0 += kThreads) {
    const int32_t b = b0 + t;
    int32_t q0 = 0, ql = 0, k0 = 0, kl = 0, n = 0;
    if (b < batch) {
      q0 = clamp(cu_q[b], 0, total_q);
      ql = clamp(clamp(cu_q[b + 1], 0, total_q) - q0, 0, max_q);
      k0 = clamp(cu_k[b], 0, total_k);
      kl = clamp(clamp(cu_k[b + 1], 0, total_k) - k0, 0, max_k);
      n = ceil_div(ql, kTileRows);
    }
    int32_t chunk = 0;
    const int32_t first = n_tiles + block_exclusive_scan(n, scan, chunk);
    for (int32_t r = 0; r < n && first + r < cap_tiles; ++r) {
      const int32_t row0 = r * kTileRows;
      const AttnKeyRange keys = tile_key_range(ql, kl, row0, causal != 0, window_left, window_right);
      tiles[first + r] = AttnPlanTile{q0, ql, k0, kl, row0, keys.begin, keys.end, key_blocks(keys)};
      order[0][first + r] = first + r;
    }
    n_tiles += chunk;
  }
  n_tiles = n_tiles < cap_tiles ? n_tiles : cap_tiles;
  mm::block_sync();   // the scratch tiles are visible to every wave

  // 2. stable sort by blocks, descending: LSD passes over the bits of max_blocks - blocks.
  const int32_t max_blocks = ceil_div(max_k, kKvBlock);
  int32_t src = 0;
  for (int32_t shift = 0; shift < 31 && (max_blocks >> shift) != 0; shift += kDigitBits) {
    int32_t bin_total = 0;
    for (int32_t c0 = 0; c0 < n_tiles; c0 += kThreads) {   // histogram
      const bool valid = c0 + t < n_tiles;
      digit_rank(valid ? sort_digit(tiles, order[src][c0 + t], max_blocks, shift) : 0, valid, counts);
      bin_total = fold_counts(counts, bin_total);
    }
    int32_t unused = 0;
    bin_start[t] = block_exclusive_scan(bin_total, scan, unused);
    mm::block_sync();
    for (int32_t c0 = 0; c0 < n_tiles; c0 += kThreads) {   // stable scatter
      const bool valid = c0 + t < n_tiles;
      const int32_t index = valid ? order[src][c0 + t] : 0;
      const int32_t digit = valid ? sort_digit(tiles, index, max_blocks, shift) : 0;
      const int32_t rank = digit_rank(digit, valid, counts);
      if (valid) order[src ^ 1][bin_start[digit] + rank] = index;
      bin_start[t] = fold_counts(counts, bin_start[t]);
    }
    src ^= 1;
    mm::block_sync();   // the new order is visible to every wave
  }

  // 3. and 4. split and write, in sorted order.
  const int32_t ways = split_ways((int64_t)n_tiles * heads_q, policy);
  int32_t n_items = 0, n_slots = 0, n_merges = 0;   // uniform: written by the chunks so far
  for (int32_t c0 = 0; c0 < n_tiles; c0 += kThreads) {
    const bool valid = c0 + t < n_tiles;
    AttnPlanTile tile{};
    AttnTileSplit split{0, 0};
    if (valid) {
      tile = tiles[order[src][c0 + t]];
      split = split_tile(tile.blocks, ways, policy);
    }
    const bool is_split = split.parts > 1;
    int32_t chunk_items = 0, chunk_slots = 0, chunk_merges = 0;
    const int32_t item = n_items + block_exclusive_scan(split.parts, scan, chunk_items);
    const int32_t slot = n_slots + block_exclusive_scan(is_split ? split.parts : 0, scan, chunk_slots);
    const int32_t merge = n_merges + block_exclusive_scan(is_split ? 1 : 0, scan, chunk_merges);
    // The capacities bound every plan of at most cap_tiles tiles (device_plan_caps); the guards only
    // keep a broken promise from writing past the buffer.
    if (valid && !is_split && item < cap_items) {
      items[item] = AttnWorkItem{0, tile.q_tok0, tile.q_len, tile.k_tok0, tile.k_len, tile.q_row0, tile.kv_begin,
                                 tile.kv_end, -1, 0, {0, 0}};
    } else if (valid && is_split && merge < cap_merges && item + split.parts <= cap_items) {
      merges[merge] = AttnMergeItem{0, tile.q_tok0, tile.q_len, tile.q_row0, slot, split.parts, {0, 0}};
      const AttnKeyRange keys{tile.kv_begin, tile.kv_end};
      for (int32_t i = 0; i < split.parts; ++i) {
        const AttnKeyRange part = part_key_range(keys, split, i);
        items[item + i] = AttnWorkItem{0, tile.q_tok0, tile.q_len, tile.k_tok0, tile.k_len, tile.q_row0, part.begin,
                                       part.end, slot + i, i == 0, {0, 0}};
      }
    }
    n_items += chunk_items;
    n_slots += chunk_slots;
    n_merges += chunk_merges;
  }
  for (int32_t i = (n_items < cap_items ? n_items : cap_items) + t; i < cap_items; i += kThreads)
    items[i] = AttnWorkItem{0, 0, 0, 0, 0, 0, 0, 0, -1, 0, {0, 0}};
  for (int32_t i = (n_merges < cap_merges ? n_merges : cap_merges) + t; i < cap_merges; i += kThreads)
    merges[i] = AttnMergeItem{0, 0, 0, 0, 0, 0, {0, 0}};
  if (t == 0) *written = AttnPlanCounts{n_tiles, n_items, n_merges, n_slots};
}
