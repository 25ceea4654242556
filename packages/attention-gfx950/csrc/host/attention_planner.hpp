// Host planner of the gfx950 attention forward (pure C++17, no HIP types): turns sequences into the
// work items of csrc/shared/attention_fwd_plan.h and decides the split of KV across CUs.
//
// The rules are the shared header's (tile_key_range, split_ways, split_tile), which the device
// planning kernel (csrc/device/gfx950/attention_plan.hip) calls too: each sequence is cut into tiles of
// kTileRows query rows with their key ranges (causal, window); when tiles x heads_q workgroups leave
// CUs idle (fewer than num_cus), each tile's key blocks are cut into up to
// g = min(max_parts, num_cus / (tiles x heads_q)) parts of at least min_part_blocks blocks of kKvBlock
// keys (equal block counts, ascending key order); a split tile's parts write fp32 partials to
// workspace slots and one merge item combines them. The plan depends on the lengths, heads and
// options only, so the same inputs always give the same plan (determinism).
// Items are ordered heaviest first (most key blocks; ties in sequence order), so the longest causal
// tiles start first; slots and merge items follow that order.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "shared/attention_fwd_plan.h"

namespace attn950 {

struct Sequence {
  int32_t batch, q_tok0, q_len, k_tok0, k_len;
};

using PlanOptions = AttnSplitPolicy;   // num_cus, min_part_blocks, max_parts (the shared header)

struct FwdPlan {
  AttnFwdArgs args{};
  std::vector<AttnWorkItem> items;
  std::vector<AttnMergeItem> merges;

  int32_t n_parts_max() const {
    int32_t n = 1;
    for (const auto& m : merges) n = std::max(n, m.n_parts);
    return n;
  }
  // The plan buffer the kernels read: [args][items][merges].
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> b(sizeof(AttnFwdArgs) + items.size() * sizeof(AttnWorkItem) +
                           merges.size() * sizeof(AttnMergeItem));
    std::memcpy(b.data(), &args, sizeof(args));
    if (!items.empty()) std::memcpy(b.data() + sizeof(args), items.data(), items.size() * sizeof(AttnWorkItem));
    if (!merges.empty())
      std::memcpy(b.data() + sizeof(args) + items.size() * sizeof(AttnWorkItem), merges.data(),
                  merges.size() * sizeof(AttnMergeItem));
    return b;
  }
};

// Key range end of the tile starting at row q_row0, no window (see the shared header's tile_key_range).
inline int32_t tile_kv_end(const Sequence& s, int32_t q_row0, bool causal) {
  return tile_key_range(s.q_len, s.k_len, q_row0, causal, -1, -1).end;
}

// strides: q(batch, token, head), k(...), v(...), o(...), lse(batch, head): 14 element strides.
inline FwdPlan plan_forward(const std::vector<Sequence>& seqs, int32_t heads_q, int32_t heads_kv, bool causal,
                            bool lse, float scale_log2, const std::vector<int64_t>& strides,
                            const PlanOptions& opt = PlanOptions(), float softcap = 0.f, int32_t window_left = -1,
                            int32_t window_right = -1) {
  if (heads_q < 1 || heads_kv < 1 || heads_q % heads_kv)
    throw std::invalid_argument("heads_q must be a positive multiple of heads_kv; got " + std::to_string(heads_q) +
                                " and " + std::to_string(heads_kv));
  if (strides.size() != 14) throw std::invalid_argument("strides must hold 14 values; got " + std::to_string(strides.size()));
  if (!(softcap >= 0.f) || std::isinf(softcap))
    throw std::invalid_argument("softcap must be 0 (off) or a finite positive cap; got " + std::to_string(softcap));
  if (window_left < -1 || window_right < -1)
    throw std::invalid_argument("window_size entries must be >= -1 (-1 = unbounded)");
  if (opt.num_cus < 1 || opt.min_part_blocks < 1 || opt.max_parts < 1)
    throw std::invalid_argument("num_cus, min_part_blocks and max_parts must be >= 1");
  for (const auto& s : seqs)
    if (s.q_len < 0 || s.k_len < 0 || s.q_tok0 < 0 || s.k_tok0 < 0 || s.batch < 0)
      throw std::invalid_argument("sequence lengths and offsets must be >= 0");

  FwdPlan p;
  AttnFwdArgs& a = p.args;
  int64_t* f = &a.q_batch;
  for (int i = 0; i < 14; ++i) f[i] = strides[i];
  a.heads_q = heads_q;
  a.group = heads_q / heads_kv;
  // The kernel's logits are fma(s, c, -m) with c > 0: a negative scale becomes a negated Q (exact in
  // bf16) and |scale|; a zero scale becomes FLT_MIN, whose products with any finite bf16 score are
  // below 2^-24, so exp2 of them is exactly 1 as for 0 (and -inf * c stays -inf for masked keys).
  a.flags = (causal ? kFlagCausal : 0u) | (lse ? kFlagLse : 0u) | (scale_log2 < 0.f ? kFlagNegScale : 0u);
  a.scale_log2 = std::max(std::fabs(scale_log2), std::numeric_limits<float>::min());
  // Soft-cap (the *_softcap kernels): logits cap tanh(scale s / cap); the kernel computes
  // t = tanh(|scale| s / cap) from pre2 and scales t by c = cap log2(e) (sign via the negated Q as above).
  a.softcap_pre2 = 0.f;
  if (softcap > 0.f) {
    a.flags |= kFlagSoftcap;
    a.softcap_pre2 = 2.f * a.scale_log2 / softcap;
    a.scale_log2 = softcap * 1.44269504088896340736f;
  }

  a.window_left = window_left;
  a.window_right = window_right;
  struct Tile { Sequence s; int32_t q_row0; AttnKeyRange keys; int32_t blocks; };
  std::vector<Tile> tiles;
  for (const auto& s : seqs)
    for (int32_t r = 0; r < s.q_len; r += kTileRows) {
      const AttnKeyRange keys = tile_key_range(s.q_len, s.k_len, r, causal, window_left, window_right);
      tiles.push_back({s, r, keys, key_blocks(keys)});
    }
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& x, const Tile& y) { return x.blocks > y.blocks; });

  const int32_t ways = split_ways((int64_t)tiles.size() * heads_q, opt);
  int32_t slot = 0;
  for (const auto& t : tiles) {
    const AttnTileSplit split = split_tile(t.blocks, ways, opt);
    if (split.parts == 1) {
      p.items.push_back({t.s.batch, t.s.q_tok0, t.s.q_len, t.s.k_tok0, t.s.k_len, t.q_row0, t.keys.begin, t.keys.end,
                         -1, 0, {0, 0}});
      continue;
    }
    p.merges.push_back({t.s.batch, t.s.q_tok0, t.s.q_len, t.q_row0, slot, split.parts, {0, 0}});
    for (int32_t i = 0; i < split.parts; ++i) {
      const AttnKeyRange k = part_key_range(t.keys, split, i);
      p.items.push_back({t.s.batch, t.s.q_tok0, t.s.q_len, t.s.k_tok0, t.s.k_len, t.q_row0, k.begin, k.end, slot + i,
                         i == 0, {0, 0}});
    }
    slot += split.parts;
  }
  a.n_items = (int32_t)p.items.size();
  a.n_merge = (int32_t)p.merges.size();
  a.n_slots = slot;
  return p;
}

// Dense batch: B sequences of (Sq, Skv) at batch index b, token offsets 0.
inline std::vector<Sequence> batch_sequences(int32_t B, int32_t Sq, int32_t Skv) {
  std::vector<Sequence> s;
  for (int32_t b = 0; b < B; ++b) s.push_back({b, 0, Sq, 0, Skv});
  return s;
}

// Packed varlen: sequence b is q tokens [cu_q[b], cu_q[b+1]) and k tokens [cu_k[b], cu_k[b+1]).
inline std::vector<Sequence> varlen_sequences(const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k) {
  if (cu_q.size() != cu_k.size() || cu_q.empty())
    throw std::invalid_argument("cu_seqlens_q and cu_seqlens_k must both have B + 1 >= 1 entries");
  std::vector<Sequence> s;
  for (size_t b = 0; b + 1 < cu_q.size(); ++b) {
    if (cu_q[b + 1] < cu_q[b] || cu_k[b + 1] < cu_k[b]) throw std::invalid_argument("cu_seqlens must be non-decreasing");
    s.push_back({0, cu_q[b], cu_q[b + 1] - cu_q[b], cu_k[b], cu_k[b + 1] - cu_k[b]});
  }
  return s;
}

}  // namespace attn950
