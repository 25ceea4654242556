// The argument block of the gfx950 attention forward: written by the host planner (csrc/host, pure
// C++), read by the kernels (csrc/device/gfx950). One definition for both sides, so a field cannot
// drift between them. The block lives in one small device buffer ("the plan"):
//
//   [AttnFwdArgs][AttnWorkItem x n_items][AttnMergeItem x n_merge]
//
// The forward kernel runs grid n_items x heads_q: workgroup x heads_q + h computes q head h of work item x (an
// item's heads dispatch together, items in plan order: heaviest first).
// The merge kernel runs grid (n_merge, heads_q) and combines the fp32 partials of split items.
// A work item is a tile of kTileRows query rows of one sequence over one key range; everything the
// pipeline needs about *where* its rows and keys live is in the item and the strides, so a new way of
// cutting work (paged K/V, a device-side planner) writes items, it does not copy the kernel.
#pragma once

#ifdef __HIP_DEVICE_COMPILE__
#include "moonmath/prelude.hpp"
#else
#include <cstdint>
#endif

namespace attn950 {

constexpr int32_t kWaves = 8;             // waves per workgroup (512 threads)
constexpr int32_t kRowTilesPerWave = 2;   // 16-row MFMA tiles per wave
constexpr int32_t kTileRows = 16 * kRowTilesPerWave * kWaves;  // query rows per work item (256)
constexpr int32_t kKvBlock = 64;          // keys per pipeline step (one LDS stage)

constexpr uint32_t kFlagCausal = 1u;      // bottom-right aligned causal mask
constexpr uint32_t kFlagLse = 2u;         // write the natural-log LSE
constexpr uint32_t kFlagNegScale = 4u;    // softmax_scale < 0: the kernel negates Q (exact) and uses |scale|
constexpr uint32_t kFlagSoftcap = 8u;     // logits soft-capped (the *_softcap kernels; scale_log2 = cap log2 e)

// Strides are in elements (bf16 for q/k/v/out, fp32 for lse); 64-bit so that batch strides of large
// tensors fit. Token strides are at most 2^22 (checked in Python), so one tile's rows span < 2^32 bytes.
struct AttnFwdArgs {
  int64_t q_batch, q_token, q_head;
  int64_t k_batch, k_token, k_head;
  int64_t v_batch, v_token, v_head;
  int64_t o_batch, o_token, o_head;
  int64_t lse_batch, lse_head;            // lse[b * lse_batch + h * lse_head + token]
  int32_t heads_q, group;                 // group = heads_q / heads_kv (q head h reads kv head h / group)
  int32_t n_items, n_merge;
  int32_t n_slots;                        // workspace slots (one per split part)
  uint32_t flags;
  float scale_log2;                       // |softmax_scale| * log2(e), at least FLT_MIN (see the planner);
                                          // with a soft-cap: cap * log2(e), the factor of tanh
  float softcap_pre2;                     // soft-cap only: 2 |softmax_scale| log2(e) / cap (0 otherwise)
  int32_t window_left, window_right;      // sliding window (the *_window kernels): row i (diagonal key
                                          // d = i + k_len - q_len) sees keys [d - left, d + right]; -1 = unbounded
};

// One tile of query rows [q_row0, q_row0 + kTileRows) of one sequence against keys [kv_begin, kv_end)
// of that sequence. Row r of the sequence is token q_tok0 + r of q/out (k/v likewise). batch indexes
// the batch strides (0 for packed varlen, where q_tok0/k_tok0 carry the offsets).
struct AttnWorkItem {
  int32_t batch;
  int32_t q_tok0, q_len;                  // the sequence's first token and length (q, out, lse)
  int32_t k_tok0, k_len;                  // the sequence's first token and length (k, v)
  int32_t q_row0;                         // first row of the tile within the sequence
  int32_t kv_begin, kv_end;               // key range (a multiple of kKvBlock apart from kv_end)
  int32_t slot;                           // -1: final (write out/lse); else the workspace slot of a part
  int32_t sink_part;                      // sinks (the *_sinks kernels): 1 = the part whose (m, l) takes the sink
                                          // term (the first of a split; a final item always does)
  int32_t pad[2];
};

// The parts of one split tile: slots [slot0, slot0 + n_parts) in ascending key order.
struct AttnMergeItem {
  int32_t batch, q_tok0, q_len, q_row0;
  int32_t slot0, n_parts;
  int32_t pad[2];
};

static_assert(sizeof(AttnFwdArgs) == 14 * 8 + 10 * 4, "AttnFwdArgs layout");
static_assert(sizeof(AttnWorkItem) == 48, "AttnWorkItem layout");
static_assert(sizeof(AttnMergeItem) == 32, "AttnMergeItem layout");

// ---------------------------------------------------------------------------------------------
// The planning rules: which keys a tile reads and how a tile is split over idle CUs. One definition
// for the host planner (csrc/host/attention_planner.hpp) and the device planning kernel
// (csrc/device/gfx950/attention_plan.hip), so a device-written plan is the host plan, item for item.
// constexpr functions are host and device functions alike in clang's HIP mode.
// ---------------------------------------------------------------------------------------------

// The split cost model's inputs: the machine (CU count) and the smallest / most parts worth a merge.
struct AttnSplitPolicy {
  int32_t num_cus = 256;         // MI355X
  int32_t min_part_blocks = 4;   // keys per part >= 4 * kKvBlock
  int32_t max_parts = 16;
};

constexpr int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

struct AttnKeyRange {
  int32_t begin, end;
};

// Keys of the tile of rows [row0, row0 + kTileRows) of a (q_len, k_len) sequence: [0, k_len); causal
// (bottom-right aligned) ends after the tile's last row's diagonal key d = row + k_len - q_len; a
// sliding window (left/right, -1 = unbounded) keeps the blocks of [first row's d - left (rounded down
// to the kKvBlock grid), last row's d + right]. An empty range is begin == end.
constexpr AttnKeyRange tile_key_range(int32_t q_len, int32_t k_len, int32_t row0, bool causal, int32_t window_left,
                                      int32_t window_right) {
  const int64_t off = (int64_t)k_len - q_len;
  const int64_t last = ((int64_t)row0 + kTileRows < q_len ? (int64_t)row0 + kTileRows : q_len) - 1;
  int64_t e = k_len;
  if (causal) e = last + 1 + off < e ? last + 1 + off : e;
  if (window_right >= 0) e = last + off + window_right + 1 < e ? last + off + window_right + 1 : e;
  if (e < 0) e = 0;
  int64_t b = 0;
  if (window_left >= 0) {
    const int64_t lo = (int64_t)row0 + off - window_left;
    b = lo <= 0 ? 0 : (lo / kKvBlock * kKvBlock < k_len ? lo / kKvBlock * kKvBlock : k_len);
  }
  if (b > e) b = e;
  return AttnKeyRange{(int32_t)b, (int32_t)e};
}

constexpr int32_t key_blocks(AttnKeyRange r) { return ceil_div(r.end - r.begin, kKvBlock); }

// Parts per tile: when ctas = tiles x heads_q workgroups leave CUs idle, up to num_cus / ctas (at most
// max_parts); a full machine splits nothing.
constexpr int32_t split_ways(int64_t ctas, const AttnSplitPolicy& p) {
  if (ctas == 0 || ctas >= p.num_cus) return 1;
  const int64_t g = p.num_cus / ctas;
  return g < p.max_parts ? (int32_t)g : p.max_parts;
}

// The split of one tile of `blocks` key blocks: parts of equal block counts (the last may be shorter),
// each at least min_part_blocks; parts == 1 is no split.
struct AttnTileSplit {
  int32_t parts, blocks_per_part;
};
constexpr AttnTileSplit split_tile(int32_t blocks, int32_t ways, const AttnSplitPolicy& p) {
  int32_t parts = blocks / p.min_part_blocks < ways ? blocks / p.min_part_blocks : ways;
  if (parts <= 1) return AttnTileSplit{1, blocks};
  const int32_t per = ceil_div(blocks, parts);
  parts = ceil_div(blocks, per);
  return parts > 1 ? AttnTileSplit{parts, per} : AttnTileSplit{1, blocks};
}

// Keys of part i of a split tile (ascending key order, on the kKvBlock grid from r.begin).
constexpr AttnKeyRange part_key_range(AttnKeyRange r, AttnTileSplit s, int32_t i) {
  const int64_t b = (int64_t)r.begin + (int64_t)i * s.blocks_per_part * kKvBlock;
  const int64_t e = b + (int64_t)s.blocks_per_part * kKvBlock;
  return AttnKeyRange{(int32_t)b, e < r.end ? (int32_t)e : r.end};
}

// ---------------------------------------------------------------------------------------------
// A device-written plan (VarlenPlan with device cu_seqlens): the host sizes one buffer for any lengths
// within the caller's promise (B, max_seqlen_q/_k, total_q) and the planning kernel writes the plan in it:
//
//   [AttnFwdArgs][AttnWorkItem x caps.items][AttnMergeItem x caps.merges][AttnPlanCounts]
//   [AttnPlanTile x caps.tiles][int32 x 2 x caps.tiles]   (the last two: the planning kernel's scratch)
//
// The host writes the header at run time with n_items = caps.items, n_merge = caps.merges and
// n_slots = caps.slots (the grids and the workspace); items and merges past the counts are empty
// (q_len = 0: the kernels write nothing for them).
// ---------------------------------------------------------------------------------------------

struct AttnPlanCaps {
  int32_t tiles, items, merges, slots;
};

// Bounds of any plan of B sequences of q length <= max_q (sum <= total_q) and k length <= max_k:
// tiles <= min(B ceil(max_q / kTileRows), total_q / kTileRows + B). A split needs ways >= 2, i.e.
// tiles x heads_q <= num_cus / 2, and a tile of >= 2 min_part_blocks blocks; then every tile's parts
// fit in num_cus / heads_q workgroups, so items and slots <= min(tiles max_parts, num_cus / heads_q) and
// merges <= min(tiles, num_cus / (2 heads_q)).
constexpr AttnPlanCaps device_plan_caps(int32_t batch, int32_t max_q, int32_t total_q, int32_t max_k,
                                        int32_t heads_q, const AttnSplitPolicy& p) {
  const int64_t by_len = (int64_t)batch * (((int64_t)max_q + kTileRows - 1) / kTileRows);
  const int64_t by_total = (int64_t)total_q / kTileRows + batch;
  const int64_t tiles = by_len < by_total ? by_len : by_total;
  const int64_t per_head = p.num_cus / heads_q;
  const bool can_split = p.max_parts >= 2 && per_head >= 2 && tiles > 0 &&
                         ((int64_t)max_k + kKvBlock - 1) / kKvBlock >= 2 * (int64_t)p.min_part_blocks;
  if (!can_split) return AttnPlanCaps{(int32_t)tiles, (int32_t)tiles, 0, 0};
  const int64_t parts = tiles * p.max_parts < per_head ? tiles * p.max_parts : per_head;
  const int64_t merges = tiles < per_head / 2 ? tiles : per_head / 2;
  return AttnPlanCaps{(int32_t)tiles, (int32_t)(tiles > parts ? tiles : parts), (int32_t)merges, (int32_t)parts};
}

// What the planning kernel wrote (the tiles it kept, and the plan's real item / merge / slot counts).
struct AttnPlanCounts {
  int32_t tiles, items, merges, slots;
};

// One tile in the planning kernel's scratch (sequence order; the sort permutes indices into it).
struct AttnPlanTile {
  int32_t q_tok0, q_len, k_tok0, k_len, q_row0, kv_begin, kv_end, blocks;
};

static_assert(sizeof(AttnPlanCounts) == 16 && sizeof(AttnPlanTile) == 32, "device plan layout");

constexpr int64_t device_plan_merges_offset(const AttnPlanCaps& c) {
  return (int64_t)sizeof(AttnFwdArgs) + (int64_t)c.items * sizeof(AttnWorkItem);
}
constexpr int64_t device_plan_counts_offset(const AttnPlanCaps& c) {
  return device_plan_merges_offset(c) + (int64_t)c.merges * sizeof(AttnMergeItem);
}
constexpr int64_t device_plan_bytes(const AttnPlanCaps& c) {
  return device_plan_counts_offset(c) + (int64_t)sizeof(AttnPlanCounts) +
         (int64_t)c.tiles * (sizeof(AttnPlanTile) + 2 * sizeof(int32_t));
}

}  // namespace attn950
