#include <pybind11/pybind11.h>

#include "merge_plan.hpp"

namespace py = pybind11;

void register_merge(py::module_& m) {
  using namespace moonmath::mla;
  m.attr("MERGE_MAX_RANKS") = kMergeMaxRanks;
  m.attr("MERGE_MAX_ROWS") = kMergeMaxRows;
  m.def("plan_merge", [](int64_t rows) {
    MergeLaunch l = plan_merge(rows);
    return py::make_tuple(l.grid, l.block);
  }, py::arg("rows"), "(grid, block) of the merge kernel for `rows` = T*H rows");
}
