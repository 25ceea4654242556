// The package's host module: pure C++ planners and helpers (no HIP types), bound with pybind11.
#include <pybind11/pybind11.h>

void register_merge(pybind11::module_& m);
void register_mla_planner(pybind11::module_& m);
void register_mla_args(pybind11::module_& m);

PYBIND11_MODULE(_C, m) {
  m.doc() = "moonmath_mla_decode host helpers";
  register_merge(m);
  register_mla_planner(m);
  register_mla_args(m);
}
