// Dense tail KV-split planner of the gfx942 MHA forward (pure C++, no HIP types).
//
// The dense grid runs n = nqb * B*H work items (one kCtaRows-row q block of one head each), one
// workgroup per CU at a time (the kernel holds ~390 registers per lane: one wave per SIMD). When n is not a
// multiple of the CU count, the last round leaves CUs idle: tail = n mod cus items run alone. The
// planner splits those `tail` items along kv into G parts each (fp32 partials + a merge). Guards: no split
// when tail = 0, when the tail already fills >= 95 % of a round (tail * 20 > cus * 19), or when kv is short
// (nkb < min_kv_blocks). Every input is explicit (the CU count is the live device's on hip, 304 for MI300X,
// small in emulator tests) so the plan is a function of shapes.
// Pricing: the plans are compared by the makespan of the dispatcher's list schedule (each workgroup to the
// first free CU), in kv-block units with kItemOverheadBlocks per workgroup: unsplit, every item in one dense
// launch; split G, the dense launch of the other items, then the split launch's tail * G parts in slot order,
// then the merge (kMergeOverheadBlocks). G must win strictly. G runs over 2 .. min(kMaxSplitRounds * cus /
// tail, nkb / 4, nkb_min): up to four rounds of parts (the workspace, tail * G slots, stays <= 4 * cus), each
// part >= 4 blocks. The per-workgroup overhead is what makes a finer G cost more than the seed's tail-round
// count ceil(tail * G / cus) * ceil(nkb / G) says (B2 H24 S32768: G = 19 there, 9 here, which the timing model
// prefers), and what lets a G past one round win (B1 H32 S16384: 224 stranded items, G = 4 in 3 rounds).
// Window / causal (lo_shift, hi_shift as the feature kernels take them): an item runs only the kv blocks
// of its rows' windows (config::window_kv_blocks), so nkb above is the largest such count over the tail
// items, and G is also at most the smallest: no part is ever empty (a tail holding an item with no block is
// not split), the longest items' parts keep >= 4 blocks. The items then differ in length and the feature
// kernels take them heaviest first (dense_order), which the dense launch's list schedule follows. A split
// that lengthens the whole (B1 H32 S8192 causal: the parts' launch costs more than the tail it shortens) is
// not taken. span / span_unsplit are those makespans.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <stdexcept>
#include <vector>

#include "mha_config.hpp"  // csrc/device/gfx942: the tile constants the kernels use

namespace moonmath::mha {

constexpr int64_t kCtaRows = config::kCtaRows;
constexpr int64_t kKvBlock = config::kKvBlock;
constexpr int64_t kHeadDim = config::kHeadDim;
constexpr int64_t kDefaultMinKvBlocks = 48;
constexpr int64_t kMergeOverheadBlocks = 3;
// A feature workgroup's fixed cost in kv blocks: the causal item fit's intercept over its per-block slope,
// 20.3k / 5.0k modeled cycles (benchmarks/causal_order_timing.py, RTNE).
constexpr int64_t kItemOverheadBlocks = 4;
// G is at most kMaxSplitRounds * cus / tail: the split launch runs at most that many rounds of parts.
constexpr int64_t kMaxSplitRounds = 4;

struct TailPlan {
  int64_t n_work = 0;   // q-block work items in total (nqb * bh)
  int64_t n_dense = 0;  // items run by the dense launch (the first n_dense of the head-first order)
  int64_t tail = 0;     // items split (the last `tail`), 0 = no split
  int64_t parts = 1;    // G: kv parts per split item
  int64_t span = 0;     // the chosen plan's makespan in kv-block units (dense + split + merge launches)
  int64_t span_unsplit = 0;
  int64_t slots() const { return tail * parts; }
  int64_t ws_o_floats() const { return slots() * kCtaRows * kHeadDim; }
  int64_t ws_ml_floats() const { return slots() * kCtaRows * 2; }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The kv blocks item (q block qb) runs under a window (all of them with the unbounded default).
inline int64_t item_kv_blocks(int64_t qb, int64_t sq, int64_t skv, int64_t lo_shift = -config::kUnbounded,
                              int64_t hi_shift = config::kUnbounded) {
  const int64_t first = qb * kCtaRows, last = std::min(first + kCtaRows, sq) - 1;
  const config::KvRange r = config::window_kv_blocks(int(first), int(last), int(lo_shift), int(hi_shift), int(skv));
  return r.end - r.begin;
}

// Makespan of `costs` handed out in order, each to the first free of `cus` CUs (the dispatcher's list schedule).
inline int64_t list_schedule(const std::vector<int64_t>& costs, int64_t cus) {
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> free_at;
  for (int64_t i = 0; i < std::min<int64_t>(cus, int64_t(costs.size())); ++i) free_at.push(0);
  int64_t end = 0;
  for (const int64_t c : costs) {
    const int64_t t = free_at.top() + c;
    free_at.pop();
    free_at.push(t);
    end = std::max(end, t);
  }
  return end;
}

// The makespan of a dense launch of items [0, n) of the head-first order, heaviest first (dense_order), and
// of the split launch of items [first, n_work) in g parts each (slot order), in kv blocks.
inline int64_t dense_launch_span(const std::vector<int64_t>& blocks, int64_t n, int64_t cus) {
  const int64_t nqb = int64_t(blocks.size());
  std::vector<int64_t> c(n);
  for (int64_t w = 0; w < n; ++w) c[w] = blocks[w % nqb] + kItemOverheadBlocks;
  std::stable_sort(c.begin(), c.end(), std::greater<int64_t>());
  return list_schedule(c, cus);
}
inline int64_t split_launch_span(const std::vector<int64_t>& blocks, int64_t first, int64_t n_work, int64_t g,
                                 int64_t cus) {
  const int64_t nqb = int64_t(blocks.size());
  std::vector<int64_t> c;
  c.reserve((n_work - first) * g);
  for (int64_t w = first; w < n_work; ++w)
    for (int64_t part = 0; part < g; ++part) c.push_back(ceil_div(blocks[w % nqb] - part, g) + kItemOverheadBlocks);
  return list_schedule(c, cus);
}

inline TailPlan plan_tail(int64_t sq, int64_t skv, int64_t bh, int64_t cus, bool enabled = true,
                          int64_t min_kv_blocks = kDefaultMinKvBlocks, int64_t lo_shift = -config::kUnbounded,
                          int64_t hi_shift = config::kUnbounded) {
  if (sq < 1) throw std::invalid_argument("sq must be >= 1");
  if (skv < 1) throw std::invalid_argument("skv must be >= 1");
  if (bh < 1) throw std::invalid_argument("bh (batch * heads) must be >= 1");
  if (cus < 1) throw std::invalid_argument("cus (compute units) must be >= 1");
  if (lo_shift < -config::kUnbounded || lo_shift > config::kUnbounded || hi_shift < -config::kUnbounded ||
      hi_shift > config::kUnbounded)
    throw std::invalid_argument("lo_shift and hi_shift must be within +-2^30");
  TailPlan p;
  const int64_t nqb = ceil_div(sq, kCtaRows);
  p.n_work = nqb * bh;
  p.n_dense = p.n_work;
  const int64_t tail = p.n_work % cus;
  int64_t nkb = 0, nkb_min = ceil_div(skv, kKvBlock);  // over the tail items (the last `tail` of the order)
  for (int64_t w = p.n_work - tail, n = 0; w < p.n_work && n < nqb; ++w, ++n) {  // nqb items: every q block
    const int64_t b = item_kv_blocks(w % nqb, sq, skv, lo_shift, hi_shift);
    nkb = std::max(nkb, b), nkb_min = std::min(nkb_min, b);
  }
  std::vector<int64_t> blocks(nqb);  // the kv blocks of each q block's item
  for (int64_t qb = 0; qb < nqb; ++qb) blocks[qb] = item_kv_blocks(qb, sq, skv, lo_shift, hi_shift);
  p.span_unsplit = p.span = dense_launch_span(blocks, p.n_work, cus);
  if (!enabled || tail == 0 || tail * 20 > cus * 19 || nkb < min_kv_blocks) return p;
  const int64_t dense_rest = dense_launch_span(blocks, p.n_work - tail, cus);
  int64_t best_g = 1, best = p.span_unsplit;
  const int64_t g_max = std::min<int64_t>({kMaxSplitRounds * cus / tail, nkb / 4, nkb_min});
  for (int64_t g = 2; g <= g_max; ++g) {
    const int64_t span =
        dense_rest + split_launch_span(blocks, p.n_work - tail, p.n_work, g, cus) + kMergeOverheadBlocks;
    if (span < best) best = span, best_g = g;
  }
  if (best_g == 1) return p;
  p.tail = tail;
  p.parts = best_g;
  p.n_dense = p.n_work - tail;
  p.span = best;
  return p;
}

// The split launch's table, one int32x4 per slot: (q block, bh, part, G); and the merge's, one per
// split item: (q block, bh, first slot, G). Items in head-first order: item w = (w / nqb, w % nqb).
inline std::vector<int32_t> split_schedule(const TailPlan& p, int64_t nqb) {
  std::vector<int32_t> t;
  t.reserve(p.slots() * 4);
  for (int64_t w = p.n_dense; w < p.n_work; ++w)
    for (int64_t g = 0; g < p.parts; ++g)
      t.insert(t.end(), {int32_t(w % nqb), int32_t(w / nqb), int32_t(g), int32_t(p.parts)});
  return t;
}
inline std::vector<int32_t> merge_table(const TailPlan& p, int64_t nqb) {
  std::vector<int32_t> t;
  t.reserve(p.tail * 4);
  for (int64_t w = p.n_dense; w < p.n_work; ++w)
    t.insert(t.end(), {int32_t(w % nqb), int32_t(w / nqb), int32_t((w - p.n_dense) * p.parts), int32_t(p.parts)});
  return t;
}

// The feature dense launch's item table, one int32 per workgroup id: the xcd_contiguous order of the dense
// items (those below n_dense), stably sorted by descending kv blocks under the window. The dispatcher hands
// ids out in order to the first free CU, so the heaviest causal / window items start first across all heads
// (a longest-first list schedule); with equal counts (no window) it is the default kernels' swizzle.
inline std::vector<int32_t> dense_order(const TailPlan& p, int64_t nqb, int64_t sq, int64_t skv,
                                        int64_t lo_shift = -config::kUnbounded, int64_t hi_shift = config::kUnbounded) {
  std::vector<int64_t> blocks(nqb);
  for (int64_t qb = 0; qb < nqb; ++qb) blocks[qb] = item_kv_blocks(qb, sq, skv, lo_shift, hi_shift);
  std::vector<int32_t> t(p.n_dense);
  for (int64_t c = 0; c < p.n_dense; ++c) t[c] = int32_t(config::xcd_contiguous(unsigned(c), unsigned(p.n_dense)));
  std::stable_sort(t.begin(), t.end(), [&](int32_t a, int32_t b) { return blocks[a % nqb] > blocks[b % nqb]; });
  return t;
}

}  // namespace moonmath::mha
