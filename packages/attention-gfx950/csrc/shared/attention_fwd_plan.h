// The argument block of the gfx950 attention forward: written by the host planner (csrc/host, pure
// C++), read by the kernels (csrc/device/gfx950). One definition for both sides, so a field cannot
// drift between them. The block lives in one small device buffer ("the plan"):
//
//   [AttnFwdArgs][AttnWorkItem x n_items][AttnMergeItem x n_merge]
//
// The forward kernel runs grid (n_items, heads_q): workgroup (x, h) computes q head h of work item x.
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

}  // namespace attn950
