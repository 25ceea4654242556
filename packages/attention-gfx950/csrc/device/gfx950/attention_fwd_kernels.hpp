// The entry points of the gfx950 attention forward: run<> / run_paged<> bind a kernel's arguments to the pipeline
// (attention_fwd.hpp, with the dense or the paged partitioner), and ATTN_FWD_KERNELS / ATTN_FWD_PAGED_KERNELS
// instantiate one head-dim pair with every combination of the compile-time features (issue 17): the plain
// kernel `name`, then name_softcap, _window, _softcap_window, and the _sinks twin of each (one more argument,
// the fp32 [heads_q] sink logits, last). Grid (n_items, heads_q), 512 threads; the plan buffer
// (csrc/shared/attention_fwd_plan.h) says which rows and keys each workgroup owns.
#pragma once
#include "attention_fwd_paged.hpp"

namespace attn950 {

template <int Dqk, int Dv, bool Softcap, bool Window, bool Sinks, bool KvFp8 = false>
MM_DEVICE void run(const AttnFwdArgs* plan, const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                   float* lse, float* ws_o, float* ws_ml, const float* sinks, const float* k_descale = nullptr,
                   const float* v_descale = nullptr) {
  using Shape = FwdShape<Dqk, Dv, Softcap, Window, Sinks, KvFp8>;
  MM_LDS __attribute__((aligned(16))) uint8_t lds[Shape::kLdsBytes];
  const FwdPointers ptr{q, k, v, o, lse, ws_o, ws_ml, sinks, k_descale, v_descale};
  attention_fwd<Shape>(plan, ptr, (lds_u8*)lds);
}

template <int Dqk, int Dv, bool Softcap, bool Window, bool Sinks, bool KvFp8 = false>
MM_DEVICE void run_paged(const AttnFwdArgs* plan, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                         uint16_t* o, float* lse, float* ws_o, float* ws_ml, const int32_t* pages, uint32_t k_bytes,
                         uint32_t v_bytes, int32_t page_shift, const float* sinks, const float* k_descale = nullptr,
                         const float* v_descale = nullptr) {
  using Shape = FwdShape<Dqk, Dv, Softcap, Window, Sinks, KvFp8>;
  MM_LDS __attribute__((aligned(16))) uint8_t lds[Shape::kLdsBytes];
  const FwdPointers ptr{q, k, v, o, lse, ws_o, ws_ml, sinks, k_descale, v_descale};
  const PagedKv pk{pages, k_bytes, v_bytes, page_shift};
  attention_fwd<Shape, PagedTile<Shape>>(plan, ptr, (lds_u8*)lds, pk);
}

}  // namespace attn950

#define ATTN_FWD_ARGS                                                                                           \
  const attn950::AttnFwdArgs *__restrict__ plan, const uint16_t *q, const uint16_t *k, const uint16_t *v,       \
      uint16_t *o, float *lse, float *ws_o, float *ws_ml
#define ATTN_FWD_PAGED_ARGS ATTN_FWD_ARGS, const int32_t *pages, uint32_t k_bytes, uint32_t v_bytes, int32_t page_shift

#define ATTN_FWD_KERNEL_(name, Dqk, Dv, Softcap, Window)                                                       \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name(ATTN_FWD_ARGS) {                                                    \
    attn950::run<Dqk, Dv, Softcap, Window, false>(plan, q, k, v, o, lse, ws_o, ws_ml, nullptr);                 \
  }                                                                                                             \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name##_sinks(ATTN_FWD_ARGS, const float* sinks) {                        \
    attn950::run<Dqk, Dv, Softcap, Window, true>(plan, q, k, v, o, lse, ws_o, ws_ml, sinks);                    \
  }
#define ATTN_FWD_KERNELS(name, Dqk, Dv)                                                                         \
  ATTN_FWD_KERNEL_(name, Dqk, Dv, false, false)                                                                 \
  ATTN_FWD_KERNEL_(name##_softcap, Dqk, Dv, true, false)                                                        \
  ATTN_FWD_KERNEL_(name##_window, Dqk, Dv, false, true)                                                         \
  ATTN_FWD_KERNEL_(name##_softcap_window, Dqk, Dv, true, true)

#define ATTN_FWD_PAGED_KERNEL_(name, Dqk, Dv, Softcap, Window)                                                 \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name(ATTN_FWD_PAGED_ARGS) {                                              \
    attn950::run_paged<Dqk, Dv, Softcap, Window, false>(plan, q, k, v, o, lse, ws_o, ws_ml, pages, k_bytes,     \
                                                        v_bytes, page_shift, nullptr);                          \
  }                                                                                                             \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name##_sinks(ATTN_FWD_PAGED_ARGS, const float* sinks) {                  \
    attn950::run_paged<Dqk, Dv, Softcap, Window, true>(plan, q, k, v, o, lse, ws_o, ws_ml, pages, k_bytes,      \
                                                       v_bytes, page_shift, sinks);                             \
  }
#define ATTN_FWD_PAGED_KERNELS(name, Dqk, Dv)                                                                   \
  ATTN_FWD_PAGED_KERNEL_(name, Dqk, Dv, false, false)                                                           \
  ATTN_FWD_PAGED_KERNEL_(name##_softcap, Dqk, Dv, true, false)                                                  \
  ATTN_FWD_PAGED_KERNEL_(name##_window, Dqk, Dv, false, true)                                                   \
  ATTN_FWD_PAGED_KERNEL_(name##_softcap_window, Dqk, Dv, true, true)

// fp8 K/V (OCP e4m3fn; the _fp8 kernels): two more arguments after the others (and after sinks), the fp32
// [heads_kv] descales of K and V.
#define ATTN_FWD_FP8_KERNEL_(name, Dqk, Dv, Softcap, Window)                                                   \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name(ATTN_FWD_ARGS, const float* k_descale, const float* v_descale) {   \
    attn950::run<Dqk, Dv, Softcap, Window, false, true>(plan, q, k, v, o, lse, ws_o, ws_ml, nullptr, k_descale, \
                                                        v_descale);                                             \
  }                                                                                                             \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name##_sinks(ATTN_FWD_ARGS, const float* sinks, const float* k_descale,  \
                                                    const float* v_descale) {                                   \
    attn950::run<Dqk, Dv, Softcap, Window, true, true>(plan, q, k, v, o, lse, ws_o, ws_ml, sinks, k_descale,    \
                                                       v_descale);                                              \
  }
#define ATTN_FWD_FP8_KERNELS(name, Dqk, Dv)                                                                     \
  ATTN_FWD_FP8_KERNEL_(name, Dqk, Dv, false, false)                                                             \
  ATTN_FWD_FP8_KERNEL_(name##_softcap, Dqk, Dv, true, false)                                                    \
  ATTN_FWD_FP8_KERNEL_(name##_window, Dqk, Dv, false, true)                                                     \
  ATTN_FWD_FP8_KERNEL_(name##_softcap_window, Dqk, Dv, true, true)

#define ATTN_FWD_PAGED_FP8_KERNEL_(name, Dqk, Dv, Softcap, Window)                                             \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name(ATTN_FWD_PAGED_ARGS, const float* k_descale,                       \
                                            const float* v_descale) {                                           \
    attn950::run_paged<Dqk, Dv, Softcap, Window, false, true>(plan, q, k, v, o, lse, ws_o, ws_ml, pages,        \
                                                              k_bytes, v_bytes, page_shift, nullptr, k_descale, \
                                                              v_descale);                                       \
  }                                                                                                             \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name##_sinks(ATTN_FWD_PAGED_ARGS, const float* sinks,                   \
                                                    const float* k_descale, const float* v_descale) {           \
    attn950::run_paged<Dqk, Dv, Softcap, Window, true, true>(plan, q, k, v, o, lse, ws_o, ws_ml, pages,         \
                                                             k_bytes, v_bytes, page_shift, sinks, k_descale,    \
                                                             v_descale);                                        \
  }
#define ATTN_FWD_PAGED_FP8_KERNELS(name, Dqk, Dv)                                                               \
  ATTN_FWD_PAGED_FP8_KERNEL_(name, Dqk, Dv, false, false)                                                       \
  ATTN_FWD_PAGED_FP8_KERNEL_(name##_softcap, Dqk, Dv, true, false)                                              \
  ATTN_FWD_PAGED_FP8_KERNEL_(name##_window, Dqk, Dv, false, true)                                               \
  ATTN_FWD_PAGED_FP8_KERNEL_(name##_softcap_window, Dqk, Dv, true, true)
