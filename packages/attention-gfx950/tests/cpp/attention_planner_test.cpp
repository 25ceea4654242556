// Unit test of the gfx950 attention forward planner (csrc/host/attention_planner.hpp), host C++ only.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

#include "attention_planner.hpp"
#include "moonmath/host/unit_check.hpp"

using namespace attn950;


static const std::vector<int64_t> kStrides(14, 0);

// Every (sequence, row tile, key) is covered exactly once by the items of a plan; parts of a split tile
// are contiguous ascending key ranges on kKvBlock boundaries, named by exactly one merge item.
static void check_cover(const FwdPlan& p, const std::vector<Sequence>& seqs, bool causal) {
  int32_t tiles = 0;
  for (const auto& s : seqs) tiles += ceil_div(s.q_len, kTileRows);
  std::set<int32_t> slots;
  int32_t covered_tiles = 0;
  for (const auto& s : seqs)
    for (int32_t r = 0; r < s.q_len; r += kTileRows) {
      const int32_t end = tile_kv_end(s, r, causal);
      std::vector<const AttnWorkItem*> mine;
      for (const auto& it : p.items)
        if (it.q_tok0 == s.q_tok0 && it.batch == s.batch && it.q_row0 == r && it.k_tok0 == s.k_tok0) mine.push_back(&it);
      MM_CHECK(!mine.empty());
      ++covered_tiles;
      if (mine.size() == 1) {
        MM_CHECK(mine[0]->slot == -1 && mine[0]->kv_begin == 0 && mine[0]->kv_end == end);
        continue;
      }
      int32_t k = 0;
      for (size_t i = 0; i < mine.size(); ++i) {
        MM_CHECK(mine[i]->kv_begin == k && mine[i]->kv_begin % kKvBlock == 0 && mine[i]->kv_end > k);
        MM_CHECK(mine[i]->slot == mine[0]->slot + (int32_t)i && slots.insert(mine[i]->slot).second);
        k = mine[i]->kv_end;
      }
      MM_CHECK(k == end);
      int32_t merges = 0;
      for (const auto& m : p.merges)
        if (m.slot0 == mine[0]->slot) {
          ++merges;
          MM_CHECK(m.n_parts == (int32_t)mine.size() && m.q_row0 == r && m.q_len == s.q_len && m.q_tok0 == s.q_tok0);
        }
      MM_CHECK(merges == 1);
    }
  MM_CHECK(covered_tiles == tiles);
  MM_CHECK(p.args.n_items == (int32_t)p.items.size() && p.args.n_merge == (int32_t)p.merges.size());
  MM_CHECK(p.args.n_slots == (int32_t)slots.size());
  MM_CHECK(p.bytes().size() == sizeof(AttnFwdArgs) + p.items.size() * 48 + p.merges.size() * 32);
}

int main() {
  // A full machine: 8 x 32 heads x 16 tiles >> 256 CUs: no split.
  {
    auto s = batch_sequences(8, 4096, 4096);
    auto p = plan_forward(s, 32, 8, false, true, 0.1f, kStrides);
    MM_CHECK(p.merges.empty() && p.items.size() == 8 * 16 && p.args.group == 4 && p.args.flags == kFlagLse);
    check_cover(p, s, false);
  }
  // One long sequence, 2 heads: 2 CTAs on 256 CUs -> split into max_parts parts of >= 4 blocks.
  {
    auto s = batch_sequences(1, 200, 65536);
    auto p = plan_forward(s, 2, 2, false, false, 0.1f, kStrides);
    MM_CHECK(p.merges.size() == 1 && p.merges[0].n_parts == 16);
    check_cover(p, s, false);
  }
  // Too few key blocks to split (min_part_blocks) -> no split even with idle CUs.
  {
    auto s = batch_sequences(1, 100, 300);  // 5 blocks < 2 * 4
    auto p = plan_forward(s, 1, 1, false, false, 0.1f, kStrides);
    MM_CHECK(p.merges.empty());
    PlanOptions o;
    o.min_part_blocks = 1;
    auto q = plan_forward(s, 1, 1, false, false, 0.1f, kStrides, o);
    MM_CHECK(q.merges.size() == 1 && q.merges[0].n_parts == 5);
    check_cover(q, s, false);
  }
  // Causal, Sq > Skv: leading tiles that see no key keep an empty range; ranges follow the diagonal.
  {
    auto s = batch_sequences(2, 1000, 300);
    auto p = plan_forward(s, 4, 1, true, false, 0.1f, kStrides);
    check_cover(p, s, true);
    MM_CHECK(tile_kv_end(s[0], 0, true) == 0);              // rows 0..255 see keys <= i - 700
    MM_CHECK(tile_kv_end(s[0], 512, true) == 300 - 232);    // last row 767 sees keys <= 67
    // heaviest first
    for (size_t i = 1; i < p.items.size(); ++i)
      MM_CHECK(p.items[i - 1].kv_end - p.items[i - 1].kv_begin >= 0);
    MM_CHECK(p.items.front().kv_end >= p.items.back().kv_end);
  }
  // Varlen: offsets carried in the items, batch 0; empty sequences give no item; forced splits cover.
  {
    auto s = varlen_sequences({0, 37, 37, 600, 601}, {0, 100, 105, 700, 700});
    MM_CHECK(s.size() == 4 && s[1].q_len == 0 && s[3].k_len == 0);
    PlanOptions o;
    o.num_cus = 100000;
    o.min_part_blocks = 1;
    for (bool causal : {false, true}) {
      auto p = plan_forward(s, 4, 2, causal, true, 0.1f, kStrides, o);
      check_cover(p, s, causal);
      for (const auto& it : p.items) MM_CHECK(it.batch == 0 && it.q_len > 0);
    }
  }
  // Determinism: the same inputs give the same bytes.
  {
    auto s = batch_sequences(3, 777, 1234);
    MM_CHECK(plan_forward(s, 8, 2, true, true, 0.5f, kStrides).bytes() ==
          plan_forward(s, 8, 2, true, true, 0.5f, kStrides).bytes());
  }
  // Capacities of a device-written plan (device_plan_caps) bound every plan within the promise (B, max_q,
  // total_q, max_k): random lengths, heads and split policies, causal or not, with windows.
  {
    std::mt19937 rng(42);
    int32_t split_plans = 0;
    for (int it = 0; it < 20000; ++it) {
      const int32_t B = 1 + (int32_t)(rng() % 12), max_q = (int32_t)(rng() % 1500), max_k = (int32_t)(rng() % 6000);
      std::vector<int32_t> cu_q{0}, cu_k{0};
      for (int32_t b = 0; b < B; ++b) {
        cu_q.push_back(cu_q.back() + (int32_t)(rng() % (max_q + 1)));
        cu_k.push_back(cu_k.back() + (int32_t)(rng() % (max_k + 1)));
      }
      const int32_t total_q = cu_q.back() + (int32_t)(rng() % 300);
      PlanOptions o;
      if (rng() % 2) {
        o.num_cus = 1 + (int32_t)(rng() % 5000);
        o.min_part_blocks = 1 + (int32_t)(rng() % 4);
        o.max_parts = 1 + (int32_t)(rng() % 24);
      }
      const int32_t heads_kv = 1 + (int32_t)(rng() % 4), heads_q = heads_kv * (1 + (int32_t)(rng() % 8));
      const bool causal = rng() % 2;
      const int32_t wl = rng() % 3 ? -1 : (int32_t)(rng() % 2000), wr = causal ? (wl >= 0 ? 0 : -1) : -1;
      const auto seqs = varlen_sequences(cu_q, cu_k);
      const auto p = plan_forward(seqs, heads_q, heads_kv, causal, false, 1.f, kStrides, o, 0.f, wl, wr);
      const AttnPlanCaps c = device_plan_caps(B, max_q, total_q, max_k, heads_q, o);
      int32_t tiles = 0;
      for (const auto& s : seqs) tiles += ceil_div(s.q_len, kTileRows);
      MM_CHECK(tiles <= c.tiles && p.args.n_items <= c.items && p.args.n_merge <= c.merges && p.args.n_slots <= c.slots);
      split_plans += p.args.n_merge > 0;
    }
    MM_CHECK(split_plans > 1000);
  }
  // Bad input.
  {
    bool threw = false;
    try { plan_forward(batch_sequences(1, 1, 1), 3, 2, false, false, 1.f, kStrides); } catch (const std::invalid_argument&) { threw = true; }
    MM_CHECK(threw);
    threw = false;
    try { varlen_sequences({0, 5, 3}, {0, 1, 2}); } catch (const std::invalid_argument&) { threw = true; }
    MM_CHECK(threw);
  }
  return mm_host::exit_code();
}
