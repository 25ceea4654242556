// pybind11 bindings: moonmath_emu._core
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "exec.hpp"

namespace py = pybind11;
using namespace mmemu;

void register_timing(py::module_& m);  // timing_bindings.cpp

static py::dict kernel_info(const Module& m, const std::string& name) {
  const KernelDesc* k = m.co().find(name);
  if (!k) throw EmuError("no kernel named '" + name + "' in the code object");
  py::dict d;
  int agpr = k->md_agpr >= 0 ? k->md_agpr : 0;
  d["vgpr"] = k->md_vgpr >= 0 ? k->md_vgpr : k->vgpr_count;
  d["agpr"] = agpr;
  d["accum_offset"] = k->accum_offset;
  d["sgpr"] = k->md_sgpr >= 0 ? k->md_sgpr : (k->sgpr_granules + 1) * 8;
  d["lds"] = k->group_segment_fixed_size;
  d["scratch"] = k->private_segment_fixed_size;
  d["kernarg_size"] = std::max(k->kernarg_size, k->md_kernarg_size);
  d["wavefront_size"] = k->md_wavefront;
  d["vgpr_granulated"] = k->vgpr_count;
  d["user_sgpr_count"] = k->user_sgpr_count;
  d["workgroup_id"] = py::make_tuple(k->wg_id_x, k->wg_id_y, k->wg_id_z);
  d["workitem_id_vgprs"] = k->vgpr_workitem_id + 1;
  d["float_round_mode_32"] = k->float_round_32;
  d["float_round_mode_16_64"] = k->float_round_16_64;
  d["float_denorm_mode_32"] = k->float_denorm_32;
  d["float_denorm_mode_16_64"] = k->float_denorm_16_64;
  d["ieee_mode"] = k->ieee_mode;
  d["dx10_clamp"] = k->dx10_clamp;
  d["kernel_code_properties"] = py::dict(
      py::arg("private_segment_buffer") = k->kp_private_segment_buffer, py::arg("dispatch_ptr") = k->kp_dispatch_ptr,
      py::arg("queue_ptr") = k->kp_queue_ptr, py::arg("kernarg_segment_ptr") = k->kp_kernarg_segment_ptr,
      py::arg("dispatch_id") = k->kp_dispatch_id, py::arg("flat_scratch_init") = k->kp_flat_scratch_init,
      py::arg("private_segment_size") = k->kp_private_segment_size, py::arg("wavefront_size32") = k->kp_wavefront_size32,
      py::arg("uses_dynamic_stack") = k->kp_dynamic_stack);
  d["kernarg_preload"] = py::make_tuple(k->kernarg_preload_offset, k->kernarg_preload_length);
  d["rsrc"] = py::make_tuple(k->rsrc1, k->rsrc2, k->rsrc3);
  d["code_size"] = k->code_size;
  d["entry"] = k->entry_vaddr;
  py::list args;
  for (auto& a : k->args) {
    py::dict ad;
    ad["name"] = a.name; ad["offset"] = a.offset; ad["size"] = a.size; ad["value_kind"] = a.value_kind;
    args.append(ad);
  }
  d["args"] = args;
  return d;
}

PYBIND11_MODULE(_core, m) {
  m.doc() = "moonmath-emu core (C++): CDNA3/CDNA4 code-object emulator";
  static py::exception<EmuError> emu_error(m, "EmuError", PyExc_RuntimeError);
  static py::exception<MemoryViolation> mem_violation(m, "MemoryViolation", emu_error.ptr());
  static py::exception<HazardError> hazard_error(m, "HazardError", emu_error.ptr());
  static py::exception<UnsupportedInstruction> unsupported(m, "UnsupportedInstruction", emu_error.ptr());
  static py::exception<LaneError> lane_error(m, "LaneError", emu_error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const MemoryViolation& e) { py::set_error(mem_violation, e.what());
    } catch (const HazardError& e) { py::set_error(hazard_error, e.what());
    } catch (const UnsupportedInstruction& e) { py::set_error(unsupported, e.what());
    } catch (const LaneError& e) { py::set_error(lane_error, e.what());
    } catch (const EmuError& e) { py::set_error(emu_error, e.what()); }
  });

  py::class_<Module>(m, "Module")
      .def(py::init([](py::bytes b) {
        std::string s = b;
        return new Module(reinterpret_cast<const uint8_t*>(s.data()), s.size());
      }))
      .def_property_readonly("arch", [](const Module& mo) { return mo.co().arch; })
      .def_property_readonly("kernels", [](const Module& mo) {
        std::vector<std::string> v;
        for (auto& k : mo.co().kernels) v.push_back(k.name);
        return v;
      })
      .def("kernel_info", &kernel_info)
      .def("disassemble", &Module::disassemble)
      .def("opcodes", &Module::opcodes)
      .def("_launch", [](Module& mo, const std::string& name, std::vector<uint32_t> grid, std::vector<uint32_t> block,
                         py::list args, uint32_t dynamic_lds, int hazard_mode, unsigned threads, int lane_mode) {
        LaunchParams P;
        for (int i = 0; i < 3; i++) { P.grid[i] = grid.at(i); P.block[i] = block.at(i); }
        P.dynamic_lds = dynamic_lds; P.check_hazards = hazard_mode != 0; P.hazards_warn = hazard_mode == 2; P.threads = threads;
        P.check_lanes = lane_mode != 0; P.lanes_warn = lane_mode == 2;
        for (auto item : args) {
          py::tuple t = item.cast<py::tuple>();
          std::string kind = t[0].cast<std::string>();
          LaunchArg a;
          if (kind == "ptr") {
            a.kind = LaunchArg::PTR; a.u = t[1].cast<uint64_t>();
            a.has_region = true; a.rbase = t[2].cast<uint64_t>(); a.rsize = t[3].cast<uint64_t>();
          } else if (kind == "int") {
            a.kind = LaunchArg::INT; a.u = t[1].cast<uint64_t>();
          } else if (kind == "float") {
            a.kind = LaunchArg::FLOAT; a.f = t[1].cast<double>();
          } else if (kind == "bytes") {  // a by-value struct: (bytes, [(storage base, size), ...])
            a.kind = LaunchArg::BYTES; a.bytes = t[1].cast<std::string>();
            for (auto r : t[2].cast<py::list>()) {
              py::tuple rt = r.cast<py::tuple>();
              a.regions.emplace_back(rt[0].cast<uint64_t>(), rt[1].cast<uint64_t>());
            }
          } else throw EmuError("bad argument kind " + kind);
          P.args.push_back(a);
        }
        Counters c;
        {
          py::gil_scoped_release release;
          c = mo.launch(name, P);
        }
        py::dict d;
        d["wave_instructions"] = c.wave_instructions; d["valu"] = c.valu; d["trans"] = c.trans; d["salu"] = c.salu;
        d["smem"] = c.smem; d["vmem"] = c.vmem; d["ds"] = c.ds; d["waitcnt"] = c.waitcnt; d["barrier"] = c.barrier;
        d["mfma"] = c.mfma; d["mfma_by_opcode"] = c.mfma_by_opcode; d["branch"] = c.branch; d["waves"] = c.waves;
        d["workgroups"] = c.workgroups; d["hazards"] = c.hazards;
        d["vmem_load_bytes"] = c.vmem_load_bytes; d["vmem_store_bytes"] = c.vmem_store_bytes;
        d["smem_bytes"] = c.smem_bytes; d["lds_read_bytes"] = c.lds_read_bytes; d["lds_write_bytes"] = c.lds_write_bytes;
        d["global_lines"] = c.global_lines;
        d["lanes"] = c.lanes; d["mfma_partial_exec"] = c.mfma_partial_exec;
        d["pc_counts"] = c.pc_counts;
        return d;
      });
  register_timing(m);  // the timing model (timing.hpp)
  m.def("supported_opcodes", [](const std::string& arch) {
    if (arch != "gfx942" && arch != "gfx950") throw EmuError("unknown arch '" + arch + "' (gfx942 or gfx950)");
    return supported_opcodes(arch == "gfx950");
  });
}
