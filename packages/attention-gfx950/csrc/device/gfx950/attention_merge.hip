// Merge of split-KV parts (gfx950 attention forward, Dv = 128). Grid (n_merge, heads_q), 256 threads.
// Merge item x (csrc/shared/attention_fwd_plan.h) names the parts slot0 .. slot0 + n_parts - 1 of one
// 256-row tile; wave w combines rows 64w .. 64w+63, one row at a time, lane l owning columns 2l, 2l+1:
//   M = max_p m_p;  w_p = exp2(m_p - M);  out = sum_p w_p O_p / sum_p w_p lb_p  (fixed part order: a
//   deterministic fp32 association), rounded RTNE with canonical NaN; lse = (M + log2 sum w_p l_p) ln 2
//   (lb = sum of the bf16 P, the forward kernel's normaliser; l = sum of the fp32 p, for the LSE).
// A row with no key in any part (every m_p = -inf, l = 0) gets 0 and lse = -inf.
#include "moonmath/all.hpp"
#include "shared/attention_fwd_plan.h"

namespace {
constexpr uint32_t kDv = 128;
constexpr uint32_t kRowsPerWave = attn950::kTileRows / 4;
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) void attn_fwd_merge(const attn950::AttnFwdArgs* __restrict__ plan, uint16_t* o,
                                                    float* lse, const float* ws_o, const float* ws_ml) {
  using namespace attn950;
  const AttnFwdArgs& a = *plan;
  const AttnMergeItem& mi =
      reinterpret_cast<const AttnMergeItem*>(reinterpret_cast<const AttnWorkItem*>(plan + 1) + a.n_items)[mm::block_id_x()];
  const int32_t h = (int32_t)mm::block_id_y();
  const uint32_t wave = mm::wave_id(), lane = mm::lane_id();
  int32_t rows = mi.q_len - mi.q_row0;
  rows = rows < kTileRows ? rows : kTileRows;
  uint16_t* obase = o + mi.batch * a.o_batch + h * a.o_head + (int64_t)(mi.q_tok0 + mi.q_row0) * a.o_token;
  const mm::buffer_rsrc ro = mm::make_buffer(obase, rows <= 0 ? 0u : (uint32_t)(((int64_t)(rows - 1) * a.o_token + kDv) * 2));
  float* lbase = lse + mi.batch * a.lse_batch + h * a.lse_head + mi.q_tok0 + mi.q_row0;
  const mm::buffer_rsrc rl = mm::make_buffer(lbase, rows > 0 ? (uint32_t)rows * 4u : 0u);
  const bool want_lse = (a.flags & kFlagLse) != 0;
  for (uint32_t rr = 0; rr < kRowsPerWave; ++rr) {
    const int32_t row = (int32_t)(wave * kRowsPerWave + rr);
    if (row >= rows) break;
    float M = -__builtin_inff();
    for (int32_t p = 0; p < mi.n_parts; ++p) {
      const int64_t t = ((int64_t)(mi.slot0 + p) * a.heads_q + h) * kTileRows + row;
      M = __builtin_fmaxf(M, ws_ml[4 * t]);
    }
    const float M_ref = M == -__builtin_inff() ? 0.f : M;
    float acc0 = 0.f, acc1 = 0.f, L = 0.f, Lb = 0.f;
    for (int32_t p = 0; p < mi.n_parts; ++p) {
      const int64_t t = ((int64_t)(mi.slot0 + p) * a.heads_q + h) * kTileRows + row;
      const float w = mm::exp2(ws_ml[4 * t] - M_ref);
      L += w * ws_ml[4 * t + 1];
      Lb += w * ws_ml[4 * t + 2];
      const mm::f32x2 v = *(const mm::f32x2*)(ws_o + t * kDv + 2u * lane);
      acc0 += w * v[0];
      acc1 += w * v[1];
    }
    const float inv = Lb > 0.f ? mm::rcp(Lb) : 0.f;
    mm::buffer_store_b32(mm::pack_bf16x2<mm::Round::RTNE>(acc0 * inv, acc1 * inv), ro,
                         (uint32_t)row * (uint32_t)a.o_token * 2u + 4u * lane);
    if (want_lse && lane == 0)
      mm::buffer_store_f32(L > 0.f ? (M + mm::log2(L)) * mm::kLn2 : -__builtin_inff(), rl, (uint32_t)row * 4u);
  }
}
