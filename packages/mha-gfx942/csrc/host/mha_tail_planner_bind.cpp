// Python binding of the tail KV-split planner (mha_tail_planner.hpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "mha_tail_planner.hpp"

namespace py = pybind11;
using namespace moonmath::mha;

void register_tail_planner(py::module_& m) {
  py::class_<TailPlan>(m, "TailPlan")
      .def_readonly("n_work", &TailPlan::n_work)
      .def_readonly("n_dense", &TailPlan::n_dense)
      .def_readonly("tail", &TailPlan::tail)
      .def_readonly("parts", &TailPlan::parts)
      .def_readonly("span", &TailPlan::span)
      .def_readonly("span_unsplit", &TailPlan::span_unsplit)
      .def_property_readonly("slots", &TailPlan::slots)
      .def_property_readonly("ws_o_floats", &TailPlan::ws_o_floats)
      .def_property_readonly("ws_ml_floats", &TailPlan::ws_ml_floats)
      .def("__repr__", [](const TailPlan& p) {
        return "TailPlan(n_work=" + std::to_string(p.n_work) + ", n_dense=" + std::to_string(p.n_dense) +
               ", tail=" + std::to_string(p.tail) + ", parts=" + std::to_string(p.parts) + ")";
      });
  m.def("plan_tail", &plan_tail, py::arg("sq"), py::arg("skv"), py::arg("bh"), py::arg("cus"),
        py::arg("enabled") = true, py::arg("min_kv_blocks") = kDefaultMinKvBlocks,
        py::arg("lo_shift") = -config::kUnbounded, py::arg("hi_shift") = config::kUnbounded,
        "The dense tail KV-split plan for q length sq, kv length skv, bh = batch*heads on `cus` CUs; lo_shift, "
        "hi_shift: the window (row i sees keys i + lo_shift .. i + hi_shift).");
  m.def("item_kv_blocks", &item_kv_blocks, py::arg("qb"), py::arg("sq"), py::arg("skv"),
        py::arg("lo_shift") = -config::kUnbounded, py::arg("hi_shift") = config::kUnbounded,
        "The kv blocks q block qb's item runs under the window.");
  m.def("split_schedule", &split_schedule, py::arg("plan"), py::arg("nqb"));
  m.def("merge_table", &merge_table, py::arg("plan"), py::arg("nqb"));
  m.def("dense_order", &dense_order, py::arg("plan"), py::arg("nqb"), py::arg("sq"), py::arg("skv"),
        py::arg("lo_shift") = -config::kUnbounded, py::arg("hi_shift") = config::kUnbounded,
        "The feature dense launch's item per workgroup id: the most kv blocks first (stable over the swizzle).");
  m.attr("CTA_ROWS") = kCtaRows;
  m.attr("CTA_THREADS") = config::kCtaThreads;
  m.attr("KV_BLOCK") = kKvBlock;
  m.attr("MERGE_ROWS_PER_CTA") = config::kMergeRowsPerCta;
  m.def("merge_rows_per_cta", &config::merge_rows_per_cta, py::arg("head_dim"),
        "q rows per merge workgroup of head dim head_dim (the merge grid: CTA_ROWS / this per tail item).");
  m.attr("DEFAULT_MIN_KV_BLOCKS") = kDefaultMinKvBlocks;
  m.attr("ITEM_OVERHEAD_BLOCKS") = kItemOverheadBlocks;
  m.attr("MERGE_OVERHEAD_BLOCKS") = kMergeOverheadBlocks;
  m.attr("MAX_SPLIT_ROUNDS") = kMaxSplitRounds;
  m.attr("UNBOUNDED") = config::kUnbounded;
}
