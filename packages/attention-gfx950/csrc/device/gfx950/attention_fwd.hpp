// Attention forward, gfx950 (MI355X): the pipeline, its stages and the tile partitioner.
//
// Tiling. A workgroup of 8 waves owns one work item (csrc/shared/attention_fwd_plan.h): kTileRows =
// 256 query rows of one q head against a key range, walked in blocks of kKvBlock = 64 keys. Wave w
// owns rows 32w .. 32w+31 of the tile as two 16-row MFMA tiles ("row tiles"); every wave reads every
// K/V block, so each K/V fragment read from LDS feeds two MFMAs.
//
// MFMA: v_mfma_f32_16x16x32_bf16 everywhere. Lane = 16*g + i (g = lane group 0..3, i = 0..15).
//   16x16x32 layout (emulator mfma.cpp, AMD calculator): A[i][k] in lane 16*(k/8)+i element k%8,
//   B[k][j] in lane 16*(k/8)+j element k%8, D[i][j] in register i%4 of lane 16*(i/4)+j.
//   QK: S^T = K Q^T. A = K (i = key of a 16-key tile t, k = d), B = Q^T (j = query row). Lane (g, j)
//       ends with S[row j][key 16t + 4g + r] in register r: a row's 64 scores sit in 4 lanes.
//   PV: O^T = V^T P^T. B = P^T straight from the QK registers: MFMA c (32 keys) contracts over
//       k = 8g + e <-> key 16*(2c + e/4) + 4g + e%4 (any permutation of k is legal when A uses the
//       same one), so P needs no lane movement. A = V^T: lane (g, i) needs V[key(c,g,e)][16n + i]
//       for e = 0..7: two ds_read_b64_tr_b16 (one per 16-key half) from V stored key-major in LDS.
//       D: lane (g, j) holds O[row j][16n + 4g + r], n = 0..Dv/16-1 (32 fp32 per row tile).
//
// LDS (160 KiB on gfx950; we use 64 KiB for Dqk 128, 80 KiB for 192): two stages, each one K block
// [64][Dqk] and one V block [64][Dv] bf16, key-major, rows unpadded. 16-byte chunk c of row r sits at
// chunk (c ^ (r & 7)) of its row (XOR swizzle, applied on the global side of the direct-to-LDS loads,
// whose LDS side is fixed at M0 + 16*lane): the QK reads (16 rows, one chunk each) and the
// transposing V reads (4 rows x 2 half-chunks per 16 lanes) then spread over the banks.
//
// Pipeline, one barrier per KV block:
//   wait own DMAs of block n (vmcnt 0); barrier       -> block n visible; every wave is done with n-1
//   DMA block n+1 into the other stage (all waves)   -> overlaps the math below
//   QK(n) from LDS, [soft-cap: the *_softcap kernels], mask ([window: lower bound too], only on blocks that need it), online softmax (log2 domain, fp32),
//   P -> bf16 (RTNE), PV(n) with transposing LDS reads.
// Epilogue: O / lb (lb = the sum of the bf16 P, by MFMA against ones; 0 -> 0) rounded RTNE with canonical NaN 0x7FFF, LSE = (m + log2 l) ln 2; a
// split part writes fp32 (O, m, l) to its workspace slot instead (attention_merge.hip combines them).
//
// Where rows and keys live is the partitioner's business (DenseTile: batch strides + token offsets of
// a work item); the pipeline sees buffer resources and per-block row counts only.
//
// Fragments are the tile layer's (moonmath/tile.hpp): FragA/FragB/FragC<Mfma16x16x32Bf16>, mma,
// load_b (Q from global), lds_load_a over XorLds (K from LDS). Local here, because the layer does not
// have them (yet): the transposing V read by asm with tied waits (the layer's lds_load_a_kmajor uses
// the builtin, which waits for all LDS DMA), the CTA-wide direct-to-LDS staging (8 waves filling one
// tile), P -> bf16 by v_cvt_pk_bf16_f32 (the layer's pack_bf16<RTNE> is the integer form with a NaN
// guard: P needs neither), and the softmax step (fma logits, rescale skipped when no max moved,
// the bf16-P normaliser).
#pragma once
#include "moonmath/all.hpp"
#include "moonmath/tile.hpp"
#include "shared/attention_fwd_plan.h"

namespace attn950 {

using mm::bf16x8;
using mm::f32x4;
using Mfma = mm::Mfma16x16x32Bf16;         // the tile layer's shape: A/B/C lane layouts as in the header
using FragA = mm::FragA<Mfma>;
using FragB = mm::FragB<Mfma>;
using FragC = mm::FragC<Mfma>;
using mm::u32x2;
using mm::u32x4;
typedef short i16x4 __attribute__((ext_vector_type(4)));
typedef __attribute__((address_space(3))) uint8_t lds_u8;

constexpr float kNegInf = -__builtin_inff();

// ---- shapes -------------------------------------------------------------------------------------
// Compile-time features, flags not copies: off, the pipeline compiles to the plain kernel instruction for
// instruction. Softcap_: softcap_block between QK and the mask. Window_: a sliding window, i.e. a lower
// key bound per row in the mask and the tile's key loop clipped to the window. Sinks_: per-head sink logits
// joining each row's denominator (add_sink before the epilogue).
template <int Dqk_, int Dv_, bool Softcap_ = false, bool Window_ = false, bool Sinks_ = false>
struct FwdShape {
  static constexpr int Dqk = Dqk_, Dv = Dv_;
  static constexpr bool kSoftcap = Softcap_, kWindow = Window_, kSinks = Sinks_;
  static constexpr int kQkSteps = Dqk / 32;                 // MFMA k-steps per 16-key QK tile
  static constexpr int kDvTiles = Dv / 16;                  // 16-column output tiles
  static constexpr int kKeyTiles = kKvBlock / 16;           // 16-key tiles per block (4)
  static constexpr int kPvSteps = kKvBlock / 32;            // 32-key MFMA steps of PV (2)
  static constexpr uint32_t kKRow = Dqk * 2, kVRow = Dv * 2;  // LDS row bytes
  static constexpr uint32_t kKBytes = kKvBlock * kKRow, kVBytes = kKvBlock * kVRow;
  static constexpr uint32_t kStageBytes = kKBytes + kVBytes;
  static constexpr uint32_t kLdsBytes = 2 * kStageBytes;
  static constexpr int kKLoads = kKBytes / 1024 / kWaves;   // 16-byte direct loads per wave (64 lanes)
  static constexpr int kVLoads = kVBytes / 1024 / kWaves;
  static_assert(Dqk % 32 == 0 && Dv % 16 == 0, "head dims");
  static_assert(kKBytes % (1024 * kWaves) == 0 && kVBytes % (1024 * kWaves) == 0, "whole DMA rounds");
  static_assert(kDvTiles == 8, "lds_wait_tied() ties 8 V fragments");
};

// ---- small primitives (candidates for the common tile layer) ------------------------------------
MM_DEVICE u32x4 lds_read_b128(const lds_u8* p) { return *(const __attribute__((address_space(3))) u32x4*)p; }

// ds_read_b64_tr_b16: lane l of each 16-lane group gets element l%4 of the 4-bf16 rows supplied by
// lanes 4n + (l/4)%4, n = 0..3. Issued by inline asm: with the builtin, clang 22 makes every such read
// wait for all outstanding LDS DMA (vmcnt(0)), i.e. for the next block's K/V, which kills the overlap
// of DMA and math. The asm result must be retired by lds_wait_tied() before use (the emulator's
// hazard checker verifies it); "memory" keeps the read inside its barrier interval.
MM_DEVICE i16x4 lds_read_tr16_b64(const lds_u8* p) {
  i16x4 r;
  asm volatile("ds_read_b64_tr_b16 %0, %1" : "=v"(r) : "v"(__builtin_bit_cast(uint32_t, p)) : "memory");
  return r;
}
// s_waitcnt lgkmcnt(0) that the compiler cannot schedule a use of x[] before.
MM_DEVICE void lds_wait_tied(i16x4 (&x)[8]) {
  asm volatile("s_waitcnt lgkmcnt(0)"
               : "+v"(x[0]), "+v"(x[1]), "+v"(x[2]), "+v"(x[3]), "+v"(x[4]), "+v"(x[5]), "+v"(x[6]), "+v"(x[7]));
}

// Byte offset of 16-byte chunk c of row r in a swizzled LDS block of row_bytes per row.
MM_DEVICE uint32_t swz(uint32_t r, uint32_t c, uint32_t row_bytes) { return r * row_bytes + ((c ^ (r & 7u)) << 4); }

// Max / sum over the 4 lanes {j, j+16, j+32, j+48} that share a query row.
MM_DEVICE float row_max4(float v) {
  v = __builtin_fmaxf(v, __builtin_bit_cast(float, mm::swizzle_xor<16>(__builtin_bit_cast(uint32_t, v))));
  return __builtin_fmaxf(v, mm::xor_lane(v, 32));
}
MM_DEVICE float row_sum4(float v) {
  v += __builtin_bit_cast(float, mm::swizzle_xor<16>(__builtin_bit_cast(uint32_t, v)));
  return v + mm::xor_lane(v, 32);
}

// 8 f32 -> 8 bf16 (RTNE, v_cvt_pk_bf16_f32) as one MFMA operand.
MM_DEVICE bf16x8 to_bf16x8(f32x4 lo, f32x4 hi) {
  typedef float f32x8 __attribute__((ext_vector_type(8)));
  f32x8 v = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};
  return __builtin_convertvector(v, bf16x8);
}

// Output rounding: RTNE with any NaN -> 0x7FFF (v_cvt_pk_bf16_f32 would keep the payload).
MM_DEVICE uint32_t pack_out(float lo, float hi) { return mm::pack_bf16x2<mm::Round::RTNE>(lo, hi); }

// Byte extent of `rows` rows of `row_elems` elements `stride` elements apart (0 rows -> 0).
MM_DEVICE uint32_t extent_bytes(int32_t rows, int64_t stride, int32_t row_elems, int32_t elem_bytes) {
  return rows <= 0 ? 0u : (uint32_t)(((int64_t)(rows - 1) * stride + row_elems) * elem_bytes);
}

template <typename T>
MM_DEVICE const T* offset_elems(const T* p, int64_t e) { return p + e; }

// ---- tile partitioner ---------------------------------------------------------------------------
// Where a work item's rows and keys live: batch strides plus the sequence's first token (dense
// batch and packed varlen alike). Resolves the q/out/lse resources of the tile and hands out the K/V
// resources of each key block.
template <class Shape>
struct DenseTile {
  // Values, not references: the plan is read once into SGPRs (the V reads' "memory" clobber would
  // otherwise make the compiler re-load every field per block).
  const AttnFwdArgs a;
  const AttnWorkItem it;
  int32_t h, hk;
  const uint16_t* k_head;   // k of (batch, kv head), token 0 of the sequence
  const uint16_t* v_head;

  MM_DEVICE DenseTile(const AttnFwdArgs& a_, const AttnWorkItem& it_, int32_t h_, const uint16_t* k,
                      const uint16_t* v)
      : a(a_), it(it_), h(h_), hk(h_ / a_.group) {
    k_head = k + it.batch * a.k_batch + hk * a.k_head + (int64_t)it.k_tok0 * a.k_token;
    v_head = v + it.batch * a.v_batch + hk * a.v_head + (int64_t)it.k_tok0 * a.v_token;
  }
  MM_DEVICE int32_t rows() const { int32_t r = it.q_len - it.q_row0; return r < kTileRows ? r : kTileRows; }
  MM_DEVICE mm::buffer_rsrc q_rsrc(const uint16_t* q) const {
    const uint16_t* p = q + it.batch * a.q_batch + h * a.q_head + (int64_t)(it.q_tok0 + it.q_row0) * a.q_token;
    return mm::make_buffer(p, extent_bytes(rows(), a.q_token, Shape::Dqk, 2));
  }
  MM_DEVICE mm::buffer_rsrc o_rsrc(uint16_t* o) const {
    uint16_t* p = o + it.batch * a.o_batch + h * a.o_head + (int64_t)(it.q_tok0 + it.q_row0) * a.o_token;
    return mm::make_buffer(p, extent_bytes(rows(), a.o_token, Shape::Dv, 2));
  }
  MM_DEVICE mm::buffer_rsrc lse_rsrc(float* lse) const {
    float* p = lse + it.batch * a.lse_batch + h * a.lse_head + it.q_tok0 + it.q_row0;
    return mm::make_buffer(p, rows() > 0 ? (uint32_t)rows() * 4u : 0u);
  }
  // K / V rows [key0, key0 + 64) of the sequence, clipped to k_len: loads past the end return 0.
  MM_DEVICE int32_t block_rows(int32_t key0) const { int32_t r = it.k_len - key0; return r < kKvBlock ? r : kKvBlock; }
  MM_DEVICE mm::buffer_rsrc k_block(int32_t key0) const {
    return mm::make_buffer(k_head + (int64_t)key0 * a.k_token, extent_bytes(block_rows(key0), a.k_token, Shape::Dqk, 2));
  }
  MM_DEVICE mm::buffer_rsrc v_block(int32_t key0) const {
    return mm::make_buffer(v_head + (int64_t)key0 * a.v_token, extent_bytes(block_rows(key0), a.v_token, Shape::Dv, 2));
  }
};

// ---- pipeline state -----------------------------------------------------------------------------
template <class Shape>
struct WaveState {
  FragB q[kRowTilesPerWave][Shape::kQkSteps];       // Q^T operands, resident
  FragC o[kRowTilesPerWave][Shape::kDvTiles];       // O^T accumulators
  float m[kRowTilesPerWave];                        // running max (log2 units, row-uniform)
  float l[kRowTilesPerWave];                        // this lane's share of the running sum (fp32 p: the LSE)
  FragC lb[kRowTilesPerWave];                       // running sum of the bf16 P (every register = the row's)
};

// ---- stages -------------------------------------------------------------------------------------
// Q rows of this wave: lane (g, j) of row tile rt holds Q[row 32w + 16rt + j][32s + 8g .. +7].
template <class Shape>
MM_DEVICE void load_q(WaveState<Shape>& st, mm::buffer_rsrc q, int64_t q_token, uint32_t wave, uint32_t lane) {
  (void)lane;
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt)
#pragma unroll
    for (int s = 0; s < Shape::kQkSteps; ++s)
      mm::load_b(st.q[rt][s], q, (32u * wave + 16u * rt) * (uint32_t)q_token * 2u + 64u * s, (uint32_t)q_token * 2u);
}

// A negative softmax_scale: s' = (-q) k with the scale |scale| (bf16 negation is exact).
template <class Shape>
MM_DEVICE void negate_q(WaveState<Shape>& st) {
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt)
#pragma unroll
    for (int s = 0; s < Shape::kQkSteps; ++s)
      st.q[rt][s].w ^= 0x80008000u;
}

// DMA one K block and one V block into a stage: the CTA's 8 waves each issue kKLoads + kVLoads
// 16-byte direct-to-LDS loads; LDS chunk position p = 64*load + lane is row p / chunks, chunk
// p % chunks, fetched from global chunk (p % chunks) ^ (row & 7) (the swizzle).
template <int RowBytes, int Loads>
MM_DEVICE void dma_rows(mm::buffer_rsrc src, int64_t token_stride, lds_u8* dst, uint32_t wave, uint32_t lane) {
  constexpr uint32_t kChunks = RowBytes / 16;
#pragma unroll
  for (int i = 0; i < Loads; ++i) {
    const uint32_t base = (wave * Loads + i) * 64u;
    const uint32_t p = base + lane;
    const uint32_t row = p / kChunks, c = (p % kChunks) ^ (row & 7u);
    mm::buffer_load_to_lds<16>(src, (void*)(dst + base * 16u), row * (uint32_t)token_stride * 2u + c * 16u);
  }
}

template <class Shape, class Tile>
MM_DEVICE void dma_block(const Tile& tile, int32_t key0, lds_u8* stage, uint32_t wave, uint32_t lane) {
  dma_rows<Shape::kKRow, Shape::kKLoads>(tile.k_block(key0), tile.a.k_token, stage, wave, lane);
  dma_rows<Shape::kVRow, Shape::kVLoads>(tile.v_block(key0), tile.a.v_token, stage + Shape::kKBytes, wave, lane);
}

// S^T for the wave's row tiles against the 64 keys of a stage: A = K tile t from the swizzled LDS
// block (one b128 read feeds both row tiles), B = the resident Q^T.
template <class Shape>
MM_DEVICE void qk(const WaveState<Shape>& st, const lds_u8* kblk, FragC (&s)[kRowTilesPerWave][Shape::kKeyTiles],
                  uint32_t lane) {
  (void)lane;
  using KLayout = mm::XorLds<Shape::kKRow>;   // chunk c of row r at chunk c ^ (r & 7): see the header
#pragma unroll
  for (int t = 0; t < Shape::kKeyTiles; ++t) {
#pragma unroll
    for (int rt = 0; rt < kRowTilesPerWave; ++rt) s[rt][t] = mm::zeros<Mfma>();
#pragma unroll
    for (int ks = 0; ks < Shape::kQkSteps; ++ks) {
      FragA kf;
      mm::lds_load_a<KLayout>(kf, (const void*)kblk, 16u * t, 32u * ks);
#pragma unroll
      for (int rt = 0; rt < kRowTilesPerWave; ++rt) mm::mma(s[rt][t], kf, st.q[rt][ks], s[rt][t]);
    }
  }
}

// Gemma-2 soft-cap of the raw scores: s -> tanh(|scale| s / cap) = 1 - 2 / (1 + 2^(s pre2)), pre2 =
// 2 |scale| log2(e) / cap; the softmax then multiplies by c = cap log2(e), so its logits are
// cap tanh(scale s / cap) in log2 units. exp2 overflowing to inf gives rcp = 0, t = 1 (no NaN); tanh is
// monotone, so the max-then-scale of softmax_step stays exact. Before the mask: a masked key stays -inf.
template <class Shape>
MM_DEVICE void softcap_block(FragC (&s)[kRowTilesPerWave][Shape::kKeyTiles], float pre2) {
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt)
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        s[rt][t].v[r] = __builtin_fmaf(-2.f, mm::rcp(1.f + mm::exp2(s[rt][t].v[r] * pre2)), 1.f);
}

// Keys at or past a row's limit (k_len, or the causal diagonal) -> -inf. Only blocks that cross a
// limit of the wave's rows pay for it (a wave-uniform branch).
template <class Shape>
MM_DEVICE void mask_block(FragC (&s)[kRowTilesPerWave][Shape::kKeyTiles], int32_t key0,
                          const int32_t (&limit)[kRowTilesPerWave], uint32_t lane) {
  const int32_t g = (int32_t)(lane >> 4);
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt)
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        if (key0 + 16 * t + 4 * g + r >= limit[rt]) s[rt][t].v[r] = kNegInf;
}

// The window form: keys below a row's lower bound lo go too (the upper bound is in limit).
template <class Shape>
MM_DEVICE void mask_block_window(FragC (&s)[kRowTilesPerWave][Shape::kKeyTiles], int32_t key0,
                                 const int32_t (&limit)[kRowTilesPerWave], const int32_t (&lo)[kRowTilesPerWave],
                                 uint32_t lane) {
  const int32_t g = (int32_t)(lane >> 4);
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt)
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int32_t key = key0 + 16 * t + 4 * g + r;
        if (key >= limit[rt] || key < lo[rt]) s[rt][t].v[r] = kNegInf;
      }
}

// Online softmax over one block of raw scores s (c = |scale| log2 e > 0, so max(c s) = c max(s)):
// new row max m (log2 units), rescale of O and l, p = exp2(fma(s, c, -m)) in place.
template <class Shape>
MM_DEVICE void softmax_step(WaveState<Shape>& st, FragC (&s)[kRowTilesPerWave][Shape::kKeyTiles], float c) {
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt) {
    float mx = kNegInf;
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 4; ++r) mx = __builtin_fmaxf(mx, s[rt][t].v[r]);
    mx = row_max4(mx) * c;
    const float m_new = __builtin_fmaxf(st.m[rt], mx);
    // A row that has seen no key yet keeps m = -inf: use 0 as its reference so exp2 gives 0, not NaN.
    const float m_ref = m_new == kNegInf ? 0.f : m_new;
    const float r_old = mm::exp2(st.m[rt] - m_ref);   // 0 when m was -inf; O and l are 0 then anyway
    st.m[rt] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float p = mm::exp2(__builtin_fmaf(s[rt][t].v[r], c, -m_ref));
        s[rt][t].v[r] = p;
        sum += p;
      }
    st.l[rt] = st.l[rt] * r_old + sum;
    // Rescale O only when some row of the tile moved its max (wave-uniform; rare after a few blocks).
    if (__builtin_amdgcn_ballot_w64(r_old != 1.f)) {
      mm::scale(st.lb[rt], r_old);
#pragma unroll
      for (int n = 0; n < Shape::kDvTiles; ++n) mm::scale(st.o[rt][n], r_old);
    }
  }
}

// O^T += V^T P^T over the 64 keys of a stage.
template <class Shape>
MM_DEVICE void pv(WaveState<Shape>& st, const FragC (&p)[kRowTilesPerWave][Shape::kKeyTiles], const lds_u8* vblk,
                  uint32_t lane) {
  const uint32_t g = lane >> 4, sl = lane & 15u;
  FragB pb[kRowTilesPerWave][Shape::kPvSteps];      // P^T: two packed 16-key C tiles per 32-key step
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt)
#pragma unroll
    for (int c = 0; c < Shape::kPvSteps; ++c) pb[rt][c].w = __builtin_bit_cast(u32x4, to_bf16x8(p[rt][2 * c].v, p[rt][2 * c + 1].v));
  // lb += row sums of the bf16 P the PV MFMAs use (an MFMA against ones): normalising by them makes the
  // weights of each output row sum to 1 exactly (measured: lower rel. Frobenius error on every peer shape);
  // the fp32 sum l stays for the LSE, which it gets ~1000x more accurately.
  const FragA ones = {u32x4{0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u}};
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt)
#pragma unroll
    for (int c = 0; c < Shape::kPvSteps; ++c) mm::mma(st.lb[rt], ones, pb[rt][c], st.lb[rt]);
#pragma unroll
  for (int c = 0; c < Shape::kPvSteps; ++c) {
    // Source lane sl of group g supplies key 16(2c+h) + 4g + sl/4, columns 16n + 4(sl%4) .. +3.
    const uint32_t key_lo = 32u * c + 4u * g + (sl >> 2), key_hi = key_lo + 16u;
    i16x4 lo[Shape::kDvTiles], hi[Shape::kDvTiles];
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) {
      const uint32_t chunk = 2u * n + ((sl & 3u) >> 1), half = (sl & 1u) * 8u;
      lo[n] = lds_read_tr16_b64(vblk + swz(key_lo, chunk, Shape::kVRow) + half);
      hi[n] = lds_read_tr16_b64(vblk + swz(key_hi, chunk, Shape::kVRow) + half);
    }
    lds_wait_tied(lo);
    lds_wait_tied(hi);
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) {
      const mm::i16x8 a8 = {lo[n][0], lo[n][1], lo[n][2], lo[n][3], hi[n][0], hi[n][1], hi[n][2], hi[n][3]};
      const FragA vf = {__builtin_bit_cast(u32x4, a8)};
#pragma unroll
      for (int rt = 0; rt < kRowTilesPerWave; ++rt) mm::mma(st.o[rt][n], vf, pb[rt][c], st.o[rt][n]);
    }
  }
}

// gpt-oss sinks: the head's sink logit (log2 units, sink2 = sink log2 e, unscaled) joins every row's
// denominator as one more "key" with no value: M = max(m, sink2), O and both sums rescaled by 2^(m - M),
// 2^(sink2 - M) added to the sums (once per row: lane group 0 for the per-lane share l; every register of the
// row-uniform lb). A row that saw no key ends with O = 0 and lse = sink.
template <class Shape>
MM_DEVICE void add_sink(WaveState<Shape>& st, float sink2, uint32_t lane) {
  const bool first_group = (lane >> 4) == 0;
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt) {
    const float M = __builtin_fmaxf(st.m[rt], sink2);
    const float M_ref = M == kNegInf ? 0.f : M;          // sink -inf and no key: nothing to add
    const float r = mm::exp2(st.m[rt] - M_ref), e = mm::exp2(sink2 - M_ref);
    st.m[rt] = M;
    st.l[rt] = st.l[rt] * r + (first_group ? e : 0.f);
    mm::scale(st.lb[rt], r);
#pragma unroll
    for (int i = 0; i < 4; ++i) st.lb[rt].v[i] += e;
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) mm::scale(st.o[rt][n], r);
  }
}

// Final rows: out = O / l in bf16 (RTNE, canonical NaN), lse = (m + log2 l) * ln 2.
template <class Shape>
MM_DEVICE void store_final(const WaveState<Shape>& st, mm::buffer_rsrc o, int64_t o_token, mm::buffer_rsrc lse,
                           bool want_lse, uint32_t wave, uint32_t lane) {
  const uint32_t g = lane >> 4, j = lane & 15u;
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt) {
    const uint32_t row = 32u * wave + 16u * rt + j;
    const float l = row_sum4(st.l[rt]);
    const float lb = st.lb[rt].v[0];
    const float inv = lb > 0.f ? mm::rcp(lb) : 0.f;
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) {
      const f32x4 v = st.o[rt][n].v * inv;
      const u32x2 w = {pack_out(v[0], v[1]), pack_out(v[2], v[3])};
      mm::buffer_store_b64(w, o, row * (uint32_t)o_token * 2u + (16u * n + 4u * g) * 2u);
    }
    if (want_lse && g == 0) {
      const float x = l > 0.f ? (st.m[rt] + mm::log2(l)) * mm::kLn2 : kNegInf;
      mm::buffer_store_f32(x, lse, row * 4u);
    }
  }
}

// A split part: fp32 O (unnormalised) and (m, l, lb) per row into its workspace slot.
// ws_o: [slot][head][kTileRows][Dv]; ws_ml: [slot][head][kTileRows][4] = m, l (fp32 p), lb (bf16 P), 0.
template <class Shape>
MM_DEVICE void store_part(const WaveState<Shape>& st, float* ws_o, float* ws_ml, int32_t slot, int32_t h,
                          int32_t heads, uint32_t wave, uint32_t lane) {
  const uint32_t g = lane >> 4, j = lane & 15u;
  const int64_t tile = (int64_t)slot * heads + h;
  const mm::buffer_rsrc ro = mm::make_buffer(ws_o + tile * kTileRows * Shape::Dv, kTileRows * Shape::Dv * 4u);
  const mm::buffer_rsrc rml = mm::make_buffer(ws_ml + tile * kTileRows * 4, kTileRows * 16u);
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt) {
    const uint32_t row = 32u * wave + 16u * rt + j;
    const float l = row_sum4(st.l[rt]);
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n)
      mm::buffer_store_b128(__builtin_bit_cast(u32x4, st.o[rt][n].v), ro, (row * Shape::Dv + 16u * n + 4u * g) * 4u);
    if (g == 0) {
      const u32x4 ml = {__builtin_bit_cast(uint32_t, st.m[rt]), __builtin_bit_cast(uint32_t, l),
                        __builtin_bit_cast(uint32_t, st.lb[rt].v[0]), 0u};
      mm::buffer_store_b128(ml, rml, row * 16u);
    }
  }
}

// ---- the kernel body ----------------------------------------------------------------------------
struct FwdPointers {
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* o;
  float* lse;
  float* ws_o;
  float* ws_ml;
  const float* sinks;   // the *_sinks kernels: fp32 [heads_q] sink logits (natural-log units); else null
};

// Tile: the partitioner (DenseTile; PagedTile in attention_fwd_paged.hpp), built from the item and
// the pointers plus its own extra arguments.
template <class Shape, class Tile = DenseTile<Shape>, class... TileExtra>
MM_DEVICE void attention_fwd(const AttnFwdArgs* __restrict__ plan, const FwdPointers& ptr, lds_u8* lds,
                             const TileExtra&... extra) {
  const AttnFwdArgs a = *plan;
  const AttnWorkItem it = reinterpret_cast<const AttnWorkItem*>(plan + 1)[mm::block_id_x()];
  const int32_t h = (int32_t)mm::block_id_y();
  const uint32_t wave = mm::wave_id(), lane = mm::lane_id();
  const Tile tile(a, it, h, ptr.k, ptr.v, extra...);
  const bool causal = (a.flags & kFlagCausal) != 0;

  WaveState<Shape> st;
  load_q(st, tile.q_rsrc(ptr.q), a.q_token, wave, lane);
  if (a.flags & kFlagNegScale) negate_q(st);
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt) {
    st.m[rt] = kNegInf;
    st.l[rt] = 0.f;
    st.lb[rt] = mm::zeros<Mfma>();
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) st.o[rt][n] = mm::zeros<Mfma>();
  }
  // Row limits: key < limit. Causal is bottom-right aligned: row i sees keys <= i + k_len - q_len.
  const int32_t diag = it.k_len - it.q_len + 1;
  const int32_t wave_row0 = it.q_row0 + 32 * (int32_t)wave;
  int32_t limit[kRowTilesPerWave];
#pragma unroll
  for (int rt = 0; rt < kRowTilesPerWave; ++rt) {
    const int32_t row = wave_row0 + 16 * rt + (int32_t)(lane & 15u);
    limit[rt] = causal && row + diag < it.k_len ? row + diag : it.k_len;
  }
  // The wave's smallest limit decides whether a block needs the mask at all.
  int32_t wave_limit = causal && wave_row0 + diag < it.k_len ? wave_row0 + diag : it.k_len;
  int32_t kv_begin = it.kv_begin, kv_end = it.kv_end;
  // Window: row i sees keys [d - left, d + right], d = i + k_len - q_len (-1: unbounded). The host planner
  // already plans only the window's blocks; the clip here makes a device-written plan (the full causal
  // range) skip them too. wave_lo is the largest lower bound of the wave's rows (its last row's).
  int32_t lo[kRowTilesPerWave];
  int32_t wave_lo = 0;
  if constexpr (Shape::kWindow) {
    const int32_t off = it.k_len - it.q_len, left = a.window_left, right = a.window_right;
#pragma unroll
    for (int rt = 0; rt < kRowTilesPerWave; ++rt) {
      const int32_t row = wave_row0 + 16 * rt + (int32_t)(lane & 15u);
      if (right >= 0 && row + off + right + 1 < limit[rt]) limit[rt] = row + off + right + 1;
      lo[rt] = left >= 0 ? row + off - left : -kKvBlock;
    }
    if (right >= 0 && wave_row0 + off + right + 1 < wave_limit) wave_limit = wave_row0 + off + right + 1;
    wave_lo = left >= 0 ? wave_row0 + 31 + off - left : -kKvBlock;
    if (left >= 0) {
      const int32_t tile_lo = it.q_row0 + off - left;
      if (tile_lo > kv_begin) kv_begin = tile_lo & ~(kKvBlock - 1);
    }
    if (right >= 0) {
      const int32_t last = (it.q_len - it.q_row0 < kTileRows ? it.q_len : it.q_row0 + kTileRows) - 1;
      if (last + off + right + 1 < kv_end) kv_end = last + off + right + 1;
    }
  }

  if (kv_begin < kv_end) dma_block<Shape>(tile, kv_begin, lds, wave, lane);
  uint32_t stage = 0;
  for (int32_t key0 = kv_begin; key0 < kv_end; key0 += kKvBlock) {
    mm::wait_vmcnt<0>();
    mm::block_sync();
    lds_u8* cur = lds + stage * Shape::kStageBytes;
    if (key0 + kKvBlock < kv_end) dma_block<Shape>(tile, key0 + kKvBlock, lds + (stage ^ 1u) * Shape::kStageBytes, wave, lane);
    FragC s[kRowTilesPerWave][Shape::kKeyTiles];
    qk(st, cur, s, lane);
    if constexpr (Shape::kSoftcap) softcap_block<Shape>(s, a.softcap_pre2);
    if constexpr (Shape::kWindow) {
      if (key0 + kKvBlock > wave_limit || key0 < wave_lo) mask_block_window<Shape>(s, key0, limit, lo, lane);
    } else {
      if (key0 + kKvBlock > wave_limit) mask_block<Shape>(s, key0, limit, lane);
    }
    softmax_step(st, s, a.scale_log2);
    pv(st, s, cur + Shape::kKBytes, lane);
    stage ^= 1u;
  }

  if constexpr (Shape::kSinks) {
    if (it.slot < 0 || it.sink_part) add_sink(st, ptr.sinks[h] * mm::kLog2e, lane);
  }
  if (it.slot < 0)
    store_final(st, tile.o_rsrc(ptr.o), a.o_token, tile.lse_rsrc(ptr.lse), (a.flags & kFlagLse) != 0, wave, lane);
  else
    store_part(st, ptr.ws_o, ptr.ws_ml, it.slot, h, a.heads_q, wave, lane);
}

}  // namespace attn950
