// pybind11 bindings of the timing model (moonmath_emu._core.timed_launch / timing_config_defaults);
// the Python entry point is moonmath_emu.timing.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "exec.hpp"
#include "timing.hpp"

namespace py = pybind11;
using namespace mmemu;

// every TimingConfig field, by name (so Python can read the defaults and override any of them)
#define TIMING_FIELDS(X)                                                                                   \
  X(cus_per_chip) X(xcds) X(clock_mhz) X(simds_per_cu) X(issue_period) X(vgprs_per_simd_lane)                 \
  X(max_waves_per_simd) X(lds_bytes_per_cu) X(lds_banks) X(lds_bytes_per_clk) X(valu_cycles) X(trans_cycles)  \
  X(valu_latency) X(trans_latency) X(mfma_extra_latency) X(salu_latency) X(branch_taken_cycles)              \
  X(barrier_latency) X(nop_cycles_per_wait_state) X(wg_launch_cycles) X(lds_latency) X(smem_latency)          \
  X(vmem_bytes_per_clk) X(l1_bytes) X(l1_ways) X(line_bytes) X(l1_latency) X(l2_bytes) X(l2_ways)             \
  X(l2_latency) X(mall_latency) X(hbm_latency) X(hbm_bytes_per_s) X(l2_bytes_per_clk_per_xcd)                 \
  X(mall_hit_rate) X(kernel_launch_us) X(mfma_coexec) X(lds_b128_read_phases) X(busy_cus)

static py::dict config_to_dict(const TimingConfig& c) {
  py::dict d;
#define X(f) d[#f] = c.f;
  TIMING_FIELDS(X)
#undef X
  return d;
}

static TimingConfig config_from_dict(const py::dict& d) {
  TimingConfig c;
  for (auto item : d) {
    std::string k = item.first.cast<std::string>();
    bool found = false;
#define X(f) if (k == #f) { c.f = item.second.cast<decltype(c.f)>(); found = true; }
    TIMING_FIELDS(X)
#undef X
    if (!found) throw EmuError("unknown timing config field '" + k + "'");
  }
  return c;
}

void register_timing(py::module_& m) {
  m.def("timing_config_defaults", [] { return config_to_dict(TimingConfig()); });
  m.def("timed_launch", [](Module& mo, const std::string& name, std::vector<uint32_t> grid, std::vector<uint32_t> block,
                           py::list args, uint32_t dynamic_lds, std::vector<std::vector<std::array<uint32_t, 3>>> cus,
                           int slots, py::dict cfgd, bool run_untraced) {
    TimingConfig cfg = config_from_dict(cfgd);
    LaunchParams P;
    for (int i = 0; i < 3; i++) { P.grid[i] = grid.at(i); P.block[i] = block.at(i); }
    P.dynamic_lds = dynamic_lds; P.check_hazards = false;
    for (auto item : args) {  // same argument tuples as Module._launch
      py::tuple t = item.cast<py::tuple>();
      std::string kind = t[0].cast<std::string>();
      LaunchArg a;
      if (kind == "ptr") {
        a.kind = LaunchArg::PTR; a.u = t[1].cast<uint64_t>();
        a.has_region = true; a.rbase = t[2].cast<uint64_t>(); a.rsize = t[3].cast<uint64_t>();
      } else if (kind == "int") { a.kind = LaunchArg::INT; a.u = t[1].cast<uint64_t>();
      } else if (kind == "float") { a.kind = LaunchArg::FLOAT; a.f = t[1].cast<double>();
      } else if (kind == "bytes") { a.kind = LaunchArg::BYTES; a.bytes = t[1].cast<std::string>();
        for (auto r : t[2].cast<py::list>()) {
          py::tuple rt = r.cast<py::tuple>();
          a.regions.emplace_back(rt[0].cast<uint64_t>(), rt[1].cast<uint64_t>());
        }
      } else throw EmuError("bad argument kind " + kind);
      P.args.push_back(a);
    }
    std::vector<std::array<uint32_t, 3>> wanted;
    for (auto& c : cus) for (auto& w : c) wanted.push_back(w);
    Tracer tr(cfg, mo.co().gfx950, wanted, run_untraced);
    std::vector<std::pair<uint64_t, uint64_t>> buffers;
    for (auto& a : P.args) {
      if (a.kind == LaunchArg::PTR && a.has_region) buffers.emplace_back(a.rbase, a.rsize);
      for (auto& r : a.regions) buffers.push_back(r);
    }
    tr.set_buffers(buffers);
    P.trace = &tr;
    TimingReport rep;
    Counters cnt;
    {
      py::gil_scoped_release release;
      cnt = mo.launch(name, P);
      std::vector<std::vector<int>> idx(cus.size());
      for (size_t c = 0; c < cus.size(); c++)
        for (auto& w : cus[c]) {
          int found = -1;
          for (size_t i = 0; i < tr.wgs.size(); i++)
            if (tr.wgs[i].id[0] == w[0] && tr.wgs[i].id[1] == w[1] && tr.wgs[i].id[2] == w[2]) { found = (int)i; break; }
          if (found < 0) throw EmuError("workgroup (" + std::to_string(w[0]) + "," + std::to_string(w[1]) + "," +
                                        std::to_string(w[2]) + ") is not in the grid");
          idx[c].push_back(found);
        }
      rep = simulate(tr, cfg, idx, slots);
    }
    py::dict d;
    d["cu_cycles"] = rep.cu_cycles; d["wg_spans"] = rep.wg_spans; d["stall"] = rep.stall;
    d["pipe_busy"] = rep.pipe_busy; d["mem"] = rep.mem; d["instructions"] = rep.instructions;
    d["stall_by_pc"] = rep.stall_by_pc; d["dep_by_pair"] = rep.dep_by_pair;
    d["emulated_wave_instructions"] = cnt.wave_instructions; d["traced_workgroups"] = tr.wgs.size();
    uint64_t traced = 0;
    for (auto& g : tr.wgs) for (auto& w : g.waves) traced += w.recs.size();
    d["traced_instructions"] = traced;
    d["config"] = config_to_dict(cfg);
    return d;
  });
}
