// Unit tests of the gfx942 MLA decode planner (csrc/host/mla_planner.hpp). Built and run by
// tests/test_mla_kernel_planner.py with the host C++ compiler; exits non-zero on the first failure.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "mla_planner.hpp"
#include "moonmath/host/unit_check.hpp"

using namespace moonmath::mla;


int main() {
  // Domain.
  MM_CHECK(mm_host::throws([] { plan(1, 0, 1); }));
  MM_CHECK(mm_host::throws([] { plan(1, 129, 1); }));
  MM_CHECK(mm_host::throws([] { plan(0, 16, 1); }));
  MM_CHECK(mm_host::throws([] { plan(1, 16, 0); }));
  MM_CHECK(!mm_host::throws([] { plan(1, 1, 1); }));
  MM_CHECK(!mm_host::throws([] { plan(1, 128, 8); }));

  // Invariants over a sweep of shapes and hints.
  const int64_t Bs[] = {1, 2, 3, 8, 32, 64, 304, 1000};
  const int64_t Hs[] = {1, 12, 16, 64, 128};
  const int64_t Qs[] = {1, 2, 4, 8};
  const int64_t Ls[] = {0, 1, 15, 16, 17, 1000, 8192, 150000};
  for (const Machine* mc : {&kGfx942, &kGfx950})
  for (int64_t B : Bs)
    for (int64_t H : Hs)
      for (int64_t q : Qs)
        for (int64_t L : Ls) {
          const Plan p = plan(B, H, q, L, mc->cus, *mc);
          MM_CHECK(p.rows == q * H);
          MM_CHECK(p.n_rt == (q * H + 15) / 16);
          MM_CHECK(p.nparts >= 1 && p.nparts <= kMaxParts);
          const int64_t len = L > 0 ? L : kDefaultLen;
          MM_CHECK(p.len_used == len);
          MM_CHECK(p.nparts <= (len + 15) / 16 || p.nparts == 1);  // never more parts than tiles
          MM_CHECK(std::string(p.variant) == "ws");  // the one a16w8 decode kernel
          MM_CHECK(p.grid == B * p.nparts * ((p.n_rt + 3) / 4) && p.waves == p.grid * kWsWaves && p.block == 512);
          if (p.nparts == 1) {
            MM_CHECK(p.merge_grid == 0 && p.ws_o_floats == 0 && p.ws_ml_floats == 0);
          } else {
            // the shape plan_cost prices
            const MergeShape ms = spread_merge_shape(B * q * H, p.nparts, mc->cus, mc->merge_one_wave_quarters);
            MM_CHECK(p.merge_wpr == ms.wpr && p.merge_cs == ms.cs && p.merge_grid == ms.grid && p.merge_waves == ms.waves);
            MM_CHECK(p.balanced == balance_split(B, p.nparts));
            const int64_t mw = p.merge_waves;
            // whole rows in max(4, wpr)-wave workgroups; one-wave (row, quarter) ones; or, where whole rows leave CUs
            // idle, smaller power-of-two workgroups (>= wpr waves) that still fit one round of the CUs
            MM_CHECK(mw == merge_block_waves(p.merge_wpr) || (mw == 1 && p.merge_cs == 4 && p.merge_wpr == 1) ||
                     (mw >= p.merge_wpr && mw < merge_block_waves(p.merge_wpr) && (mw & (mw - 1)) == 0 &&
                      p.merge_grid <= mc->cus));
            const int64_t units = B * q * H * p.merge_cs * p.merge_wpr;  // merge waves
            MM_CHECK(p.merge_grid * mw >= units && (p.merge_grid - 1) * mw < units);
            MM_CHECK(p.ws_o_floats == B * q * H * p.nparts * (ws_half_partials(p.nparts) ? 256 : 512));  // ws: fp16 O, two per float
            MM_CHECK(p.ws_ml_floats == B * q * H * p.nparts * 4 + B);  // + the request ends (the merge's)
            MM_CHECK(p.ws_o_floats * 4 < (int64_t(1) << 32));
          }
          // The chosen split is the fewest parts within the machine's split_slack of the model's minimum.
          double min_cost = 1e300;
          for (int64_t np = 1; np <= std::min<int64_t>(kMaxParts, (len + 15) / 16); ++np) {
            if (np > 1 && B * q * H * np * 512 * 4 >= (int64_t(1) << 32)) break;
            if (!parts_all_busy((len + 15) / 16, np)) continue;
            min_cost = std::min(min_cost, plan_cost(B, H, q, len, np, mc->cus, *mc));
          }
          MM_CHECK(p.cost_ns <= min_cost * mc->split_slack);
          MM_CHECK(parts_all_busy((len + 15) / 16, p.nparts));
          for (int64_t np = 1; np < p.nparts; ++np) {
            if (!parts_all_busy((len + 15) / 16, np)) continue;
            MM_CHECK(plan_cost(B, H, q, len, np, mc->cus, *mc) > min_cost * mc->split_slack);
          }
          MM_CHECK(plan_cost(B, H, q, len, p.nparts, mc->cus, *mc) == p.cost_ns);
          // Pure function of its inputs.
          const Plan p2 = plan(B, H, q, L, mc->cus, *mc);
          MM_CHECK(p2.nparts == p.nparts && p2.grid == p.grid);
        }

  // Shapes the issue measures: a long single request splits widely, a full batch much less.
  {
    const Plan a = plan(2, 16, 1, 150000);
    MM_CHECK(a.nparts >= 64 && std::string(a.variant) == "ws");
    const Plan b = plan(8, 16, 4, 8192);
    MM_CHECK(b.nparts > 1 && b.nparts < 64);
    // Very large batches need (almost) no split.
    const Plan c = plan(4096, 16, 4, 4096);
    MM_CHECK(c.nparts <= 2);
    const Plan c1 = plan(2048, 64, 8, 2048);
    MM_CHECK(c1.nparts == 1 && c1.merge_grid == 0 && c1.ws_o_floats == 0);
    // Beyond the original's B * ceil(q_len * H / 96) <= 304 cap: still planned.
    const Plan d = plan(1024, 128, 8, 8192);
    MM_CHECK(d.nparts >= 1 && d.grid > 0);
  }
  // Per-arch machines: cus <= 0 is the machine's full part; gfx950's faster tiles never cost more.
  {
    MM_CHECK(plan(2, 16, 1, 8192, 0, kGfx950).cost_ns == plan(2, 16, 1, 8192, 256, kGfx950).cost_ns);
    MM_CHECK(plan(2, 16, 1, 8192, 0).cost_ns == plan(2, 16, 1, 8192, kDefaultCus).cost_ns);
    MM_CHECK(&machine_for("gfx942") == &kGfx942 && &machine_for("gfx950") == &kGfx950);
    MM_CHECK(mm_host::throws([] { machine_for("gfx90a"); }));
    MM_CHECK(kernel_cost("gfx950", "ws").tile_cycles < kernel_cost("gfx942", "ws").tile_cycles && kGfx950.cus == 256);
    MM_CHECK(mm_host::throws([] { kernel_cost("gfx942", "wave"); }));  // retired a16w8 kernels: no cost row
    MM_CHECK(mm_host::throws([] { kernel_cost("gfx942", "a8w8"); }));  // no gfx942 a8w8 kernel: no cost model
  }
  // The KV-format kernels: their own rows (bytes per token of their pools), their launch shape, and their
  // parts by plan()'s rule over their row: the fewest parts within the machine's format_split_slack of the
  // minimum, none empty.
  {
    MM_CHECK(kernel_cost("gfx950", "a16w16").token_bytes == 2 * kRowBytes + 4);
    MM_CHECK(kernel_cost("gfx950", "mxfp4_w1").token_bytes == 288 + 18 + 4);
    MM_CHECK(kernel_cost("gfx950", "a8w8_w1").call_launches == 1 && kernel_cost("gfx950", "ws").call_launches == 0);
    MM_CHECK(format_launch_shape("a8w8_w1") == Variant::kWave && format_launch_shape("a8w8") == Variant::kShared);
    MM_CHECK(mm_host::throws([] { plan_format_parts(2, 16, 1, 1024, 0, kGfx942, "mxfp4"); }));
    for (const char* k : {"a16w16_w1", "a8w8_w1", "mxfp4_w1"})
      for (int64_t S : {1024, 8192}) {
        const auto [np, ns] = plan_format_parts(2, 16, 1, S, 0, kGfx950, k);
        const KernelCost& kc = kernel_cost("gfx950", k);
        double best = 1e300;
        for (int64_t n = 1; n <= S / 16; ++n)
          if (parts_all_busy(S / 16, n)) best = std::min(best, kernel_plan_cost(kc, 2, 16, 1, S, n, 256, Variant::kWave, kGfx950, true));
        MM_CHECK(ns <= kGfx950.format_split_slack * best && ns == kernel_plan_cost(kc, 2, 16, 1, S, np, 256, Variant::kWave, kGfx950, true));
        for (int64_t n = 1; n < np; ++n)
          if (parts_all_busy(S / 16, n))
            MM_CHECK(kernel_plan_cost(kc, 2, 16, 1, S, n, 256, Variant::kWave, kGfx950, true) >
                     kGfx950.format_split_slack * best);
      }
    // the format kernels' merge is priced in its spread shape (formats.spread_merge): at B 4, H 16, 22 parts the
    // a16w8 shape (cs 1, 2 waves per row: 32 workgroups, 3 iterations of loads) becomes a (row, quarter) per
    // 4-wave workgroup (256, one iteration), which the planner prices below the a16w8 shape; a merge that fills
    // the CUs already (B 256) keeps its shape and its price
    {
      const MergeShape a = merge_shape(64, 22), sp = spread_merge_shape(64, 22, 256, true);
      MM_CHECK(a.cs == 1 && a.wpr == 2 && a.grid == 32 && sp.cs == 4 && sp.wpr == 4 && sp.grid == 256);
      MM_CHECK(merge_cost(64, 22, 256, 0.0, kGfx950, 4.0, true) < merge_cost(64, 22, 256, 0.0, kGfx950, 4.0, false));
      const MergeShape b = merge_shape(4096, 2), bs = spread_merge_shape(4096, 2, 256, true);
      MM_CHECK(b.grid >= 256 && bs.cs == b.cs && bs.wpr == b.wpr && bs.grid == b.grid);
      MM_CHECK(merge_cost(4096, 2, 256, 0.0, kGfx950, 4.0, true) == merge_cost(4096, 2, 256, 0.0, kGfx950, 4.0, false));
      // gfx950 (merge_one_wave_quarters): up to 16 parts and two waves a SIMD, one wave a (row, quarter) in
      // one-wave workgroups (B 32, 6 parts: 2048 of them); at 16 waves a CU (B 64, 4 parts) the whole rows stay;
      // gfx942 keeps its whole rows
      MM_CHECK(kGfx950.merge_one_wave_quarters && !kGfx942.merge_one_wave_quarters);
      MM_CHECK(spread_merge_shape(512, 6, 256, false).cs == 1);
      const MergeShape q = spread_merge_shape(512, 6, 256, true), r = spread_merge_shape(1024, 4, 256, true);
      MM_CHECK(q.cs == 4 && q.wpr == 1 && q.waves == 1 && q.grid == 2048);
      MM_CHECK(r.cs == 1 && r.wpr == 1 && r.grid == merge_shape(1024, 4).grid);
      // nor one whose spread would take more than a round of the CUs (200 rows, 20 parts: 400 (row, quarter)
      // workgroups of 2 waves): its whole rows go to 2-wave workgroups instead, 200 of them (one round), not 100 of 4
      const MergeShape c = merge_shape(200, 20), cspread = spread_merge_shape(200, 20, 256, true);
      MM_CHECK(c.grid < 256 && merge_grid(200, 4, 2) > 256 && cspread.cs == c.cs && cspread.wpr == c.wpr &&
               c.waves == 4 && cspread.waves == 2 && cspread.grid == 2 * c.grid && cspread.grid == 200);
      const KernelCost& kc = kernel_cost("gfx950", "a8w8_w1");
      MM_CHECK(kernel_plan_cost(kc, 4, 16, 1, 1024, 22, 256, Variant::kWave, kGfx950, true) <
               kernel_plan_cost(kc, 4, 16, 1, 1024, 22, 256, Variant::kWave, kGfx950, false));
    }
    // the Q launch is in a8w8's time and independent of the split; the memory term reads its pool's bytes
    KernelCost no_q = kernel_cost("gfx950", "a8w8_w1");
    no_q.call_launches = no_q.call_row_cycles = 0;
    MM_CHECK(kernel_plan_cost(kernel_cost("gfx950", "a8w8_w1"), 2, 16, 1, 1024, 4, 256, Variant::kWave, kGfx950, true) -
                 kernel_plan_cost(no_q, 2, 16, 1, 1024, 4, 256, Variant::kWave, kGfx950, true) >= kMergeLaunchNs);
    // a one-wave workgroup occupies a CU of its own: 16 of them get 16 CUs' share of HBM, not 4
    KernelCost packed = kernel_cost("gfx950", "a16w16_w1");
    packed.workgroup_waves = kWavesPerBlock;
    MM_CHECK(kernel_plan_cost(kernel_cost("gfx950", "a16w16_w1"), 2, 16, 1, 8192, 8, 256, Variant::kWave, kGfx950, true) <
             kernel_plan_cost(packed, 2, 16, 1, 8192, 8, 256, Variant::kWave, kGfx950, true));
    const KernelCost bf16_bytes{1.0, 0.0, 1.0, kernel_cost("gfx950", "a16w16").token_bytes};
    const KernelCost fp4_bytes{1.0, 0.0, 1.0, kernel_cost("gfx950", "mxfp4").token_bytes};
    MM_CHECK(kernel_plan_cost(bf16_bytes, 4096, 16, 1, 8192, 1, 256, Variant::kShared, kGfx950) >
             3 * kernel_plan_cost(fp4_bytes, 4096, 16, 1, 8192, 1, 256, Variant::kShared, kGfx950));
  }
  // Whole rounds: a8w8's one-wave kernel runs 2 workgroups per CU at its measured rate (past 2 its waves wait on
  // the CU's HBM share on the timing model), so at (64, 8192) on 256
  // CUs its parts fill whole rounds of 512 (8 parts, not the 9 or 10 that counted 4 per CU would pick), and
  // a workgroup past a round costs a whole round more.
  {
    const KernelCost& a8 = kernel_cost("gfx950", "a8w8_w1");
    MM_CHECK(a8.cu_workgroups == 2 && kernel_cost("gfx950", "mxfp4_w1").cu_workgroups == 4 &&
             kernel_cost("gfx950", "ws").cu_workgroups == 1);
    const auto [np, ns] = plan_format_parts(64, 16, 1, 8192, 0, kGfx950, "a8w8_w1");
    MM_CHECK(np == 8 && (64 * np) % (256 * 2) == 0 && ns == kernel_plan_cost(a8, 64, 16, 1, 8192, 8, 256, Variant::kWave, kGfx950, true));
    KernelCost four = a8;
    four.cu_workgroups = 4;  // the resident count: 576 workgroups in one round
    auto c = [&](const KernelCost& kc, int64_t n) { return kernel_plan_cost(kc, 64, 16, 1, 8192, n, 256, Variant::kWave, kGfx950, true); };
    MM_CHECK(c(a8, 9) > c(a8, 8) && c(four, 9) < c(four, 8));
  }
  // A short hint never splits below one tile per part.
  MM_CHECK(plan(1, 16, 1, 16).nparts == 1);
  MM_CHECK(plan(1, 16, 1, 40).nparts <= 3);

  if (mm_host::failures == 0) std::printf("mla planner: all checks passed\n");
  return mm_host::exit_code();
}
