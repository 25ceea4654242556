// pybind11 bindings of the MXFP4 MoE planners (moe_planners.hpp); called from module.cpp.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>

#include "moe_planners.hpp"

namespace py = pybind11;

void register_moe_planners(py::module_& m) {
  using namespace moonmath::moe;
  m.def("mxfp4_moe_gateup_block_m", &gateup_block_m, py::arg("num_valid_tokens"), py::arg("num_active_experts"),
        "M tile (16, 32 or 48) of the gate/up GEMM for this many rows over this many active experts.");
  m.def("mxfp4_moe_gateup_supports_k", &gateup_supports_k, py::arg("K"),
        "Whether the gate/up GEMM serves this K (a positive multiple of 32).");
  m.def("mxfp4_moe_down_block_m", &down_block_m, py::arg("num_valid_tokens"), py::arg("num_active_experts"),
        py::arg("K"), "M tile (16, 32 or 64) of the down GEMM, or 0 when it does not serve K (384/512/768 only).");
  m.def("mxfp4_moe_down_nt", &down_nt, py::arg("num_valid_tokens"), py::arg("num_active_experts"),
        "Column tiles per lane group (1 or 2) of the down GEMM.");
  m.def("mxfp4_moe_down_bn", &down_bn, py::arg("nt"), "Columns per down column step: 128 * nt.");
  m.attr("MAX_U32") = py::int_(kMaxU32);
  m.attr("MAX_I32") = py::int_(kMaxI32);
  m.attr("MAX_CUS") = py::int_(kMaxCus);
  m.def("mxfp4_moe_down_n_steps", &down_n_steps, py::arg("num_m_blocks"), py::arg("N"), py::arg("num_cus"),
        py::arg("block_m"), py::arg("nt"), "Column steps each down CTA sweeps.");
  m.def(
      "mxfp4_moe_down_plan",
      [](int64_t nvt, int64_t n_active, int64_t N, int64_t K, int64_t m_blocks, int64_t num_cus) {
        DownPlan p = down_plan(nvt, n_active, N, K, m_blocks, num_cus);
        return std::make_tuple(p.block_m, p.nt, p.n_steps);
      },
      py::arg("num_valid_tokens"), py::arg("num_active_experts"), py::arg("N"), py::arg("K"), py::arg("num_m_blocks"),
      py::arg("num_cus"), "(block_m, nt, n_steps) of the down GEMM; (0, 0, 0) when it does not serve K.");
}
