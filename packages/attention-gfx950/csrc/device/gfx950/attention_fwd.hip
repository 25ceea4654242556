// gfx950 attention forward kernels: one instantiation of the pipeline (attention_fwd.hpp) per head-dim
// pair. Grid (n_items, heads_q), 512 threads; the plan buffer (csrc/shared/attention_fwd_plan.h) says
// which rows and keys each workgroup owns.
#include "attention_fwd.hpp"

namespace {

template <int Dqk, int Dv, bool Softcap = false>
MM_DEVICE void run(const attn950::AttnFwdArgs* plan, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                   uint16_t* o, float* lse, float* ws_o, float* ws_ml) {
  using Shape = attn950::FwdShape<Dqk, Dv, Softcap>;
  MM_LDS __attribute__((aligned(16))) uint8_t lds[Shape::kLdsBytes];
  const attn950::FwdPointers ptr{q, k, v, o, lse, ws_o, ws_ml};
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

// The same pipelines with the soft-cap stage (softcap=, Gemma 2): compile-time, so the plain kernels
// above carry no trace of it.
MM_KERNEL MM_LAUNCH_BOUNDS(512) void attn_fwd_d128_softcap(const attn950::AttnFwdArgs* __restrict__ plan,
                                                           const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                           uint16_t* o, float* lse, float* ws_o, float* ws_ml) {
  run<128, 128, true>(plan, q, k, v, o, lse, ws_o, ws_ml);
}

MM_KERNEL MM_LAUNCH_BOUNDS(512) void attn_fwd_d192_128_softcap(const attn950::AttnFwdArgs* __restrict__ plan,
                                                               const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                               uint16_t* o, float* lse, float* ws_o, float* ws_ml) {
  run<192, 128, true>(plan, q, k, v, o, lse, ws_o, ws_ml);
}
