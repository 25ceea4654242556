// The package's host module: pure C++ planners and helpers (no HIP types), bound with pybind11.
#include <pybind11/pybind11.h>

void register_moe_planners(pybind11::module_& m);
void register_moe_planners_gfx950(pybind11::module_& m);

PYBIND11_MODULE(_C, m) {
  m.doc() = "moonmath_mxfp4_moe host helpers";
  register_moe_planners(m);
  register_moe_planners_gfx950(m);
}
