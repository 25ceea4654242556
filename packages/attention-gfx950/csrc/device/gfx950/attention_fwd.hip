// gfx950 attention forward kernels: one instantiation of the pipeline (attention_fwd.hpp) per head-dim
// pair. Grid (n_items, heads_q), 512 threads; the plan buffer (csrc/shared/attention_fwd_plan.h) says
// which rows and keys each workgroup owns.
#include "attention_fwd.hpp"

namespace {

template <int Dqk, int Dv, bool Softcap = false, bool Window = false, bool Sinks = false>
MM_DEVICE void run(const attn950::AttnFwdArgs* plan, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                   uint16_t* o, float* lse, float* ws_o, float* ws_ml, const float* sinks = nullptr) {
  using Shape = attn950::FwdShape<Dqk, Dv, Softcap, Window, Sinks>;
  MM_LDS __attribute__((aligned(16))) uint8_t lds[Shape::kLdsBytes];
  const attn950::FwdPointers ptr{q, k, v, o, lse, ws_o, ws_ml, sinks};
  attn950::attention_fwd<Shape>(plan, ptr, (attn950::lds_u8*)lds);
}

}  // namespace

// (Dqk, Dv) = (128, 128)
MM_KERNEL MM_LAUNCH_BOUNDS(512) void attn_fwd_d128(const attn950::AttnFwdArgs* __restrict__ plan, const uint16_t* q,
                                                   const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,
                                                   float* ws_o, float* ws_ml) {
  run<128, 128>(plan, q, k, v, o, lse, ws_o, ws_ml);
}

// (Dqk, Dv) = (192, 128): MLA prefill
MM_KERNEL MM_LAUNCH_BOUNDS(512) void attn_fwd_d192_128(const attn950::AttnFwdArgs* __restrict__ plan,
                                                       const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                       uint16_t* o, float* lse, float* ws_o, float* ws_ml) {
  run<192, 128>(plan, q, k, v, o, lse, ws_o, ws_ml);
}

// The same pipelines with compile-time features (issue 17): the soft-cap stage (softcap=) and the sliding
// window (window_size=), alone and together. The plain kernels above carry no trace of them.
#define ATTN_FWD_FEATURE_KERNEL(name, Dqk, Dv, Softcap, Window)                                                   \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name(const attn950::AttnFwdArgs* __restrict__ plan, const uint16_t* q,       \
                                            const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,          \
                                            float* ws_o, float* ws_ml) {                                            \
    run<Dqk, Dv, Softcap, Window>(plan, q, k, v, o, lse, ws_o, ws_ml);                                               \
  }
ATTN_FWD_FEATURE_KERNEL(attn_fwd_d128_softcap, 128, 128, true, false)
ATTN_FWD_FEATURE_KERNEL(attn_fwd_d192_128_softcap, 192, 128, true, false)
ATTN_FWD_FEATURE_KERNEL(attn_fwd_d128_window, 128, 128, false, true)
ATTN_FWD_FEATURE_KERNEL(attn_fwd_d192_128_window, 192, 128, false, true)
ATTN_FWD_FEATURE_KERNEL(attn_fwd_d128_softcap_window, 128, 128, true, true)
ATTN_FWD_FEATURE_KERNEL(attn_fwd_d192_128_softcap_window, 192, 128, true, true)

// With sinks (sinks=, gpt-oss): one more argument, the fp32 [heads_q] sink logits.
#define ATTN_FWD_SINKS_KERNEL(name, Dqk, Dv, Softcap, Window)                                                     \
  MM_KERNEL MM_LAUNCH_BOUNDS(512) void name(const attn950::AttnFwdArgs* __restrict__ plan, const uint16_t* q,       \
                                            const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,          \
                                            float* ws_o, float* ws_ml, const float* sinks) {                        \
    run<Dqk, Dv, Softcap, Window, true>(plan, q, k, v, o, lse, ws_o, ws_ml, sinks);                                  \
  }
ATTN_FWD_SINKS_KERNEL(attn_fwd_d128_sinks, 128, 128, false, false)
ATTN_FWD_SINKS_KERNEL(attn_fwd_d192_128_sinks, 192, 128, false, false)
ATTN_FWD_SINKS_KERNEL(attn_fwd_d128_softcap_sinks, 128, 128, true, false)
ATTN_FWD_SINKS_KERNEL(attn_fwd_d192_128_softcap_sinks, 192, 128, true, false)
ATTN_FWD_SINKS_KERNEL(attn_fwd_d128_window_sinks, 128, 128, false, true)
ATTN_FWD_SINKS_KERNEL(attn_fwd_d192_128_window_sinks, 192, 128, false, true)
ATTN_FWD_SINKS_KERNEL(attn_fwd_d128_softcap_window_sinks, 128, 128, true, true)
ATTN_FWD_SINKS_KERNEL(attn_fwd_d192_128_softcap_window_sinks, 192, 128, true, true)
