// Merge of split-KV parts (gfx950 attention forward; attn_fwd_merge for Dv = 128, attn_fwd_merge_dv<N> for the
// other value head dims). Grid (n_merge, heads_q), 256 threads.
// Merge item x (csrc/shared/attention_fwd_plan.h) names the parts slot0 .. slot0 + n_parts - 1 of one
// 256-row tile. 32 lanes share a row, lane c owning columns 4c' .. 4c'+3 for c' = c, c + 32, ... < Dv / 4
// (16-byte loads); the workgroup covers 8 rows per pass:
//   M = max_p m_p;  w_p = exp2(m_p - M);  out = sum_p w_p O_p / sum_p w_p lb_p  (fixed part order: a
//   deterministic fp32 association), rounded RTNE with canonical NaN; lse = (M + log2 sum w_p l_p) ln 2
//   (lb = sum of the bf16 P, the forward kernel's normaliser; l = sum of the fp32 p, for the LSE).
// A row with no key in any part (every m_p = -inf, l = 0) gets 0 and lse = -inf.
#include "moonmath/all.hpp"
#include "shared/attention_fwd_plan.h"

namespace {
constexpr uint32_t kRowsPerPass = 256 / 32;

template <uint32_t kDv>
MM_DEVICE void merge_parts(const attn950::AttnFwdArgs* __restrict__ plan, uint16_t* o, float* lse, const float* ws_o,
                           const float* ws_ml) {
  using namespace attn950;
  constexpr uint32_t kCols = kDv / 4;          // 4-column groups of a row
  constexpr uint32_t kSteps = (kCols + 31) / 32;
  static_assert(kDv % 16 == 0, "Dv");
  const AttnFwdArgs& a = *plan;
  const AttnMergeItem& mi =
      reinterpret_cast<const AttnMergeItem*>(reinterpret_cast<const AttnWorkItem*>(plan + 1) + a.n_items)[mm::block_id_x()];
  const int32_t h = (int32_t)mm::block_id_y();
  int32_t rows = mi.q_len - mi.q_row0;
  rows = rows < kTileRows ? rows : kTileRows;
  uint16_t* obase = o + mi.batch * a.o_batch + h * a.o_head + (int64_t)(mi.q_tok0 + mi.q_row0) * a.o_token;
  const mm::buffer_rsrc ro = mm::make_buffer(obase, rows <= 0 ? 0u : (uint32_t)(((int64_t)(rows - 1) * a.o_token + kDv) * 2));
  float* lbase = lse + mi.batch * a.lse_batch + h * a.lse_head + mi.q_tok0 + mi.q_row0;
  const mm::buffer_rsrc rl = mm::make_buffer(lbase, rows > 0 ? (uint32_t)rows * 4u : 0u);
  const bool want_lse = (a.flags & kFlagLse) != 0;
  const uint32_t tid = mm::thread_id_x(), c = tid & 31u;
  for (uint32_t r0 = 0; r0 < (uint32_t)kTileRows; r0 += kRowsPerPass) {
    const int32_t row = (int32_t)(r0 + (tid >> 5));
    if (row >= rows) break;
    float M = -__builtin_inff();
    for (int32_t p = 0; p < mi.n_parts; ++p) {
      const int64_t t = ((int64_t)(mi.slot0 + p) * a.heads_q + h) * kTileRows + row;
      M = __builtin_fmaxf(M, ws_ml[4 * t]);
    }
    const float M_ref = M == -__builtin_inff() ? 0.f : M;
    mm::f32x4 acc[kSteps];
#pragma unroll
    for (uint32_t i = 0; i < kSteps; ++i) acc[i] = mm::f32x4{0.f, 0.f, 0.f, 0.f};
    float L = 0.f, Lb = 0.f;
    for (int32_t p = 0; p < mi.n_parts; ++p) {
      const int64_t t = ((int64_t)(mi.slot0 + p) * a.heads_q + h) * kTileRows + row;
      const mm::f32x4 ml = *(const mm::f32x4*)(ws_ml + 4 * t);
      const float w = mm::exp2(ml[0] - M_ref);
      L += w * ml[1];
      Lb += w * ml[2];
#pragma unroll
      for (uint32_t i = 0; i < kSteps; ++i)
        if (kCols % 32 == 0 || c + 32u * i < kCols) acc[i] += w * *(const mm::f32x4*)(ws_o + t * kDv + 4u * (c + 32u * i));
    }
    const float inv = Lb > 0.f ? mm::rcp(Lb) : 0.f;
#pragma unroll
    for (uint32_t i = 0; i < kSteps; ++i) {
      if (kCols % 32 != 0 && c + 32u * i >= kCols) continue;
      const mm::u32x2 packed = {mm::pack_bf16x2<mm::Round::RTNE>(acc[i][0] * inv, acc[i][1] * inv),
                                mm::pack_bf16x2<mm::Round::RTNE>(acc[i][2] * inv, acc[i][3] * inv)};
      mm::buffer_store_b64(packed, ro, (uint32_t)row * (uint32_t)a.o_token * 2u + 8u * (c + 32u * i));
    }
    if (want_lse && c == 0)
      mm::buffer_store_f32(L > 0.f ? (M + mm::log2(L)) * mm::kLn2 : -__builtin_inff(), rl, (uint32_t)row * 4u);
  }
}
}  // namespace

#define ATTN_FWD_MERGE_KERNEL(name, Dv)                                                                         \
  MM_KERNEL MM_LAUNCH_BOUNDS(256) void name(const attn950::AttnFwdArgs* __restrict__ plan, uint16_t* o, float* lse, \
                                            const float* ws_o, const float* ws_ml) {                            \
    merge_parts<Dv>(plan, o, lse, ws_o, ws_ml);                                                                 \
  }
ATTN_FWD_MERGE_KERNEL(attn_fwd_merge, 128)
ATTN_FWD_MERGE_KERNEL(attn_fwd_merge_dv64, 64)
ATTN_FWD_MERGE_KERNEL(attn_fwd_merge_dv80, 80)
ATTN_FWD_MERGE_KERNEL(attn_fwd_merge_dv96, 96)
