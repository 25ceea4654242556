// The package's host module: pure C++ planners and helpers (no HIP types), bound with pybind11.
#include <pybind11/pybind11.h>

void register_tail_planner(pybind11::module_& m);

PYBIND11_MODULE(_C, m) {
  m.doc() = "moonmath_mha_gfx942 host helpers";
  register_tail_planner(m);
}
