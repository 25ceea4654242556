// gfx950 attention forward over paged K/V caches: the pipeline of attention_fwd.hpp with the paged
// partitioner of attention_fwd_paged.hpp. Grid (n_items, heads_q), 512 threads, the same plan buffer
// as the dense kernels (k_batch / v_batch = page strides, k_tok0 = first page-list entry).
#include "attention_fwd_paged.hpp"

namespace {

template <int Dqk, int Dv, bool Softcap = false, bool Window = false, bool Sinks = false>
MM_DEVICE void run_paged(const attn950::AttnFwdArgs* plan, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                         uint16_t* o, float* lse, float* ws_o, float* ws_ml, const int32_t* pages, uint32_t k_bytes,
                         uint32_t v_bytes, int32_t page_shift, const float* sinks = nullptr) {
  using Shape = attn950::FwdShape<Dqk, Dv, Softcap, Window, Sinks>;
  MM_LDS __attribute__((aligned(16))) uint8_t lds[Shape::kLdsBytes];
  const attn950::FwdPointers ptr{q, k, v, o, lse, ws_o, ws_ml, sinks};
  const attn950::PagedKv pk{pages, k_bytes, v_bytes, page_shift};
  attn950::attention_fwd<Shape, attn950::PagedTile<Shape>>(plan, ptr, (attn950::lds_u8*)lds, pk);
}

}  // namespace

// (Dqk, Dv) = (128, 128), page_size >= 8
MM_KERNEL MM_LAUNCH_BOUNDS(512) void attn_fwd_paged_d128(const attn950::AttnFwdArgs* __restrict__ plan,
                                                         const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                         uint16_t* o, float* lse, float* ws_o, float* ws_ml,
                                                         const int32_t* pages, uint32_t k_bytes, uint32_t v_bytes,
                                                         int32_t page_shift) {
  run_paged<128, 128>(plan, q, k, v, o, lse, ws_o, ws_ml, pages, k_bytes, v_bytes, page_shift);
}

// (Dqk, Dv) = (192, 128): MLA prefill against a paged cache, page_size >= 16
MM_KERNEL MM_LAUNCH_BOUNDS(512) void attn_fwd_paged_d192_128(const attn950::AttnFwdArgs* __restrict__ plan,
                                                             const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                             uint16_t* o, float* lse, float* ws_o, float* ws_ml,
                                                             const int32_t* pages, uint32_t k_bytes, uint32_t v_bytes,
                                                             int32_t page_shift) {
  run_paged<192, 128>(plan, q, k, v, o, lse, ws_o, ws_ml, pages, k_bytes, v_bytes, page_shift);
}

// With compile-time features (issue 17: softcap=, window_size=); the plain kernels above are unchanged.
#define ATTN_FWD_PAGED_FEATURE_KERNEL(name, Dqk, Dv, Softcap, Window)                                             \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name(const attn950::AttnFwdArgs* __restrict__ plan, const uint16_t* q,       \
                                            const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,          \
                                            float* ws_o, float* ws_ml, const int32_t* pages, uint32_t k_bytes,      \
                                            uint32_t v_bytes, int32_t page_shift) {                                 \
    run_paged<Dqk, Dv, Softcap, Window>(plan, q, k, v, o, lse, ws_o, ws_ml, pages, k_bytes, v_bytes, page_shift);    \
  }
ATTN_FWD_PAGED_FEATURE_KERNEL(attn_fwd_paged_d128_softcap, 128, 128, true, false)
ATTN_FWD_PAGED_FEATURE_KERNEL(attn_fwd_paged_d192_128_softcap, 192, 128, true, false)
ATTN_FWD_PAGED_FEATURE_KERNEL(attn_fwd_paged_d128_window, 128, 128, false, true)
ATTN_FWD_PAGED_FEATURE_KERNEL(attn_fwd_paged_d192_128_window, 192, 128, false, true)
ATTN_FWD_PAGED_FEATURE_KERNEL(attn_fwd_paged_d128_softcap_window, 128, 128, true, true)
ATTN_FWD_PAGED_FEATURE_KERNEL(attn_fwd_paged_d192_128_softcap_window, 192, 128, true, true)

// With sinks (sinks=): the fp32 [heads_q] sink logits as the last argument.
#define ATTN_FWD_PAGED_SINKS_KERNEL(name, Dqk, Dv, Softcap, Window)                                               \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name(const attn950::AttnFwdArgs* __restrict__ plan, const uint16_t* q,       \
                                            const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,          \
                                            float* ws_o, float* ws_ml, const int32_t* pages, uint32_t k_bytes,      \
                                            uint32_t v_bytes, int32_t page_shift, const float* sinks) {             \
    run_paged<Dqk, Dv, Softcap, Window, true>(plan, q, k, v, o, lse, ws_o, ws_ml, pages, k_bytes, v_bytes,           \
                                              page_shift, sinks);                                                    \
  }
ATTN_FWD_PAGED_SINKS_KERNEL(attn_fwd_paged_d128_sinks, 128, 128, false, false)
ATTN_FWD_PAGED_SINKS_KERNEL(attn_fwd_paged_d192_128_sinks, 192, 128, false, false)
ATTN_FWD_PAGED_SINKS_KERNEL(attn_fwd_paged_d128_softcap_sinks, 128, 128, true, false)
ATTN_FWD_PAGED_SINKS_KERNEL(attn_fwd_paged_d192_128_softcap_sinks, 192, 128, true, false)
ATTN_FWD_PAGED_SINKS_KERNEL(attn_fwd_paged_d128_window_sinks, 128, 128, false, true)
ATTN_FWD_PAGED_SINKS_KERNEL(attn_fwd_paged_d192_128_window_sinks, 192, 128, false, true)
ATTN_FWD_PAGED_SINKS_KERNEL(attn_fwd_paged_d128_softcap_window_sinks, 128, 128, true, true)
ATTN_FWD_PAGED_SINKS_KERNEL(attn_fwd_paged_d192_128_softcap_window_sinks, 192, 128, true, true)
