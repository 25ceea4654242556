// pybind11 bindings of the gfx942 MLA decode planner (mla_planner.hpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

#include <string>

#include "mla_planner.hpp"

namespace py = pybind11;

// The machine model of `arch`, or Python's ValueError naming it.
static const moonmath::mla::Machine* machine_or_value_error(const std::string& arch) {
  try {
    return &moonmath::mla::machine_for(arch);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
}

void register_mla_planner(py::module_& m) {
  using moonmath::mla::Plan;
  py::class_<Plan>(m, "MlaPlan", "Launch configuration of mla_decode_a16w8 (gfx942); a function of shapes only.")
      .def_readonly("batch", &Plan::batch)
      .def_readonly("heads", &Plan::heads)
      .def_readonly("q_len", &Plan::q_len)
      .def_readonly("rows", &Plan::rows)
      .def_readonly("n_rt", &Plan::n_rt)
      .def_readonly("nparts", &Plan::nparts)
      .def_property_readonly("variant", [](const Plan& p) { return std::string(p.variant); })
      .def_readonly("waves", &Plan::waves)
      .def_readonly("grid", &Plan::grid)
      .def_readonly("block", &Plan::block)
      .def_readonly("merge_grid", &Plan::merge_grid)
      .def_readonly("merge_waves", &Plan::merge_waves)
      .def_readonly("merge_wpr", &Plan::merge_wpr)
      .def_readonly("merge_cs", &Plan::merge_cs)
      .def_readonly("balanced", &Plan::balanced)
      .def_readonly("ws_o_floats", &Plan::ws_o_floats)
      .def_readonly("ws_ml_floats", &Plan::ws_ml_floats)
      .def_readonly("len_used", &Plan::len_used)
      .def_readonly("cost_ns", &Plan::cost_ns)
      .def("__repr__", [](const Plan& p) {
        return "MlaPlan(B=" + std::to_string(p.batch) + ", H=" + std::to_string(p.heads) + ", q_len=" +
               std::to_string(p.q_len) + ", n_rt=" + std::to_string(p.n_rt) + ", nparts=" + std::to_string(p.nparts) +
               ", grid=" + std::to_string(p.grid) + ", merge_grid=" + std::to_string(p.merge_grid) + ")";
      });
  m.def(
      "plan_mla_decode",
      [](int64_t batch, int64_t heads, int64_t q_len, int64_t len_hint, int64_t cus, const std::string& arch) {
        try {
          return moonmath::mla::plan(batch, heads, q_len, len_hint, cus, moonmath::mla::machine_for(arch));
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("batch"), py::arg("heads"), py::arg("q_len"), py::arg("len_hint") = 0, py::arg("cus") = 0,
      py::arg("arch") = "gfx942",
      "Plan mla_decode_a16w8 on `arch` (gfx942, gfx950) from shapes (and an optional tokens-per-request hint);\n"
      "cus <= 0: the arch's full part.");
  m.def("balance_split", &moonmath::mla::balance_split, py::arg("batch"), py::arg("nparts"),
        "Whether a launch shares its parts out by request length on the device.");
  m.def("merge_column_blocks", &moonmath::mla::merge_column_blocks, py::arg("nparts"),
        "Column blocks (1 or 4) of a merge row, each with its own waves, for a given number of parts.");
  m.def("ws_half_partials", &moonmath::mla::ws_half_partials, py::arg("nparts"),
        "Whether the ws kernel writes fp16 partials (O / ln) for this many parts (else fp32).");
  m.def("merge_waves_per_row", &moonmath::mla::merge_waves_per_row, py::arg("nparts"),
        "Waves of the split-KV merge kernel per row for a given number of parts.");
  m.def(
      "mla_cost_constants",
      [](const std::string& arch) {
        const moonmath::mla::Machine* m = nullptr;
        try {
          m = &moonmath::mla::machine_for(arch);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
        using moonmath::mla::kernel_cost;
        std::map<std::string, double> out{{"merge_wave_cycles", m->merge_wave_cycles},
                                          {"merge_iter_cycles", m->merge_iter_cycles},
                                          {"merge_quarter_wave_cycles", m->merge_quarter_wave_cycles},
                                          {"merge_quarter_iter_cycles", m->merge_quarter_iter_cycles},
                                          {"balance_request_cycles", m->balance_request_cycles}};
        for (const auto& row : moonmath::mla::kKernelCosts) {
          const std::string k = row.kernel;
          if (arch != row.arch || k != "ws") continue;  // a16w8's row
          out[k + "_tile_cycles"] = row.cost.tile_cycles;
          out[k + "_part_cycles"] = row.cost.part_cycles;
          if (row.cost.rowtile_cycles > 0) out[k + "_rowtile_cycles"] = row.cost.rowtile_cycles;
          if (row.cost.part_rowtile_cycles > 0) out[k + "_part_rowtile_cycles"] = row.cost.part_rowtile_cycles;
        }
        return out;
      },
      py::arg("arch") = "gfx942",
      "The planner's emulator-calibrated issue-cycle constants (benchmarks/calibrate_mla_planner_emu.py).");
  m.def(
      "mla_format_cost_rows",
      [](const std::string& arch) {
        std::map<std::string, std::map<std::string, double>> out;
        for (const auto& row : moonmath::mla::kKernelCosts) {
          const std::string k = row.kernel;
          if (arch != row.arch || k == "ws") continue;
          out[k] = {{"tile_cycles", row.cost.tile_cycles},
                    {"part_cycles", row.cost.part_cycles},
                    {"token_bytes", row.cost.token_bytes},
                    {"call_launches", row.cost.call_launches},
                    {"call_row_cycles", row.cost.call_row_cycles},
                    {"workgroup_waves", row.cost.workgroup_waves},
                    {"cu_workgroups", row.cost.cu_workgroups}};
        }
        return out;
      },
      py::arg("arch") = "gfx942",
      "The KV-format kernels' rows of the planner's cost table on `arch` (benchmarks/calibrate_mla_formats_emu.py).");
  m.def(
      "plan_mla_format_parts",
      [](const std::string& kernel, int64_t batch, int64_t heads, int64_t q_len, int64_t len_hint, int64_t cus,
         const std::string& arch) {
        try {
          return moonmath::mla::plan_format_parts(batch, heads, q_len, len_hint, cus, moonmath::mla::machine_for(arch),
                                                  kernel);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("kernel"), py::arg("batch"), py::arg("heads"), py::arg("q_len"), py::arg("len_hint") = 0,
      py::arg("cus") = 0, py::arg("arch") = "gfx942",
      "(nparts, modelled ns) of a KV-format kernel's launch ('a16w16', 'a8w8_w1', ...) by its own cost row.");
  m.def(
      "mla_spread_merge_shape",
      [](int64_t total_rows, int64_t nparts, int64_t cus, const std::string& arch) {
        const bool q = machine_or_value_error(arch)->merge_one_wave_quarters;
        const auto ms = moonmath::mla::spread_merge_shape(total_rows, nparts, cus, q);
        return py::make_tuple(ms.cs, ms.wpr, ms.grid);
      },
      py::arg("total_rows"), py::arg("nparts"), py::arg("cus"), py::arg("arch"),
      "(column blocks, waves per (row, block), workgroups) of a KV-format kernel's spread merge.");
  m.def(
      "mla_spread_merge_block_waves",
      [](int64_t total_rows, int64_t nparts, int64_t cus, const std::string& arch) {
        const bool q = machine_or_value_error(arch)->merge_one_wave_quarters;
        return moonmath::mla::spread_merge_shape(total_rows, nparts, cus, q).waves;
      },
      py::arg("total_rows"), py::arg("nparts"), py::arg("cus"), py::arg("arch"),
      "Waves per workgroup of that spread merge.");
  m.def(
      "mla_format_plan_cost",
      [](const std::string& kernel, int64_t batch, int64_t heads, int64_t q_len, int64_t len, int64_t nparts,
         int64_t cus, const std::string& arch) {
        try {
          const auto& mc = moonmath::mla::machine_for(arch);
          return moonmath::mla::kernel_plan_cost(moonmath::mla::kernel_cost(arch, kernel), batch, heads, q_len, len,
                                                 nparts, cus > 0 ? cus : mc.cus,
                                                 moonmath::mla::format_launch_shape(kernel), mc, true);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("kernel"), py::arg("batch"), py::arg("heads"), py::arg("q_len"), py::arg("len"), py::arg("nparts"),
      py::arg("cus") = 0, py::arg("arch") = "gfx942",
      "The planner's modelled time (ns) of a KV-format kernel's launch with a given number of parts.");
  m.def(
      "mla_kernel_tile_tokens",
      [](const std::string& kernel, const std::string& arch) {
        try {
          return moonmath::mla::kernel_cost(arch, kernel).tile_tokens;
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("kernel"), py::arg("arch") = "gfx942",
      "The KV tile (tokens) a part of the kernel is cut in whole tiles of: a part holds ceil(ceil(len / tile) / "
      "nparts) tiles.");
  m.def(
      "mla_plan_cost",
      [](int64_t batch, int64_t heads, int64_t q_len, int64_t len, int64_t nparts, int64_t cus,
         const std::string& variant, const std::string& arch) {
        if (variant != "ws")
          throw py::value_error("mla_plan_cost: variant must be 'ws' (the a16w8 decode kernel), got '" + variant + "'");
        const moonmath::mla::Machine* m = nullptr;
        try {
          m = &moonmath::mla::machine_for(arch);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
        return moonmath::mla::plan_cost(batch, heads, q_len, len, nparts, cus > 0 ? cus : m->cus, *m);
      },
      py::arg("batch"), py::arg("heads"), py::arg("q_len"), py::arg("len"), py::arg("nparts"),
      py::arg("cus") = 0, py::arg("variant") = "ws", py::arg("arch") = "gfx942",
      "The planner's modelled time (ns) of the ws kernel for a given number of KV parts.");
  m.def(
      "mla_merge_cost",
      [](int64_t total_rows, int64_t nparts, double partial_o_bytes, int64_t cus, const std::string& arch) {
        const moonmath::mla::Machine* m = machine_or_value_error(arch);
        return moonmath::mla::merge_cost(total_rows, nparts, cus > 0 ? cus : m->cus, 0.0, *m, partial_o_bytes, true);
      },
      py::arg("total_rows"), py::arg("nparts"), py::arg("partial_o_bytes"), py::arg("cus") = 0,
      py::arg("arch") = "gfx942",
      "The planner's modelled time (ns) of the merge (spread shape, as plan_cost prices it) of total_rows query rows "
      "split into nparts parts, partial O of partial_o_bytes per element (2: the ws kernel's fp16, 4: fp32).");
  m.def(
      "mla_merge_round",
      [](int64_t total_rows, int64_t nparts, double partial_o_bytes, int64_t cus, const std::string& arch) {
        const moonmath::mla::Machine* m = machine_or_value_error(arch);
        const auto r = moonmath::mla::merge_round(total_rows, nparts, cus > 0 ? cus : m->cus, 0.0, *m, partial_o_bytes, true);
        std::map<std::string, double> out{{"per_cu", (double)r.per_cu}, {"rounds", (double)r.rounds},
                                          {"simd_waves", (double)r.simd_waves}, {"fold_waves", (double)r.fold_waves},
                                          {"issue_cycles", r.issue_cycles}, {"cu_bytes", r.cu_bytes},
                                          {"start_cycles", moonmath::mla::kMergeTiming.start_cycles},
                                          {"start_wave_cycles", moonmath::mla::kMergeTiming.start_wave_cycles},
                                          {"fold_cycles", moonmath::mla::kMergeTiming.fold_cycles},
                                          {"iters", (double)r.iters},
                                          {"iter_latency_cycles", moonmath::mla::kMergeTiming.iter_latency_cycles},
                                          {"clock_ghz", m->clock_ghz}, {"cu_bytes_per_ns", r.cu_bytes_per_ns}};
        return out;
      },
      py::arg("total_rows"), py::arg("nparts"), py::arg("partial_o_bytes"), py::arg("cus") = 0,
      py::arg("arch") = "gfx942", "merge_cost's terms (one round's shape and work, and kMergeTiming) for that merge.");
}
