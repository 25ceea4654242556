// Stages of the gfx942 MHA forward (bf16, head dim 128) as small named device functions over the
// moonmath primitives. Written so they move onto common/include/moonmath/tile.hpp when it lands.
//
// Fragments (v_mfma_f32_16x16x16_bf16; lane = 16*quad + col, quad = lane>>4, col = lane&15):
//   QK computes S^T = K Q^T per 16x16 (kv x q) tile: A = K rows, B = Q rows; the C fragment gives lane
//   (quad, col) the scores of q row `col` at kv rows 4*quad + 0..3. That is exactly the B operand P^T of
//   the PV product O^T = V^T P^T, so P never leaves the lane. A = V^T comes from the pre-transposed V_t.
//   The head dim is the reduction of QK; any permutation of it is fine if Q and K use the same one, so
//   a lane loads 16 contiguous bytes per row (d = 64*j + 8*quad + 0..7 for j = 0..3) and feeds them as
//   two k-steps (elements 0..3, 4..7): 4 b128 loads cover a 16-row tile.
//   The PV C fragment gives lane (quad, col) O[q = col][hd = 16*dt + 4*quad + 0..3].
#pragma once
#include "gfx942/mha_config.hpp"
#include "moonmath/all.hpp"

namespace mha {

constexpr uint32_t kHeadDim = moonmath::mha::config::kHeadDim;
constexpr uint32_t kRowBytes = kHeadDim * 2;
constexpr uint32_t kKvBlock = moonmath::mha::config::kKvBlock;  // kv rows per step of the main loop
constexpr uint32_t kKvSub = kKvBlock / 16;     // 16-row kv subtiles per block
constexpr uint32_t kDTiles = kHeadDim / 16;    // 16-wide head-dim tiles of O
constexpr uint32_t kVtBlockBytes = kKvBlock * kRowBytes;  // one V_t block: 16 chunks of 1 KB
// log2(e) / sqrt(128): scores go to the log2 domain with one fma.
constexpr float kScaleLog2e = 1.4426950408889634f * 0.088388347648318440f;
constexpr float kMaskedScore = -3.4028234663852886e38f;  // -FLT_MAX: exp2 of it is 0, never NaN

typedef mm::u32x4 Row16B;          // 8 bf16 of one row: two k-steps of an A/B operand
typedef mm::f32x4 Acc;             // one 16x16 fp32 C fragment (4 per lane)

MM_DEVICE mm::i16x4 lo_half(Row16B v) { return __builtin_bit_cast(mm::i16x4, mm::u32x2{v.x, v.y}); }
MM_DEVICE mm::i16x4 hi_half(Row16B v) { return __builtin_bit_cast(mm::i16x4, mm::u32x2{v.z, v.w}); }

MM_DEVICE uint32_t quad_id() { return mm::lane_id() >> 4; }
MM_DEVICE uint32_t col_id() { return mm::lane_id() & 15u; }

// One 16-row operand tile of Q or K (rows `row0`..+15, row stride in bytes): 4 b128 loads per lane.
// Rows beyond the buffer's num_records read as 0.
MM_DEVICE void load_rows16(Row16B (&t)[4], mm::buffer_rsrc r, uint32_t row0, uint32_t row_stride) {
  const uint32_t off = (row0 + col_id()) * row_stride + quad_id() * 16u;
#pragma unroll
  for (int j = 0; j < 4; ++j) t[j] = mm::buffer_load_b128(r, off + 64u * j);
}

// One V_t block: chunk c = 2*dt + pair holds, for lane (quad, col), V[kv = 16*(2*pair + h) + 4*quad + e]
// [hd = 16*dt + col] at element 4*h + e. 16 coalesced b128 loads (1 KB per wave each).
MM_DEVICE void load_vt_block(Row16B (&v)[kDTiles][2], mm::buffer_rsrc r, uint32_t block) {
  const uint32_t off = block * kVtBlockBytes + mm::lane_id() * 16u;
#pragma unroll
  for (uint32_t dt = 0; dt < kDTiles; ++dt)
#pragma unroll
    for (uint32_t p = 0; p < 2; ++p) v[dt][p] = mm::buffer_load_b128(r, off + (2u * dt + p) * 1024u);
}

// S^T (16 kv x 16 q) = K Q^T over the full head dim: 8 MFMAs.
MM_DEVICE Acc qk_tile(const Row16B (&k)[4], const Row16B (&q)[4]) {
  Acc s = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    s = mm::mfma_16x16x16_bf16(lo_half(k[j]), lo_half(q[j]), s);
    s = mm::mfma_16x16x16_bf16(hi_half(k[j]), hi_half(q[j]), s);
  }
  return s;
}

// Scores of kv rows >= skv (the last partial block) become -FLT_MAX.
MM_DEVICE void mask_kv_tail(Acc (&s)[kKvSub], uint32_t kv0, uint32_t skv) {
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t)
#pragma unroll
    for (uint32_t e = 0; e < 4; ++e)
      if (kv0 + 16u * t + 4u * quad_id() + e >= skv) s[t][e] = kMaskedScore;
}

// Max over a q row of the block: 16 values in the lane, then across the 4 quads (lanes ^16, ^32).
MM_DEVICE float row_max(const Acc (&s)[kKvSub]) {
  float m = s[0][0];
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t)
#pragma unroll
    for (uint32_t e = 0; e < 4; ++e) m = __builtin_fmaxf(m, s[t][e]);
  m = __builtin_fmaxf(m, mm::xor_lane(m, 16));
  return __builtin_fmaxf(m, mm::xor_lane(m, 32));
}

// Sum over the 4 quads of a per-lane partial row sum.
MM_DEVICE float row_sum_quads(float v) {
  v += mm::xor_lane(v, 16);
  return v + mm::xor_lane(v, 32);
}

// bf16 packing of P and O in the kernel's rounding mode. Raw: no NaN guard (P: exp2 only makes the
// canonical f32 NaN, whose rounding stays NaN). Guarded (O): NaN -> 0x7FFF for RTNE/RTNA (AITER's
// output rule); RTZ truncates, which keeps any NaN a NaN.
template <mm::Round R>
MM_DEVICE uint32_t round_bits_raw(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if constexpr (R == mm::Round::RTNE) u += 0x7FFFu + ((u >> 16) & 1u);
  else if constexpr (R == mm::Round::RTNA) u += 0x8000u;
  return u;
}
template <mm::Round R>
MM_DEVICE uint32_t pack_p(float lo, float hi) {
  return __builtin_amdgcn_perm(round_bits_raw<R>(hi), round_bits_raw<R>(lo), 0x07060302u);
}
template <mm::Round R>
MM_DEVICE uint32_t pack_o(float lo, float hi) {
  uint32_t a = round_bits_raw<R>(lo), b = round_bits_raw<R>(hi);
  if constexpr (R != mm::Round::RTZ) {
    if (__builtin_isnan(lo)) a = 0x7FFF0000u;
    if (__builtin_isnan(hi)) b = 0x7FFF0000u;
  }
  return __builtin_amdgcn_perm(b, a, 0x07060302u);
}

// Online softmax of one q tile over one kv block, in the log2 domain. Scores s become probabilities
// exp2(s * c - m) (fp32, summed into l) packed to bf16 in p. `o` is rescaled by exp2(m_old - m_new)
// only when some row's max grew (the rescale gate; the factor would be exactly 1 otherwise) and this is
// not the first block (o and l are still 0 then).
template <mm::Round R>
MM_DEVICE void softmax_block(Acc (&s)[kKvSub], mm::i16x4 (&p)[kKvSub], Acc (&o)[kDTiles], float& m, float& l,
                             bool first) {
  const float m_new = __builtin_fmaxf(m, row_max(s) * kScaleLog2e);
  const bool grew = __builtin_amdgcn_ballot_w64(m_new > m) != 0;
  if (!first && grew) {
    const float r = mm::exp2(m - m_new);
    l *= r;
#pragma unroll
    for (uint32_t dt = 0; dt < kDTiles; ++dt)
#pragma unroll
      for (uint32_t e = 0; e < 4; ++e) o[dt][e] *= r;
  }
  m = m_new;
  float sum = 0.f;
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t) {
#pragma unroll
    for (uint32_t e = 0; e < 4; ++e) {
      s[t][e] = mm::exp2(__builtin_fmaf(s[t][e], kScaleLog2e, -m));
      sum += s[t][e];
    }
    p[t] = __builtin_bit_cast(mm::i16x4, mm::u32x2{pack_p<R>(s[t][0], s[t][1]), pack_p<R>(s[t][2], s[t][3])});
  }
  l += sum;
}

// O^T += V^T P^T over one kv block: 32 MFMAs.
MM_DEVICE void pv_block(Acc (&o)[kDTiles], const Row16B (&v)[kDTiles][2], const mm::i16x4 (&p)[kKvSub]) {
#pragma unroll
  for (uint32_t dt = 0; dt < kDTiles; ++dt) {
    o[dt] = mm::mfma_16x16x16_bf16(lo_half(v[dt][0]), p[0], o[dt]);
    o[dt] = mm::mfma_16x16x16_bf16(hi_half(v[dt][0]), p[1], o[dt]);
    o[dt] = mm::mfma_16x16x16_bf16(lo_half(v[dt][1]), p[2], o[dt]);
    o[dt] = mm::mfma_16x16x16_bf16(hi_half(v[dt][1]), p[3], o[dt]);
  }
}

// Normalise and store one q tile's O rows (bf16, 8 bytes per lane per d-tile). Rows beyond the
// buffer are dropped by the descriptor. inv = 0 for an all-zero row sum.
template <mm::Round R>
MM_DEVICE void store_o_tile(const Acc (&o)[kDTiles], float l, mm::buffer_rsrc r, uint32_t row0, uint32_t row_stride) {
  const float inv = l == 0.f ? 0.f : mm::rcp(l);
  const uint32_t off = (row0 + col_id()) * row_stride + quad_id() * 8u;
#pragma unroll
  for (uint32_t dt = 0; dt < kDTiles; ++dt) {
    mm::u32x2 w = {pack_o<R>(o[dt][0] * inv, o[dt][1] * inv), pack_o<R>(o[dt][2] * inv, o[dt][3] * inv)};
    mm::buffer_store_b64(w, r, off + dt * 32u);
  }
}

// Loads issued before this point stay before it: an empty asm with a memory clobber is a point no memory
// access moves across (sched_barrier alone does not stop LLVM's IR-level sinking of loads to their use),
// and it emits no instruction. Used to issue a block's loads one MFMA phase ahead of their use.
MM_DEVICE void issue_fence() { asm volatile("" ::: "memory"); }

// Chiplet swizzle: CTA c runs on XCD c % 8; give each XCD a contiguous range of the head-first work
// order so the q blocks of one head share one L2. A bijection on [0, n).
MM_DEVICE uint32_t xcd_contiguous(uint32_t c, uint32_t n) {
  const uint32_t x = c & 7u, slot = c >> 3, per = n >> 3, rem = n & 7u;
  return x * per + (x < rem ? x : rem) + slot;
}

}  // namespace mha
