// Device-side planner of VarlenPlan (issue 13): writes the work items of a packed-varlen plan from
// cu_seqlens that live on the device, so planning needs no host read (graph capturable; a replay
// follows the current lengths). One workgroup of 256 threads; the host wrote the AttnFwdArgs header
// and sized the grid for n_cap items (an upper bound from B, max_seqlen_q and total_q).
//
// Sequences are taken 256 at a time: thread t clamps sequence b's offsets into [0, total] (lengths
// <= max_seqlen; a non-monotone pair gives length 0), counts its tiles of kTileRows rows, and an
// exclusive scan in LDS gives each sequence its first item. Items are written in sequence order,
// unsplit (kv range [0, tile_kv_end)), exactly the tiles the host planner makes for the same lengths,
// so the outputs match a host plan that does not split. Items past the last tile, up to n_cap, are
// empty (q_len = 0: the forward kernel writes nothing for them); tiles past n_cap (only possible when
// the device lengths break the bounds the caller promised) are dropped.
#include "moonmath/all.hpp"
#include "shared/attention_fwd_plan.h"

namespace {
constexpr int32_t kThreads = 256;

MM_DEVICE int32_t clamp(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : x > hi ? hi : x; }
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) void attn_fwd_plan_varlen(attn950::AttnFwdArgs* __restrict__ plan,
                                                          const int32_t* cu_q, const int32_t* cu_k, int32_t batch,
                                                          int32_t n_cap, int32_t total_q, int32_t total_k,
                                                          int32_t max_q, int32_t max_k, int32_t causal) {
  using namespace attn950;
  MM_LDS int32_t scan[2][kThreads];
  AttnWorkItem* items = reinterpret_cast<AttnWorkItem*>(plan + 1);
  const int32_t t = (int32_t)mm::thread_id_x();
  int32_t base = 0;   // items written by the previous chunks (uniform)
  for (int32_t b0 = 0; b0 < batch; b0 += kThreads) {
    const int32_t b = b0 + t;
    int32_t q0 = 0, ql = 0, k0 = 0, kl = 0, tiles = 0;
    if (b < batch) {
      q0 = clamp(cu_q[b], 0, total_q);
      ql = clamp(clamp(cu_q[b + 1], 0, total_q) - q0, 0, max_q);
      k0 = clamp(cu_k[b], 0, total_k);
      kl = clamp(clamp(cu_k[b + 1], 0, total_k) - k0, 0, max_k);
      tiles = (ql + kTileRows - 1) / kTileRows;
    }
    // Inclusive Hillis-Steele scan of the tile counts (ping-pong buffers, one barrier per step).
    int32_t cur = 0;
    scan[0][t] = tiles;
    mm::block_sync();
    for (int32_t d = 1; d < kThreads; d <<= 1) {
      const int32_t v = scan[cur][t] + (t >= d ? scan[cur][t - d] : 0);
      scan[cur ^ 1][t] = v;
      cur ^= 1;
      mm::block_sync();
    }
    const int32_t first = base + scan[cur][t] - tiles;
    const int32_t chunk_total = scan[cur][kThreads - 1];
    for (int32_t r = 0; r < tiles; ++r) {
      const int32_t idx = first + r;
      if (idx >= n_cap) break;
      const int32_t row0 = r * kTileRows;
      int32_t kv_end = kl;
      if (causal) {   // tile_kv_end of the host planner: keys up to the tile's last row's diagonal
        const int32_t last = (row0 + kTileRows < ql ? row0 + kTileRows : ql) - 1;
        const int64_t e = (int64_t)last + 1 + kl - ql;
        kv_end = e < 0 ? 0 : e > kl ? kl : (int32_t)e;
      }
      items[idx] = AttnWorkItem{0, q0, ql, k0, kl, row0, 0, kv_end, -1, 0, {0, 0}};
    }
    base += chunk_total;
    mm::block_sync();   // scan[] is rewritten by the next chunk
  }
  for (int32_t idx = (base < n_cap ? base : n_cap) + t; idx < n_cap; idx += kThreads)
    items[idx] = AttnWorkItem{0, 0, 0, 0, 0, 0, 0, 0, -1, 0, {0, 0}};
}
