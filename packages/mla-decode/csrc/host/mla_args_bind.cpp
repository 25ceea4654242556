// _C.pack_mla_decode_args: the bytes of one MlaDecodeArgs (csrc/device/mla_decode_args.hpp, the struct the
// decode kernels take by value), so the layout is written once, in C++, for the host and the device.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>

#include "mla_decode_args.hpp"

namespace py = pybind11;

void register_mla_args(py::module_& m) {
  m.def(
      "pack_mla_decode_args",
      [](uint64_t q_lat, uint64_t q_pe, uint64_t pool, uint64_t o_lat, uint64_t seq_lens, uint64_t kv_indices,
         uint64_t kv_indptr, uint64_t glen, uint64_t lse, uint64_t ws_o, uint64_t ws_ml, uint64_t kv_scale_dev,
         uint32_t B, uint32_t H, uint32_t q_len, uint32_t nparts, uint32_t pool_slots, uint32_t n_idx,
         uint32_t cp_rank, uint32_t cp_world, uint32_t flags, uint32_t c_qk_bits, uint32_t o_scale_bits,
         uint32_t scale_log2e_bits) {
        mla::MlaDecodeArgs a{q_lat, q_pe, pool, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o, ws_ml,
                             kv_scale_dev, B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags,
                             c_qk_bits, o_scale_bits, scale_log2e_bits};
        return py::bytes(reinterpret_cast<const char*>(&a), sizeof(a));
      },
      py::arg("q_lat"), py::arg("q_pe"), py::arg("pool"), py::arg("o_lat"), py::arg("seq_lens"),
      py::arg("kv_indices"), py::arg("kv_indptr"), py::arg("glen"), py::arg("lse"), py::arg("ws_o"),
      py::arg("ws_ml"), py::arg("kv_scale_dev"), py::arg("B"), py::arg("H"), py::arg("q_len"), py::arg("nparts"),
      py::arg("pool_slots"), py::arg("n_idx"), py::arg("cp_rank"), py::arg("cp_world"), py::arg("flags"),
      py::arg("c_qk_bits"), py::arg("o_scale_bits"), py::arg("scale_log2e_bits"),
      "The bytes of one MlaDecodeArgs (the decode kernels' by-value argument); pointers as device addresses.");
  m.attr("MLA_DECODE_ARGS_BYTES") = sizeof(mla::MlaDecodeArgs);
}
