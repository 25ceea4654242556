// pybind11 bindings of the gfx950 MXFP4 MoE planners (moe_planners_gfx950.hpp); called from module.cpp.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>

#include "moe_planners_gfx950.hpp"

namespace py = pybind11;

void register_moe_planners_gfx950(py::module_& m) {
  using namespace moonmath::moe;
  m.attr("GFX950_NUM_CUS") = gfx950::kNumCus;
  m.attr("GFX950_LDS_BYTES") = gfx950::kLdsBytes;
  m.def("gfx950_workgroups_per_cu", &gfx950::workgroups_per_cu, py::arg("vgprs"), py::arg("lds_bytes"),
        py::arg("lds_bytes_per_cu") = gfx950::kLdsBytes,
        "8-wave workgroups one CU holds (by VGPRs and LDS); 0 when one does not fit.");
  m.def("gfx950_mxfp4_moe_gateup_block_m", &gfx950::gateup_block_m, py::arg("num_valid_tokens"),
        py::arg("num_active_experts"), "M tile (16, 32 or 48) of the gfx950 gate/up GEMM.");
  m.def("gfx950_mxfp4_moe_layer_block_m", &gfx950::layer_block_m, py::arg("expert_rows"), py::arg("num_cus"),
        "M tile (16, 32 or 48) of the one-launch a4w4 layer from the slots routed to each expert.");
  m.def(
      "gfx950_mxfp4_moe_down_plan",
      [](int64_t nvt, int64_t n_active, int64_t N, int64_t K, int64_t m_blocks, int64_t num_cus, int64_t vgprs,
         int64_t lds) {
        DownPlan p = gfx950::down_plan(nvt, n_active, N, K, m_blocks, num_cus, vgprs, lds);
        return std::make_tuple(p.block_m, p.nt, p.n_steps);
      },
      py::arg("num_valid_tokens"), py::arg("num_active_experts"), py::arg("N"), py::arg("K"), py::arg("m_blocks"),
      py::arg("num_cus"), py::arg("vgprs"), py::arg("lds_bytes"),
      "(block_m, nt, n_steps) of the gfx950 down GEMM; (0, 0, 0) when it does not serve K.");
}
