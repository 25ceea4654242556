// Unit tests of the gfx942 MHA tail KV-split planner (csrc/host/mha_tail_planner.hpp). Built and run by
// tests/test_mha_tail_planner.py with the host C++ compiler; exits non-zero on the first failure.
#include <cstdio>
#include <stdexcept>

#include "mha_tail_planner.hpp"

using namespace moonmath::mha;

static int failures = 0;
#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                    \
    }                                                                                \
  } while (0)

template <typename F>
static bool throws(F f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return true;
  }
  return false;
}

// The span the planner minimises, recomputed by brute force over every G.
static int64_t best_span_brute(int64_t tail, int64_t nkb, int64_t cus, int64_t* g_out) {
  int64_t best = nkb + kMergeOverheadBlocks, bg = 1;
  for (int64_t g = 2; g <= nkb / 4 && g <= 2 * cus / tail; ++g) {
    int64_t s = ((tail * g + cus - 1) / cus) * ((nkb + g - 1) / g) + kMergeOverheadBlocks;
    if (s < best) best = s, bg = g;
  }
  *g_out = bg;
  return best;
}

int main() {
  // guards: an even grid, a nearly full last round, short kv, disabled
  CHECK(plan_tail(kCtaRows * 304, 65536, 1, 304).tail == 0);            // 304 items: tail 0
  CHECK(plan_tail(kCtaRows * 290, 65536, 1, 304).tail == 0);            // tail 290 > 95 % of 304
  CHECK(plan_tail(kCtaRows * 288, 65536, 1, 304).tail == 0);            // passes the guard, but G = 2 only ties
  CHECK(plan_tail(kCtaRows * 100, 65536, 1, 304).tail == 100);          // 100 stranded: G = 3 fits one round
  CHECK(plan_tail(kCtaRows * 100, 65536, 1, 304).parts == 3);
  CHECK(plan_tail(kCtaRows * 10, 64 * 47, 1, 304).tail == 0);           // nkb 47 < 48
  CHECK(plan_tail(kCtaRows * 10, 64 * 48, 1, 304).tail == 10);
  CHECK(plan_tail(kCtaRows * 10, 65536, 1, 304, false).tail == 0);      // MOONMATH_NO_TAIL
  CHECK(plan_tail(kCtaRows * 10, 64 * 16, 1, 304, true, 4).tail == 10); // min_kv_blocks lowered (tests)

  // the chosen G is the brute-force optimum and strictly beats no split; the partition is exact
  for (int64_t bh : {1, 3, 7, 24, 48})
    for (int64_t sq : {1, 200, 1000, 8192, 16384})
      for (int64_t skv : {64 * 48, 5000, 16384, 65536})
        for (int64_t cus : {8, 80, 304}) {
          TailPlan p = plan_tail(sq, skv, bh, cus);
          const int64_t nqb = (sq + kCtaRows - 1) / kCtaRows, nkb = (skv + 63) / 64;
          CHECK(p.n_work == nqb * bh);
          CHECK(p.n_dense + p.tail == p.n_work);
          CHECK(p.span_unsplit == nkb + kMergeOverheadBlocks);
          if (p.tail) {
            int64_t g = 0;
            CHECK(p.tail == p.n_work % cus);
            CHECK(p.span == best_span_brute(p.tail, nkb, cus, &g) && p.parts == g);
            CHECK(p.parts >= 2 && p.span < p.span_unsplit && nkb / p.parts >= 4);
            std::vector<int32_t> s = split_schedule(p, nqb), m = merge_table(p, nqb);
            CHECK((int64_t)s.size() == 4 * p.slots() && (int64_t)m.size() == 4 * p.tail);
            for (int64_t i = 0; i < p.tail; ++i) {
              CHECK(m[4 * i + 2] == i * p.parts && m[4 * i + 3] == p.parts);
              const int64_t w = p.n_dense + i;
              CHECK(m[4 * i] == w % nqb && m[4 * i + 1] == w / nqb);
              for (int64_t g2 = 0; g2 < p.parts; ++g2) {
                const int32_t* e = &s[4 * (i * p.parts + g2)];
                CHECK(e[0] == m[4 * i] && e[1] == m[4 * i + 1] && e[2] == g2 && e[3] == p.parts);
              }
            }
          } else {
            CHECK(p.parts == 1 && p.n_dense == p.n_work && split_schedule(p, nqb).empty());
          }
        }

  // a worked case: 3 heads x 2 q blocks (256 rows) on 4 CUs, 16 kv blocks: 2 stranded items, G = 2
  static_assert(kCtaRows == 256, "the worked case assumes 256-row q blocks");
  TailPlan w = plan_tail(385, 1000, 3, 4, true, 4);
  CHECK(w.tail == 2 && w.parts == 2 && w.n_dense == 4 && w.span == 11 && w.span_unsplit == 19);
  CHECK(w.ws_o_floats() == 4 * 256 * 128 && w.ws_ml_floats() == 4 * 256 * 2);

  CHECK(throws([] { plan_tail(0, 1, 1, 304); }));
  CHECK(throws([] { plan_tail(1, 0, 1, 304); }));
  CHECK(throws([] { plan_tail(1, 1, 0, 304); }));
  CHECK(throws([] { plan_tail(1, 1, 1, 0); }));
  if (failures) std::fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
