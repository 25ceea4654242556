// Unit tests of the gfx942 MHA tail KV-split planner (csrc/host/mha_tail_planner.hpp). Built and run by
// tests/test_mha_tail_planner.py with the host C++ compiler; exits non-zero on the first failure.
#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "mha_tail_planner.hpp"
#include "moonmath/host/unit_check.hpp"

using namespace moonmath::mha;


// The makespan the planner minimises, recomputed by brute force over every G: n equal items of nkb blocks
// (+ kItemOverheadBlocks each) handed to the first free of `cus` CUs; split G, the other items, then the
// tail's parts (part p of an item ceil((nkb - p) / G) blocks), then the merge.
static int64_t schedule_brute(const std::vector<int64_t>& costs, int64_t cus) {
  std::vector<int64_t> free_at(std::min<int64_t>(cus, int64_t(costs.size())), 0);
  for (const int64_t c : costs) *std::min_element(free_at.begin(), free_at.end()) += c;
  return free_at.empty() ? 0 : *std::max_element(free_at.begin(), free_at.end());
}
static int64_t best_span_brute(int64_t n, int64_t tail, int64_t nkb, int64_t cus, int64_t* g_out) {
  const int64_t item = nkb + kItemOverheadBlocks;
  int64_t best = ((n + cus - 1) / cus) * item, bg = 1;
  for (int64_t g = 2; g <= nkb / 4 && g <= 4 * cus / tail; ++g) {
    std::vector<int64_t> parts;
    for (int64_t i = 0; i < tail; ++i)
      for (int64_t q = 0; q < g; ++q) parts.push_back((nkb - q + g - 1) / g + kItemOverheadBlocks);
    const int64_t s = ((n - tail) / cus) * item + schedule_brute(parts, cus) + kMergeOverheadBlocks;
    if (s < best) best = s, bg = g;
  }
  *g_out = bg;
  return best;
}

int main() {
  // guards: an even grid, a nearly full last round, short kv, disabled
  MM_CHECK(plan_tail(kCtaRows * 304, 65536, 1, 304).tail == 0);            // 304 items: tail 0
  MM_CHECK(plan_tail(kCtaRows * 290, 65536, 1, 304).tail == 0);            // tail 290 > 95 % of 304
  MM_CHECK(plan_tail(kCtaRows * 288, 65536, 1, 304).tail == 0);            // passes the guard, but G = 2 loses
  MM_CHECK(plan_tail(kCtaRows * 100, 65536, 1, 304).tail == 100);          // 100 stranded: G = 3 fits one round
  MM_CHECK(plan_tail(kCtaRows * 100, 65536, 1, 304).parts == 3);
  MM_CHECK(plan_tail(kCtaRows * 10, 64 * 47, 1, 304).tail == 0);           // nkb 47 < 48
  MM_CHECK(plan_tail(kCtaRows * 10, 64 * 48, 1, 304).tail == 10);
  MM_CHECK(plan_tail(kCtaRows * 10, 65536, 1, 304, false).tail == 0);      // MOONMATH_NO_TAIL
  MM_CHECK(plan_tail(kCtaRows * 10, 64 * 16, 1, 304, true, 4).tail == 10); // min_kv_blocks lowered (tests)

  // the chosen G is the brute-force optimum and strictly beats no split; the partition is exact
  for (int64_t bh : {1, 3, 7, 24, 48})
    for (int64_t sq : {1, 200, 1000, 8192, 16384})
      for (int64_t skv : {64 * 48, 5000, 16384, 65536})
        for (int64_t cus : {8, 80, 304}) {
          TailPlan p = plan_tail(sq, skv, bh, cus);
          const int64_t nqb = (sq + kCtaRows - 1) / kCtaRows, nkb = (skv + 63) / 64;
          MM_CHECK(p.n_work == nqb * bh);
          MM_CHECK(p.n_dense + p.tail == p.n_work);
          MM_CHECK(p.span_unsplit == ((p.n_work + cus - 1) / cus) * (nkb + kItemOverheadBlocks));
          if (p.tail) {
            int64_t g = 0;
            MM_CHECK(p.tail == p.n_work % cus);
            MM_CHECK(p.span == best_span_brute(p.n_work, p.tail, nkb, cus, &g) && p.parts == g);
            MM_CHECK(p.parts >= 2 && p.span < p.span_unsplit && nkb / p.parts >= 4);
            std::vector<int32_t> s = split_schedule(p, nqb), m = merge_table(p, nqb);
            MM_CHECK((int64_t)s.size() == 4 * p.slots() && (int64_t)m.size() == 4 * p.tail);
            for (int64_t i = 0; i < p.tail; ++i) {
              MM_CHECK(m[4 * i + 2] == i * p.parts && m[4 * i + 3] == p.parts);
              const int64_t w = p.n_dense + i;
              MM_CHECK(m[4 * i] == w % nqb && m[4 * i + 1] == w / nqb);
              for (int64_t g2 = 0; g2 < p.parts; ++g2) {
                const int32_t* e = &s[4 * (i * p.parts + g2)];
                MM_CHECK(e[0] == m[4 * i] && e[1] == m[4 * i + 1] && e[2] == g2 && e[3] == p.parts);
              }
            }
          } else {
            MM_CHECK(p.parts == 1 && p.n_dense == p.n_work && split_schedule(p, nqb).empty());
          }
        }

  // a worked case: 3 heads x 2 q blocks (256 rows) on 4 CUs, 16 kv blocks: 2 stranded items, G = 2.
  // Unsplit: 2 rounds of 16 + 4 = 40; G = 2: 20 + (8 + 4) + 3 = 35 (G = 3: 20 + 19 + 3, G = 4: 20 + 16 + 3)
  static_assert(kCtaRows == 256, "the worked case assumes 256-row q blocks");
  TailPlan w = plan_tail(385, 1000, 3, 4, true, 4);
  MM_CHECK(w.tail == 2 && w.parts == 2 && w.n_dense == 4 && w.span == 35 && w.span_unsplit == 40);
  // MI300X (304 CUs), the seed's shapes whose plan the makespan pricing moved from the tail-round formula, each
  // checked on the timing model (docs/kernels/mha_gfx942.md, "Tail split priced by makespan"):
  // B1 H32 S16384, 224 stranded items: none (G <= 2 * cus / tail = 2 tied) -> G = 4 in 3 rounds of parts
  MM_CHECK(plan_tail(16384, 16384, 32, 304).tail == 224 && plan_tail(16384, 16384, 32, 304).parts == 4);
  // B2 H24 S16384, 32 stranded: G = 19 (2 rounds of 14 blocks) -> 9 (one round of 29: two workgroups' overhead less)
  MM_CHECK(plan_tail(16384, 16384, 48, 304).tail == 32 && plan_tail(16384, 16384, 48, 304).parts == 9);
  // B2 H8 S86016, 208 stranded: none -> G = 4; B2 H24 S32768 keeps G = 9 (G = 19 would be 2 units longer)
  MM_CHECK(plan_tail(86016, 86016, 16, 304).tail == 208 && plan_tail(86016, 86016, 16, 304).parts == 4);
  MM_CHECK(plan_tail(32768, 32768, 48, 304).parts == 9 && plan_tail(8192, 8192, 48, 304).parts == 19);
  MM_CHECK(w.ws_o_floats() == 4 * 256 * 128 && w.ws_ml_floats() == 4 * 256 * 2);

  // windows (row i sees keys i + lo .. i + hi): every part of every split item gets >= 1 block of the item's
  // range, G within the longest item's blocks / 4; the range is brute-forced from the rows' windows
  constexpr int64_t kU = config::kUnbounded;
  for (int64_t sq : {200, 1000, 8192})
    for (int64_t skv : {64 * 48, 5000, 8192})
      for (int64_t left : {-1, 0, 100, 1024, 4096})
        for (int64_t right : {-1, 0, 63, 700}) {
          const int64_t lo = left < 0 ? -kU : skv - sq - left, hi = right < 0 ? kU : skv - sq + right;
          const int64_t nqb = (sq + kCtaRows - 1) / kCtaRows;
          for (int64_t qb = 0; qb < nqb; ++qb) {  // the shared formula against the rows one by one
            int64_t kmin = skv, kmax = -1;
            for (int64_t i = qb * kCtaRows; i < std::min(sq, (qb + 1) * kCtaRows); ++i)
              if (std::max<int64_t>(0, i + lo) <= std::min(skv - 1, i + hi))
                kmin = std::min(kmin, std::max<int64_t>(0, i + lo)), kmax = std::max(kmax, std::min(skv - 1, i + hi));
            const int64_t want = kmax < 0 ? 0 : kmax / 64 - kmin / 64 + 1;
            MM_CHECK(item_kv_blocks(qb, sq, skv, lo, hi) == want);
          }
          for (int64_t bh : {3, 24})
            for (int64_t cus : {8, 304}) {
              TailPlan p = plan_tail(sq, skv, bh, cus, true, 4, lo, hi);
              MM_CHECK(p.n_dense + p.tail == p.n_work);
              std::vector<int32_t> s = split_schedule(p, nqb);
              for (int64_t i = 0; i < p.slots(); ++i)
                MM_CHECK(item_kv_blocks(s[4 * i], sq, skv, lo, hi) > s[4 * i + 2]);
              if (p.tail) MM_CHECK(p.parts >= 2 && p.span < p.span_unsplit && (p.span_unsplit - 3) / p.parts >= 4);
            }
        }
  MM_CHECK(mm_host::throws([] { plan_tail(1, 1, 1, 1, true, 4, -config::kUnbounded - 1); }));

  MM_CHECK(mm_host::throws([] { plan_tail(0, 1, 1, 304); }));
  MM_CHECK(mm_host::throws([] { plan_tail(1, 0, 1, 304); }));
  MM_CHECK(mm_host::throws([] { plan_tail(1, 1, 0, 304); }));
  MM_CHECK(mm_host::throws([] { plan_tail(1, 1, 1, 0); }));
  return mm_host::exit_code();
}
