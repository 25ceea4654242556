// The package's host module: pure C++ planners and helpers (no HIP types), bound with pybind11.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "attention_planner.hpp"
#include "paged_planner.hpp"

namespace py = pybind11;
using namespace attn950;

namespace {

py::dict to_dict(const FwdPlan& p) {
  const auto b = p.bytes();
  py::dict d;
  d["plan"] = py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  d["n_items"] = p.args.n_items;
  d["n_merge"] = p.args.n_merge;
  d["n_slots"] = p.args.n_slots;
  d["max_parts"] = p.n_parts_max();
  py::list items;
  for (const auto& it : p.items)
    items.append(py::make_tuple(it.batch, it.q_tok0, it.q_len, it.k_tok0, it.k_len, it.q_row0, it.kv_begin, it.kv_end,
                                it.slot));
  d["items"] = items;
  return d;
}

PlanOptions options(int32_t num_cus, int32_t min_part_blocks, int32_t max_parts) {
  if (num_cus < 1 || min_part_blocks < 1 || max_parts < 1)
    throw std::invalid_argument("num_cus, min_part_blocks and max_parts must be >= 1");
  PlanOptions o;
  o.num_cus = num_cus;
  o.min_part_blocks = min_part_blocks;
  o.max_parts = max_parts;
  return o;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "moonmath_attention_gfx950 host helpers: the forward planner";
  m.attr("TILE_ROWS") = kTileRows;
  m.attr("KV_BLOCK") = kKvBlock;
  m.attr("ARGS_BYTES") = (int)sizeof(AttnFwdArgs);
  m.attr("ITEM_BYTES") = (int)sizeof(AttnWorkItem);
  m.attr("MERGE_BYTES") = (int)sizeof(AttnMergeItem);
  {
    const AttnSplitPolicy d;
    py::dict policy;
    policy["num_cus"] = d.num_cus;
    policy["min_part_blocks"] = d.min_part_blocks;
    policy["max_parts"] = d.max_parts;
    m.attr("DEFAULT_SPLIT_POLICY") = policy;
  }
  // The buffer of a device-written plan (csrc/shared/attention_fwd_plan.h): capacities and offsets.
  m.def(
      "device_plan_layout",
      [](int32_t batch, int32_t max_q, int32_t total_q, int32_t max_k, int32_t heads_q, int32_t num_cus,
         int32_t min_part_blocks, int32_t max_parts) {
        if (batch < 0 || max_q < 0 || total_q < 0 || max_k < 0 || heads_q < 1)
          throw std::invalid_argument("device_plan_layout: batch, max_q, total_q, max_k must be >= 0, heads_q >= 1");
        const AttnPlanCaps c = device_plan_caps(batch, max_q, total_q, max_k, heads_q,
                                                options(num_cus, min_part_blocks, max_parts));
        py::dict d;
        d["tiles"] = c.tiles;
        d["items"] = c.items;
        d["merges"] = c.merges;
        d["slots"] = c.slots;
        d["merges_offset"] = device_plan_merges_offset(c);
        d["counts_offset"] = device_plan_counts_offset(c);
        d["bytes"] = device_plan_bytes(c);
        return d;
      },
      py::arg("batch"), py::arg("max_q"), py::arg("total_q"), py::arg("max_k"), py::arg("heads_q"),
      py::arg("num_cus") = 256, py::arg("min_part_blocks") = 4, py::arg("max_parts") = 16);
  m.def(
      "plan_forward_batch",
      [](int32_t B, int32_t Sq, int32_t Skv, int32_t heads_q, int32_t heads_kv, bool causal, bool lse, float scale_log2,
         const std::vector<int64_t>& strides, int32_t num_cus, int32_t min_part_blocks, int32_t max_parts, float softcap, int32_t window_left, int32_t window_right) {
        return to_dict(plan_forward(batch_sequences(B, Sq, Skv), heads_q, heads_kv, causal, lse, scale_log2, strides,
                                    options(num_cus, min_part_blocks, max_parts), softcap, window_left, window_right));
      },
      py::arg("B"), py::arg("Sq"), py::arg("Skv"), py::arg("heads_q"), py::arg("heads_kv"), py::arg("causal"),
      py::arg("lse"), py::arg("scale_log2"), py::arg("strides"), py::arg("num_cus") = 256,
      py::arg("min_part_blocks") = 4, py::arg("max_parts") = 16, py::arg("softcap") = 0.f,
      py::arg("window_left") = -1, py::arg("window_right") = -1);
  m.def(
      "plan_forward_varlen",
      [](const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k, int32_t heads_q, int32_t heads_kv,
         bool causal, bool lse, float scale_log2, const std::vector<int64_t>& strides, int32_t num_cus,
         int32_t min_part_blocks, int32_t max_parts, float softcap, int32_t window_left, int32_t window_right) {
        return to_dict(plan_forward(varlen_sequences(cu_q, cu_k), heads_q, heads_kv, causal, lse, scale_log2, strides,
                                    options(num_cus, min_part_blocks, max_parts), softcap, window_left, window_right));
      },
      py::arg("cu_q"), py::arg("cu_k"), py::arg("heads_q"), py::arg("heads_kv"), py::arg("causal"), py::arg("lse"),
      py::arg("scale_log2"), py::arg("strides"), py::arg("num_cus") = 256, py::arg("min_part_blocks") = 4,
      py::arg("max_parts") = 16, py::arg("softcap") = 0.f,
      py::arg("window_left") = -1, py::arg("window_right") = -1);
  // Paged K/V (issue 13): strides k/v (batch) are the page strides; page0[b] = sequence b's first page-list entry.
  m.def(
      "plan_forward_paged",
      [](const std::vector<int32_t>& cu_q, const std::vector<int32_t>& k_lens, const std::vector<int32_t>& page0,
         int32_t heads_q, int32_t heads_kv, bool causal, bool lse, float scale_log2, const std::vector<int64_t>& strides,
         int32_t num_cus, int32_t min_part_blocks, int32_t max_parts, float softcap, int32_t window_left, int32_t window_right) {
        return to_dict(plan_forward(paged_sequences(cu_q, k_lens, page0), heads_q, heads_kv, causal, lse, scale_log2,
                                    strides, options(num_cus, min_part_blocks, max_parts), softcap, window_left, window_right));
      },
      py::arg("cu_q"), py::arg("k_lens"), py::arg("page0"), py::arg("heads_q"), py::arg("heads_kv"), py::arg("causal"),
      py::arg("lse"), py::arg("scale_log2"), py::arg("strides"), py::arg("num_cus") = 256,
      py::arg("min_part_blocks") = 4, py::arg("max_parts") = 16, py::arg("softcap") = 0.f,
      py::arg("window_left") = -1, py::arg("window_right") = -1);
}
