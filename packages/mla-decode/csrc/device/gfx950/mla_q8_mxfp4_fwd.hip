// fp8-Q x MXFP4-KV MLA decode on v_mfma_scale_f32_16x16x128_f8f6f4, gfx950 — ONE KV PART per request, 16 rows
// (H 16, q_len 1), the window = the request's seq_len: a correctness vehicle for reference.mla_decode_q8_mxfp4,
// not an op and no public entry point (no split, no DCP, no q_len > 1; the codes are read twice per tile, for QK and
// for V's re-expression). Tests: tests/test_q8_mxfp4_fwd.py. Design and status: docs/kernels/mla_decode_formats.md.
//
// One wave per workgroup, workgroup b = request b; lane = 16 g + x. Per 128-token tile t0:
//  1. QK (mla_q8_mxfp4_stages.hpp qk16): 8 x 5 MFMAs; lane holds s(row 4 g + r, token t0 + 16 h + x), h < 8, r < 4.
//  2. Softmax of the definition: x = c_qk s (base 2, masked past seq_len); per row and 32-token block b
//     E_b = ceil(max x) (a 16-lane max), the row's running max m = max over blocks so far (an integer: the
//     accumulators are rescaled by exact powers of two), p~ = e4m3fn_RTNE(2^(x - E_b + 8)) with the E8M0 byte
//     E_b - 8 - m + 127 (a block below 2^-127 of m is dropped); ln += p~ 2^(E_b - 8 - m) (the normaliser over the
//     P as used), l += 2^(x - m) (for the lse, unrounded).
//  3. P and its bytes to LDS (row-major [16][128] and [16][4]), V re-expressed into LDS (reexpress_v), then the
//     PV stage (pv_tile) accumulates o [16 rows x 512 columns] (32 x 4 registers per lane) from P's A layout.
//  End: o / ln (ln, l summed over the 16 lanes of a row) in bf16 RTNE; lse = m + log2 l; an empty request gives
//  o = 0, lse = -inf.
#include "mla_q8_mxfp4_stages.hpp"

namespace {

constexpr float kNegInf = -__builtin_inff();
constexpr int kPOffset = 8;  // reference.Q8_MXFP4_P_OFFSET

MM_DEVICE float max16(float v) {  // over the 16 lanes of a lane group
  v = __builtin_fmaxf(v, mm::xor_lane(v, 1));
  v = __builtin_fmaxf(v, mm::xor_lane(v, 2));
  v = __builtin_fmaxf(v, mm::xor_lane(v, 4));
  return __builtin_fmaxf(v, mm::xor_lane(v, 8));
}
MM_DEVICE float sum16(float v) {
  v += mm::xor_lane(v, 1);
  v += mm::xor_lane(v, 2);
  v += mm::xor_lane(v, 4);
  return v + mm::xor_lane(v, 8);
}

}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(64) void mla_q8_mxfp4_fwd(const uint8_t* __restrict__ q8, const float* __restrict__ q_scale,
                                                      const uint8_t* __restrict__ pool, const uint8_t* __restrict__ scales,
                                                      const int32_t* __restrict__ kv_indices,
                                                      const int32_t* __restrict__ kv_indptr,
                                                      const int32_t* __restrict__ seq_lens, uint16_t* __restrict__ o_lat,
                                                      float* __restrict__ lse, uint32_t slots, uint32_t scale_stride,
                                                      uint32_t scale_bytes, float c_qk_no_q) {
  using namespace q8mx;
  alignas(16) MM_LDS uint8_t vt[kLat * kTile];  // v' token-major [128][512]
  MM_LDS uint8_t f_lds[(kTile / kGroupTokens) * kColBlocks];
  alignas(16) MM_LDS uint8_t p_lds[16 * kTile];
  MM_LDS uint8_t ps_lds[16 * (kTile / kGroupTokens)];
  const uint32_t lane = mm::lane_id(), g = lane / 16u, x = lane % 16u, req = mm::block_id_x();
  const uint32_t n = static_cast<uint32_t>(seq_lens[req]), base = static_cast<uint32_t>(kv_indptr[req]);
  const float c_qk = c_qk_no_q * q_scale[0];
  const mm::buffer_rsrc pb = mm::make_buffer(pool, slots * kCodesBytes);
  const mm::buffer_rsrc sb = mm::make_buffer(scales, scale_bytes);
  const QOperand q = load_q(mm::make_buffer(q8, (req + 1u) * 16u * kRow), (16u * req + x) * kRow, g);
  auto slot_of = [&](uint32_t t) { return t < n ? static_cast<uint32_t>(kv_indices[base + t]) : 0xFFFFFFFFu; };

  mm::f32x4 o[kColTiles];
#pragma unroll
  for (uint32_t ct = 0; ct < kColTiles; ++ct) o[ct] = mm::f32x4{0.f, 0.f, 0.f, 0.f};
  float m[4], l[4], ln[4];  // per row 4 g + r (ln, l: this lane's share)
#pragma unroll
  for (int r = 0; r < 4; ++r) m[r] = kNegInf, l[r] = 0.f, ln[r] = 0.f;

  for (uint32_t t0 = 0; t0 < n; t0 += kTile) {
    // ---- 1. QK and the base-2 scores
    float xs[8][4];
#pragma unroll
    for (uint32_t h = 0; h < 8; ++h) {
      const uint32_t t = t0 + 16u * h + x;
      const mm::f32x4 s = qk16(q, pb, sb, slot_of(t), slots, scale_stride, g);
#pragma unroll
      for (int r = 0; r < 4; ++r) xs[h][r] = t < n ? s[r] * c_qk : kNegInf;
    }
    // ---- 2. block exponents, the running max, P and the sums
    float E[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float mt = kNegInf;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const float mb = max16(__builtin_fmaxf(xs[2 * b][r], xs[2 * b + 1][r]));
        E[b][r] = mb == kNegInf ? kNegInf : __builtin_ceilf(mb);
        mt = __builtin_fmaxf(mt, E[b][r]);
      }
      const float m_new = __builtin_fmaxf(m[r], mt);
      const float alpha = m[r] == kNegInf ? 1.f : mm::exp2(m[r] - m_new);  // exact: both integers
#pragma unroll
      for (uint32_t ct = 0; ct < kColTiles; ++ct) o[ct][r] *= alpha;
      l[r] *= alpha;
      ln[r] *= alpha;
      m[r] = m_new;
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t row = 4u * g + r;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const float rel = E[b][r] - kPOffset - m[r];  // <= -8; -inf for an empty block
        const bool keep = rel >= -127.f;
        if (x == 0) ps_lds[row * 4u + b] = static_cast<uint8_t>(keep ? static_cast<int>(rel) + 127 : 0);
        const float w = keep ? mm::exp2(rel) : 0.f;
#pragma unroll
        for (int hh = 2 * b; hh < 2 * b + 2; ++hh) {
          const float xv = xs[hh][r];
          const float p = keep ? mm::exp2(xv - E[b][r] + kPOffset) : 0.f;
          const uint32_t p8 = static_cast<uint32_t>(__builtin_amdgcn_cvt_pk_fp8_f32(p, 0.f, 0, false)) & 0xFFu;
          p_lds[row * kTile + 16u * hh + x] = static_cast<uint8_t>(p8);
          ln[r] += __builtin_amdgcn_cvt_f32_fp8(p8, 0) * w;
          l[r] += xv == kNegInf ? 0.f : mm::exp2(xv - m[r]);
        }
      }
    }
    // ---- 3. V re-expressed, then PV from P's A layout
    reexpress_v(vt, f_lds, pb, sb, slots, scale_stride, lane, [&](uint32_t t) { return slot_of(t0 + t); });
    mm::block_sync();
    const mm::u32x4 a0 = mm::lds_read_b128(p_lds, x * kTile + 16u * g);
    const mm::u32x4 a1 = mm::lds_read_b128(p_lds, x * kTile + 64u + 16u * g);
    pv_tile(o, __builtin_shufflevector(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7), ps_lds[x * 4u + g], vt, f_lds, g, x);
    mm::block_sync();  // the next tile rewrites the LDS tiles
  }

  // ---- outputs
  const mm::buffer_rsrc ob = mm::make_buffer(o_lat, (req + 1u) * 16u * kLat * 2u);
  const mm::buffer_rsrc lb = mm::make_buffer(lse, (req + 1u) * 16u * 4u);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const uint32_t row = 16u * req + 4u * g + r;
    const float lnr = sum16(ln[r]), lr = sum16(l[r]);
    const float inv = lnr > 0.f ? 1.f / lnr : 0.f;
#pragma unroll
    for (uint32_t ct = 0; ct < kColTiles; ++ct)
      mm::buffer_store_u16(mm::f32_to_bf16<mm::Round::RTNE>(o[ct][r] * inv), ob, 2u * (row * kLat + 16u * ct + x));
    if (x == 0) mm::buffer_store_f32(lr > 0.f ? m[r] + mm::log2(lr) : kNegInf, lb, 4u * row);
  }
}
