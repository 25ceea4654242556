// Attention forward, gfx950 (MI355X): the pipeline, its stages and the tile partitioner.
//
// Tiling. A workgroup of 8 waves owns one work item (csrc/shared/attention_fwd_plan.h): kTileRows =
// 256 query rows of one q head against a key range, walked in blocks of kKvBlock = 64 keys. Wave w
// owns rows 32w .. 32w+31 as one 32-row MFMA tile; every wave reads every K/V block.
//
// MFMA: v_mfma_f32_32x32x16_bf16 for QK and PV (8 passes: a 32-cycle MFMA leaves the VALU of the other
// wave of its SIMD 6 of 8 issue slots, where a 16-cycle 16x16x32 left it 1 of 4). Lane = 32h + i
// (h = lane half 0..1, i = 0..31). Layout (emulator mfma.cpp, AMD calculator): A[i][k] in lane
// 32*(k/8)+i element k%8, B[k][j] in lane 32*(k/8)+j element k%8, D[i][j] in register
// 4*(i/8) + i%4 of lane 32*((i/4)%2) + j.
//   QK: S^T = K Q^T. A = K (i = key of a 32-key tile t, k = d), B = Q^T (j = query row), Dqk/16
//       steps. Lane (h, j) ends with S[row j][key 32t + 8(r/4) + 4h + r%4] in register r: a row's
//       64 scores sit in 2 lanes (j, j + 32), 32 per lane.
//   PV: O^T = V^T P^T. B = P^T straight from the QK registers: step c (16 keys, registers 8(c%2) ..
//       +7 of key tile c/2) contracts over k = 8(e/4) + 4h + e%4 <-> key 16c + k (the tile layer's
//       KOfPackedC order; A uses the same one), so P moves no data. A = V^T: lane (h, i) needs
//       V[16c + 8(e/4) + 4h + e%4][32n + i], e = 0..7: two ds_read_b64_tr_b16 from V key-major in LDS.
//       D: lane (h, j) holds O[row j][32n + 8(r/4) + 4h + r%4], n = 0..Dv/32-1 (64 fp32 per lane).
//   Row sums of the bf16 P (the normaliser): one more MFMA per step, a 16x16x32 (4 passes) against lane-selected
//   ones that reads the step's P^T registers as its B operand (row_sum_ones; Dqk 256: a 32x32x16 against ones).
//
// LDS (160 KiB on gfx950; 64 KiB for Dqk 128, 80 KiB for 192): two K buffers [64][Dqk] and two V
// buffers [64][Dv] bf16, key-major, rows unpadded, 16-byte chunks permuted within a row so that the
// reads are free of bank conflicts in the 64-bank model (a b128 read serves 16 lanes per cycle, a
// b64 one 32): KRows - the 16 lanes of a QK read (16 consecutive rows, one chunk) hit 16 distinct
// chunk slots mod 256 B: chunk c of row r at c ^ (r & 15) (Dqk 128: 16 chunks a row) or, for rows of
// 8 mod 16 chunks (Dqk 192), at c ^ ((r >> 1) & 7) within its group of 8 (rows alternate by 128 B).
// VRows - the 32 lanes of a transposing read (4 consecutive rows x 4 consecutive chunks): chunk c of
// row r at c ^ 4(r & 3). The direct-to-LDS loads write 16 bytes per lane at M0 + 16*lane, so the
// permutation is applied on the global side (each lane fetches the chunk that belongs at its slot).
//
// Wave roles: ping-pong. Waves 0..3 (group A) and 4..7 (group B) share the 4 SIMDs pairwise (wave w
// on SIMD w % 4). Each wave alternates an MFMA phase M(n) = [PV(n-1), QK(n)] (LDS reads and MFMAs, at
// s_setprio 1) and a softmax phase X(n) = [soft-cap, mask, online softmax, P -> bf16] (VALU and
// exp2); group B runs one phase behind A, so on every SIMD one wave's softmax overlaps the other's
// MFMAs. One s_barrier between phases (all 8 waves):
//
//   global phase   2n            2n+1
//   group A        M(n)          X(n)
//   group B        X(n-1)        M(n)
//
// Buffers: K(n) in K buffer n % 2 (read in phases 2n, 2n+1), V(n) in V buffer n % 2 (read by PV(n) in
// phases 2n+2, 2n+3). In phase 2n every wave issues its share of the DMA of K(n+1) and V(n) (their buffers'
// previous blocks K(n-1), V(n-2) were last read in phase 2n-1; group A early in its MFMA phase, group B before
// or, dense bf16 d128, after its softmax) and waits for it (vmcnt(0)) at the end of phase 2n+1. Prologue (dense bf16): group
// A alone loads K(0), every wave issues its phase-0 share of K(1), V(0) behind it, and only group A waits (for Q and
// K(0)) before the first barrier, so group B's set-up does not delay block 0. LDS reads are inline asm in a
// ring of kPrefetch fragments with counted lgkmcnt waits tied to each fragment (the builtin transposing
// read made clang wait for all outstanding LDS DMA; the hazard checker verifies the manual waits).
// Epilogue: O / lb (lb = the sum of the bf16 P, by MFMA against ones; 0 -> 0) rounded RTNE with
// canonical NaN 0x7FFF, LSE = (m + log2 l) ln 2; a split part writes fp32 (O, m, l) to its workspace
// slot instead (attention_merge.hip combines them).
//
// Head dims (issue 17, FwdShape): (Dqk, Dv) = (64, 64), (80, 80), (96, 96), (128, 128), (192, 128), (256, 128). Dqk
// needs only the 16-wide k-step (80: 5 steps); Dv is padded to the 32-column output tile in LDS (80 -> 96: the pad
// chunks DMA'd as zeros, the pad columns of O never stored). Rows of 16 or 24 chunks get the conflict-free KRows /
// VRows above, rows of 8 chunks (Dqk/Dv 64) their 8-chunk forms; K rows of 12 and 10 chunks (96, 80) swap chunks by
// r / 4 within groups of 4 and by r / 8 within pairs (conflict-free QK reads); V rows of 12 chunks (96, 80 padded)
// need none (12 r mod 16 already spreads 4 consecutive rows over the 4 chunk groups of a transposing read). A block
// that is no whole number of DMA rounds over 8 waves leaves the last waves idle in the last round. Dqk = Dv = 256
// runs as two launches of the (256, 128) kernels, one per half of V's and out's columns (kernel.py COLUMN_PASSES):
// one 32-row tile per wave cannot hold 128 fp32 of O and 64 of Q per lane beside the fragments in flight; (256, 128)
// holds 64 + 64 in exactly 256 VGPRs (K addresses 8 with immediates for steps 8..15, prefetch 2, the ones fragment
// rematerialised per phase).
//
// fp8 K/V (issue 17, FwdShape KvFp8): K and V are OCP e4m3fn in memory, dequantised on their way to LDS (exact: every
// e4m3fn value is a bf16 value). The DMA slot of a phase issues 16-byte buffer loads into VGPRs instead of the
// direct-to-LDS loads, the wait slot (where the bf16 kernel waits vmcnt(0)) widens them into the same permuted bf16
// LDS rows (ds_write_b128) and waits for the writes before the phase barrier; K's descale joins the logit factor,
// V's scales O once after the key loop. Every later stage is the bf16 kernel's. The (256, 128) kernels (kFp8Staged)
// have no VGPRs to hold the loads across a phase: their 16-byte loads go direct to an LDS staging area after the bf16
// buffers (one block of fp8 K and V rows) and the wait slot widens from there (Fp8Rows).
//
// Where rows and keys live is the partitioner's business (DenseTile: batch strides + token offsets of
// a work item); the pipeline sees buffer resources and per-block row counts only.
//
// Fragments are the tile layer's (moonmath/tile.hpp): FragA/FragB/FragC<Mfma32x32x16Bf16>, mma,
// load_b (Q from global), as_b_operand's KOfPackedC order. Local here: the LDS row permutations
// (KRows/VRows, the layer's policy interface), the asm LDS reads with tied counted waits, the CTA-wide
// direct-to-LDS staging (8 waves filling one block), P -> bf16 by v_cvt_pk_bf16_f32 and the softmax
// step (fma logits, rescale skipped when no max moved, the bf16-P normaliser).
#pragma once
#include "moonmath/all.hpp"
#include "moonmath/tile.hpp"
#include "shared/attention_fwd_plan.h"

namespace attn950 {

using mm::bf16x8;
using mm::f32x4;
using mm::f32x16;
using Mfma = mm::Mfma32x32x16Bf16;         // the tile layer's shape: A/B/C lane layouts as in the header
using FragA = mm::FragA<Mfma>;
using FragB = mm::FragB<Mfma>;
using FragC = mm::FragC<Mfma>;
using mm::u32x2;
using mm::u32x4;
typedef short i16x4 __attribute__((ext_vector_type(4)));
typedef __attribute__((address_space(3))) uint8_t lds_u8;

constexpr float kNegInf = -__builtin_inff();
constexpr int kWaveRows = kTileRows / kWaves;   // 32: one 32x32 MFMA tile of query rows per wave
constexpr int kGroupWaves = kWaves / 2;         // ping-pong groups: waves 0..3 lead, 4..7 lag a phase
static_assert(kWaveRows == Mfma::N, "one 32-row tile per wave");

// Lambdas are inlined like MM_DEVICE functions (left to the inliner, the largest feature kernels kept
// their fragments in scratch).
#define MM_INLINE_LAMBDA __attribute__((always_inline))

// ---- compile-time loops (constexpr indices for asm immediates and counted waits) ----------------
template <int V> struct Ic { static constexpr int value = V; };
template <int... I> struct ISeq {};
template <int N, int... I> struct MakeISeq : MakeISeq<N - 1, N - 1, I...> {};
template <int... I> struct MakeISeq<0, I...> { typedef ISeq<I...> type; };
template <class F, int... I> MM_DEVICE void static_for_impl(F& f, ISeq<I...>) { (f(Ic<I>{}), ...); }
template <int N, class F> MM_DEVICE void static_for(F f) { static_for_impl(f, typename MakeISeq<N>::type{}); }

// ---- LDS row layouts (the tile layer's swizzle-policy interface: kRowBytes, offset, byte_of) ---
// K rows, read 16 consecutive rows x one 16-byte chunk per 16 lanes (QK's A operand).
template <int RowBytes>
struct KRows {
  static constexpr int kRowBytes = RowBytes, kChunks = RowBytes / 16;
  static constexpr uint32_t chunk(uint32_t row, uint32_t c) {
    if constexpr (kChunks % 16 == 0) return c ^ (row & 15u);
    else if constexpr (kChunks % 16 == 8) return (c & ~7u) | ((c ^ (row >> 1)) & 7u);
    else if constexpr (kChunks % 8 == 0) return c ^ (row & 7u);
    // 12 chunks (Dqk 96): rows 4 apart start on the same slot mod 256 B (12 r = 12 (r & 3) mod 16), so rows r,
    // r + 4, r + 8, r + 12 swap chunks within their group of 4 by r / 4: slot mod 4 then differs by r / 4.
    else if constexpr (kChunks % 4 == 0) return c ^ ((row >> 2) & 3u);
    // 10 chunks (Dqk 80): 10 r mod 16 repeats after 8 rows, all even; rows 8 .. 15 swap chunk pairs (odd slots).
    else if constexpr (kChunks % 2 == 0) return c ^ ((row >> 3) & 1u);
    else return c;
  }
  static constexpr uint32_t offset(uint32_t row, uint32_t byte) { return row * RowBytes + (chunk(row, byte / 16) << 4) + byte % 16; }
  static constexpr uint32_t byte_of(uint32_t row, uint32_t phys) { return (chunk(row, phys / 16) << 4) + phys % 16; }  // an involution
};
// V rows, read 4 consecutive rows x 4 consecutive chunks per 32 lanes (the transposing PV reads).
template <int RowBytes>
struct VRows {
  static constexpr int kRowBytes = RowBytes, kChunks = RowBytes / 16;
  static constexpr uint32_t chunk(uint32_t row, uint32_t c) {
    if constexpr (kChunks % 16 == 0) return c ^ ((row & 3u) << 2);
    else if constexpr (kChunks % 16 == 8) return c ^ (((row >> 1) & 1u) << 2);
    else return c;
  }
  static constexpr uint32_t offset(uint32_t row, uint32_t byte) { return row * RowBytes + (chunk(row, byte / 16) << 4) + byte % 16; }
  static constexpr uint32_t byte_of(uint32_t row, uint32_t phys) { return (chunk(row, phys / 16) << 4) + phys % 16; }
};

// ---- shapes -------------------------------------------------------------------------------------
// Compile-time features, flags not copies: off, the pipeline compiles to the plain kernel instruction for
// instruction. Softcap_: softcap_block between QK and the mask. Window_: a sliding window, i.e. a lower
// key bound per row in the mask and the tile's key loop clipped to the window. Sinks_: per-head sink logits
// joining each row's denominator (add_sink before the epilogue).
// KvFp8_: K and V are OCP e4m3fn in memory (see the header); LDS holds bf16 either way.
template <bool C, class T, class F> struct Pick { typedef T type; };
template <class T, class F> struct Pick<false, T, F> { typedef F type; };
template <bool Fp8> struct KvElem { typedef uint16_t type; };
template <> struct KvElem<true> { typedef uint8_t type; };

template <int Dqk_, int Dv_, bool Softcap_ = false, bool Window_ = false, bool Sinks_ = false, bool KvFp8_ = false>
struct FwdShape {
  static constexpr int Dqk = Dqk_, Dv = Dv_;
  static constexpr bool kSoftcap = Softcap_, kWindow = Window_, kSinks = Sinks_, kKvFp8 = KvFp8_;
  typedef typename KvElem<KvFp8_>::type KvT;                // K/V element in memory
  static constexpr int kKvBytes = sizeof(KvT);
  static constexpr int kDvPad = (Dv + 31) / 32 * 32;        // V row in LDS, O columns computed (80 -> 96)
  static constexpr int kQkSteps = Dqk / 16;                 // MFMA k-steps per 32-key QK tile
  static constexpr int kDvTiles = kDvPad / 32;              // 32-column output tiles
  static constexpr int kKeyTiles = kKvBlock / 32;           // 32-key tiles per block (2)
  static constexpr int kPvSteps = kKvBlock / 16;            // 16-key MFMA steps of PV (4)
  static constexpr uint32_t kKRow = Dqk * 2, kVRow = kDvPad * 2;  // LDS row bytes
  static constexpr uint32_t kKBytes = kKvBlock * kKRow, kVBytes = kKvBlock * kVRow;
  static constexpr uint32_t kKBuf0 = 0, kVBuf0 = 2 * kKBytes;   // K buffers 0, 1 then V buffers 0, 1
  // fp8 K/V of the (256, 128) kernels: staged in LDS (Fp8Rows' Staged form: their registers are all taken), one
  // block's fp8 K then V rows after the bf16 buffers (each block is staged and widened within two phases).
  static constexpr bool kFp8Staged = KvFp8_ && Dqk == 256;
  static constexpr uint32_t kStageK = 2 * (kKBytes + kVBytes), kStageV = kStageK + kKvBlock * Dqk;
  static constexpr uint32_t kLdsBytes = kStageK + (kFp8Staged ? kKvBlock * (Dqk + Dv) : 0);
  using KLayout = KRows<kKRow>;
  using VLayout = VRows<kVRow>;
  // The row sums of the bf16 P (lb): one 16x16x32 MFMA per 16-key step (4 passes, half a 32x32x16's 8) against the
  // lane-selected ones of row_sum_ones; Dqk 256 keeps the 32x32x16 against ones (its register budget: row_sum_ones).
  using RowSumMfma = typename Pick<Dqk == 256, mm::Mfma32x32x16Bf16, mm::Mfma16x16x32Bf16>::type;
  static_assert(Dqk % 16 == 0 && Dv % 16 == 0, "head dims");
  static_assert(kKBytes % 1024 == 0 && kVBytes % 1024 == 0, "whole 64-lane DMA rows");
  static_assert(!kKvFp8 || (Dqk % 16 == 0 && kDvPad == Dv), "fp8 K/V: rows of whole 16-byte pieces, Dv unpadded");
  static_assert(2 * kKBytes <= 65536 && 2 * kVBytes <= 65536, "ds_read immediate offsets within a buffer pair");
};

// ---- small primitives (candidates for the common tile layer) ------------------------------------
// LDS reads by inline asm: clang's builtin transposing read waits for all outstanding LDS DMA (vmcnt(0),
// the next block's K/V), which kills the DMA/math overlap; asm keeps program order among the reads and
// their waits. A result must be retired by wait_lds<N>() (counted: N later reads may stay in flight)
// before use; "memory" keeps the reads inside their barrier interval.
template <int Off>
MM_DEVICE u32x4 ds_read_b128(uint32_t addr) {
  u32x4 r;
  asm volatile("ds_read_b128 %0, %1 offset:%2" : "=v"(r) : "v"(addr), "n"(Off) : "memory");
  return r;
}
// ds_read_b64_tr_b16: lane l of each 16-lane group gets element l%4 of the 4-bf16 rows supplied by
// lanes 4n + (l/4)%4, n = 0..3.
template <int Off>
MM_DEVICE u32x2 ds_read_tr16_b64(uint32_t addr) {
  u32x2 r;
  asm volatile("ds_read_b64_tr_b16 %0, %1 offset:%2" : "=v"(r) : "v"(addr), "n"(Off) : "memory");
  return r;
}
// s_waitcnt lgkmcnt(N) that the compiler cannot schedule a use of x before.
template <int N>
MM_DEVICE void wait_lds(u32x4& x) {
  static_assert(N >= 0 && N < 16, "lgkmcnt is 4 bits");
  asm volatile("s_waitcnt lgkmcnt(%1)" : "+v"(x) : "n"(N));
}
template <int N>
MM_DEVICE void wait_lds(u32x2& x, u32x2& y) {
  static_assert(N >= 0 && N < 16, "lgkmcnt is 4 bits");
  asm volatile("s_waitcnt lgkmcnt(%2)" : "+v"(x), "+v"(y) : "n"(N));
}

// v_permlane32_swap: v and the value of lane l ^ 32, combined by op (max / sum over a row's two lanes).
// By asm: clang 22 folds the builtin's second result away when both inputs are the same value. The
// s_nop covers the VALU-write -> permlane-read hazard of the copy.
template <class Op>
MM_DEVICE float row_pair(float v, Op op) {
  uint32_t a = __builtin_bit_cast(uint32_t, v), b = a;
  asm volatile("s_nop 1\n\tv_permlane32_swap_b32 %0, %1" : "+v"(a), "+v"(b));
  return op(__builtin_bit_cast(float, a), __builtin_bit_cast(float, b));
}
MM_DEVICE float row_max2(float v) { return row_pair(v, mm::MaxOp{}); }
MM_DEVICE float row_sum2(float v) { return row_pair(v, mm::SumOp{}); }

// A wave-uniform value loaded by a vector load, moved to an SGPR by asm (readfirstlane of a value the compiler knows
// to be uniform is dropped, and the load's VGPR then lives through the key loop).
MM_DEVICE float in_sgpr(float v) {
  float r;
  asm volatile("v_readfirstlane_b32 %0, %1" : "=s"(r) : "v"(v));
  return r;
}

// 2 f32 -> 2 bf16 (RTNE, v_cvt_pk_bf16_f32) in one dword.
MM_DEVICE uint32_t cvt_pk_bf16(float lo, float hi) {
  typedef float f32x2 __attribute__((ext_vector_type(2)));
  typedef __bf16 bf16x2 __attribute__((ext_vector_type(2)));
  return __builtin_bit_cast(uint32_t, __builtin_convertvector((f32x2{lo, hi}), bf16x2));
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
  typedef typename Shape::KvT KvT;
  const KvT* k_head;        // k of (batch, kv head), token 0 of the sequence
  const KvT* v_head;

  MM_DEVICE DenseTile(const AttnFwdArgs& a_, const AttnWorkItem& it_, int32_t h_, const uint16_t* k,
                      const uint16_t* v)
      : a(a_), it(it_), h(h_), hk(h_ / a_.group) {
    k_head = reinterpret_cast<const KvT*>(k) + it.batch * a.k_batch + hk * a.k_head + (int64_t)it.k_tok0 * a.k_token;
    v_head = reinterpret_cast<const KvT*>(v) + it.batch * a.v_batch + hk * a.v_head + (int64_t)it.k_tok0 * a.v_token;
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
  // K / V rows [key0, key0 + 64) of the sequence, clipped to k_len: loads past the end return 0. Made in every
  // DMA phase by the scalar unit, in the issue slots of the wave's MFMAs or softmax: a whole block's extent is a
  // select of the constant, and key0 (>= 0) times a token stride (< 2^22, kernel.py) one 32 x 32 -> 64-bit product.
  MM_DEVICE int32_t block_rows(int32_t key0) const { int32_t r = it.k_len - key0; return r < kKvBlock ? r : kKvBlock; }
  MM_DEVICE uint32_t block_extent(int32_t key0, int64_t stride, int32_t elems) const {
    return key0 + kKvBlock <= it.k_len ? extent_bytes(kKvBlock, stride, elems, Shape::kKvBytes)
                                       : extent_bytes(block_rows(key0), stride, elems, Shape::kKvBytes);
  }
  MM_DEVICE static uint64_t rows_elems(int32_t key0, int64_t stride) { return (uint64_t)(uint32_t)key0 * (uint32_t)stride; }
  MM_DEVICE mm::buffer_rsrc k_block(int32_t key0) const {
    return mm::make_buffer(k_head + rows_elems(key0, a.k_token), block_extent(key0, a.k_token, Shape::Dqk));
  }
  MM_DEVICE mm::buffer_rsrc v_block(int32_t key0) const {
    return mm::make_buffer(v_head + rows_elems(key0, a.v_token), block_extent(key0, a.v_token, Shape::Dv));
  }
};

// ---- pipeline state -----------------------------------------------------------------------------
template <class Shape>
struct WaveState {
  FragB q[Shape::kQkSteps];       // Q^T operands, resident
  FragC o[Shape::kDvTiles];       // O^T accumulators
  FragB p[Shape::kPvSteps];       // P^T of the last softmax phase (bf16), consumed by the next PV
  float m;                        // running max of the lane's row (log2 units)
  float l;                        // this lane's share of the running sum (fp32 p: the LSE)
  mm::FragC<typename Shape::RowSumMfma> lb;   // running sum of the bf16 P (every register = the lane's row's)
  float r;                        // the last softmax phase's rescale factor of O and lb ...
  bool rescale;                   // ... still to apply (wave-uniform), by the next MFMA phase
};

// O and lb *= r, deferred from the softmax phase into the next MFMA phase, before its first MFMA: v_pk_mul_f32
// cannot issue within passes + 2 slots of an MFMA on the SIMD, and this is the one window without any
// (the other wave has just left its MFMA phase); in the softmax phase it would wait for the other wave's
// whole MFMA phase, and 65 unpacked v_mul would lengthen the phase that bounds the pipeline.
template <class Shape>
MM_DEVICE void rescale_pending(WaveState<Shape>& st) {
  if (st.rescale) {
    st.lb.v[0] *= st.r;   // every register of lb accumulates the same sums on its own: only v[0] is read
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) mm::scale(st.o[n], st.r);
    st.rescale = false;
  }
}

// Per-lane LDS byte addresses (loop-invariant; a read adds its block's rows and buffer as an immediate).
template <class Shape>
struct LdsAddrs {
  // Rows of 16n chunks permute each 256-byte group of 16 chunks alike (KRows): step s + 8 reads 256 bytes past step
  // s, an immediate, so Dqk 256 keeps 8 addresses, not 16.
  static constexpr int kK = Shape::KLayout::kChunks % 16 == 0 && Shape::kQkSteps > 8 ? 8 : Shape::kQkSteps;
  static constexpr int k_imm(int step) { return 256 * (step / kK); }
  uint32_t k[kK];                 // QK step s < kK: row i = lane % 32 of a key tile, chunk 2s + h
  uint32_t v[Shape::kDvTiles];    // PV n-tile n: the transposing read's row 4h + (lane%16)/4, chunk and half
  MM_DEVICE LdsAddrs(const lds_u8* lds, uint32_t lane) {
    const uint32_t i = lane & 31u, h = lane >> 5, t16 = lane & 15u;
    const uint32_t base = __builtin_bit_cast(uint32_t, lds);
#pragma unroll
    for (int s = 0; s < kK; ++s) k[s] = base + Shape::kKBuf0 + Shape::KLayout::offset(i, 16u * (2u * s + h));
    // Source lane (h, t16) of 16-lane group g supplies row 4h + t16/4 (of the 8-row half), columns
    // 32n + 16(g%2) + 4(t16%4) .. +3 (one 8-byte half chunk).
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n)
      v[n] = base + Shape::kVBuf0 + Shape::VLayout::offset(4u * h + (t16 >> 2), 64u * n + 32u * ((lane >> 4) & 1u) + 8u * (t16 & 3u));
  }
};

// The A operand of the row sums of P (lb += A P^T; B = P^T of a 16-key step, the registers the PV MFMAs use).
// 32x32x16 (Dqk 256): A = bf16 ones, every output row the sum of a query column; made by asm in each MFMA phase so
// that the compiler cannot keep its 4 VGPRs live through the key loop (the register-bound kernel).
// 16x16x32: the same B registers read as a 16x16x32 operand put query row 16(g%2) + j's keys in lane group g (lane
// 16g + j), so A[i][k] = 1 only where k's lane group g = k/8 has g%2 = (i/4)%2: output D[i][j], held by lane
// 16(i/4) + j, is then the sum of row 16((i/4)%2) + j - for lane 32h + j32 that is row j32, the lane's own. Lane
// 16g + i of A holds A[i][8g .. 8g+7]: ones when bit 4 of the lane equals bit 2, else zeros (loop-invariant).
template <class S>
MM_DEVICE mm::FragA<S> row_sum_ones() {
  uint32_t x = 0x3F803F80u;
  if constexpr (S::M == 32) {
    asm volatile("v_mov_b32 %0, 0x3f803f80" : "=v"(x));
  } else {
    const uint32_t lane = mm::lane_id();
    x = ((lane >> 4) ^ (lane >> 2)) & 1u ? 0u : x;
  }
  return mm::FragA<S>{u32x4{x, x, x, x}};
}

// The first MFMA of an accumulation: C = 0 as the inline constant (no zeroing moves).
MM_DEVICE FragC mfma_first(const FragA& a, const FragB& b) {
  FragC d;
  d.v = __builtin_amdgcn_mfma_f32_32x32x16_bf16(__builtin_bit_cast(bf16x8, a.w), __builtin_bit_cast(bf16x8, b.w),
                                                 f32x16{}, 0, 0, 0);
  return d;
}

// ---- stages -------------------------------------------------------------------------------------
// Q rows of this wave: lane (h, j) holds Q[row 32w + j][16s + 8h .. +7] for step s.
template <class Shape>
MM_DEVICE void load_q(WaveState<Shape>& st, mm::buffer_rsrc q, int64_t q_token, uint32_t wave, uint32_t lane) {
  (void)lane;
#pragma unroll
  for (int s = 0; s < Shape::kQkSteps; ++s)
    mm::load_b(st.q[s], q, kWaveRows * wave * (uint32_t)q_token * 2u + 32u * s, (uint32_t)q_token * 2u);
}

// A negative softmax_scale: s' = (-q) k with the scale |scale| (bf16 negation is exact).
template <class Shape>
MM_DEVICE void negate_q(WaveState<Shape>& st) {
#pragma unroll
  for (int s = 0; s < Shape::kQkSteps; ++s) st.q[s].w ^= 0x80008000u;
}

// The lanes of a block's DMA: the block's 64-lane loads of 16 bytes, kLoads per wave (wave w issues loads
// w kLoads .. +kLoads-1 that exist: when the block is no whole number of rounds over 8 waves - 96- and 80-wide rows -
// the last waves skip the last round, a wave-uniform branch). LDS position p = 64*load + lane is row p / chunks,
// physical chunk p % chunks, fetched from the logical byte Layout::byte_of gives (the row permutation); logical
// chunks past the source row (Dv 80's pad to 96) are fetched past the resource: zeros.
template <class Layout, int SrcBytes = Layout::kRowBytes, int Waves = kWaves>
struct DmaRows {
  static constexpr uint32_t kChunks = Layout::kRowBytes / 16;
  static constexpr uint32_t kSrcBytes = SrcBytes;
  static constexpr int kRowLoads = kKvBlock * Layout::kRowBytes / 1024;   // 64-lane loads of a 64-row block
  static constexpr int kLoads = (kRowLoads + Waves - 1) / Waves;         // per wave
  static constexpr uint32_t kPastEnd = 1u << 31;                          // beyond any block resource
  MM_DEVICE static bool issued(uint32_t wave, int i) { return kRowLoads % Waves == 0 || (int)(wave * kLoads) + i < kRowLoads; }
  MM_DEVICE static uint32_t base(uint32_t wave, int i) { return (wave * kLoads + i) * 64u; }
  MM_DEVICE static uint32_t row_of(uint32_t wave, int i, uint32_t lane) { return (base(wave, i) + lane) / kChunks; }
  // the logical byte of the row this lane fetches (>= kSrcBytes: a pad chunk)
  MM_DEVICE static uint32_t byte_of(uint32_t wave, int i, uint32_t lane) {
    const uint32_t p = base(wave, i) + lane;
    return Layout::byte_of(p / kChunks, (p % kChunks) * 16u);
  }
};

// DMA rows of one block into a buffer (DmaRows' lanes), 16-byte direct-to-LDS loads, over waves 0 .. Waves-1.
template <class Layout, int SrcBytes = Layout::kRowBytes, int Waves = kWaves>
MM_DEVICE void dma_rows(mm::buffer_rsrc src, int64_t token_stride, lds_u8* dst, uint32_t wave, uint32_t lane) {
  using D = DmaRows<Layout, SrcBytes, Waves>;
#pragma unroll
  for (int i = 0; i < D::kLoads; ++i) {
    if (!D::issued(wave, i)) continue;
    const uint32_t row = D::row_of(wave, i, lane), byte = D::byte_of(wave, i, lane);
    uint32_t off = row * (uint32_t)token_stride * 2u + byte;
    if constexpr (D::kSrcBytes < (uint32_t)Layout::kRowBytes) off = byte < D::kSrcBytes ? off : D::kPastEnd;
    mm::buffer_load_to_lds<16>(src, (void*)(dst + D::base(wave, i) * 16u), off);
  }
}

// The K or V rows of a dense tile's next DMA: a running row pointer and the sequence's rows left from it, one block
// further per DMA (a 64-bit add, where making the pointer from the block's key took a 32 x 32 -> 64-bit product, a
// shift and the key's add); the extent is a whole block's unless fewer rows are left.
template <class T>
struct BlockWalk {
  const T* p;
  int32_t rows;
  int64_t stride;   // token stride, elements
  MM_DEVICE BlockWalk(const T* head, int32_t key0, int32_t k_len, int64_t stride_)
      : p(head + (int64_t)key0 * stride_), rows(k_len - key0), stride(stride_) {}
  template <int Elems>
  MM_DEVICE mm::buffer_rsrc rsrc() const {
    return mm::make_buffer(p, rows >= kKvBlock ? extent_bytes(kKvBlock, stride, Elems, sizeof(T))
                                               : extent_bytes(rows, stride, Elems, sizeof(T)));
  }
  MM_DEVICE void advance() { p += kKvBlock * stride; rows -= kKvBlock; }
};

template <class Shape, class Tile>
MM_DEVICE void dma_k(const Tile& tile, int32_t key0, lds_u8* buf, uint32_t wave, uint32_t lane) {
  dma_rows<typename Shape::KLayout>(tile.k_block(key0), tile.a.k_token, buf, wave, lane);
}
template <class Shape, class Tile>
MM_DEVICE void dma_v(const Tile& tile, int32_t key0, lds_u8* buf, uint32_t wave, uint32_t lane) {
  dma_rows<typename Shape::VLayout, Shape::Dv * 2>(tile.v_block(key0), tile.a.v_token, buf, wave, lane);
}

// fp8 K/V rows of one block in flight: each lane loads 16 fp8 (one 16-byte buffer load into VGPRs: piece c of a
// row), land() widens them exactly to 16 bf16 (v_cvt_pk_f32_fp8, the high halves) and writes the two bf16 chunks
// to their permuted places of the LDS row (the layout dma_rows makes from bf16 rows). Rows past k_len load 0.
// Staged (FwdShape::kFp8Staged): nothing in flight in VGPRs. The 16-byte loads go straight to an LDS staging area
// (direct-to-LDS, lane p of load i at stage + 16 (64 i' + p) as in dma_rows), and land() reads each lane's own 16
// bytes back into transient VGPRs (the wave's own DMA, complete at vmcnt(0): no barrier) before widening them; only
// group A's waves load (issued() is false for group B, whose land() then only waits).
typedef __attribute__((address_space(3))) u32x4 lds_u32x4;
template <class Layout, int Elems, bool Staged = false>
struct Fp8Rows {
  static constexpr uint32_t kPieces = Elems / 16;                      // 16-byte fp8 pieces of a row
  static constexpr int kRowLoads = kKvBlock * (int)kPieces / 64;       // 64-lane loads of a block
  // Staged: group A's waves alone load and widen (6 pieces each at d256; modeled cycles per KV block: 10219, where
  // all 8 waves sharing it took 11217 and group B alone 11834).
  static constexpr int kLoaders = Staged ? kGroupWaves : kWaves;
  static constexpr int kLoads = (kRowLoads + kLoaders - 1) / kLoaders;
  u32x4 w[Staged ? 1 : kLoads];
  lds_u8* stage;                                                       // Staged: the staging area
  MM_DEVICE explicit Fp8Rows(lds_u8* stage_ = nullptr) : stage(stage_) {}
  MM_DEVICE static bool issued(uint32_t wave, int i) {
    if (Staged && wave >= (uint32_t)kGroupWaves) return false;
    return kRowLoads % kLoaders == 0 || (int)(wave * kLoads) + i < kRowLoads;
  }
  MM_DEVICE static uint32_t row_of(uint32_t wave, int i, uint32_t lane) { return ((wave * kLoads + i) * 64u + lane) / kPieces; }
  MM_DEVICE static uint32_t piece_of(uint32_t wave, int i, uint32_t lane) { return ((wave * kLoads + i) * 64u + lane) % kPieces; }
  // Load i of the wave: 16 bytes at byte offset off of src, into w[i] or the staging area.
  MM_DEVICE void put(int i, mm::buffer_rsrc src, uint32_t off, uint32_t wave) {
    if constexpr (Staged) mm::buffer_load_to_lds<16>(src, (void*)(stage + (wave * kLoads + i) * 1024u), off);
    else w[i] = mm::buffer_load_b128(src, off);
  }
  MM_DEVICE u32x4 piece(int i, uint32_t wave, uint32_t lane) const {
    if constexpr (Staged) return *(const lds_u32x4*)(stage + ((wave * kLoads + i) * 64u + lane) * 16u);
    else return w[i];
  }
  MM_DEVICE void load(mm::buffer_rsrc src, int64_t token_stride, uint32_t wave, uint32_t lane) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i)
      if (issued(wave, i)) put(i, src, row_of(wave, i, lane) * (uint32_t)token_stride + piece_of(wave, i, lane) * 16u, wave);
  }
  MM_DEVICE void land(lds_u8* dst, uint32_t wave, uint32_t lane) const {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      if (!issued(wave, i)) continue;
      const uint32_t row = row_of(wave, i, lane), c = piece_of(wave, i, lane);
      const u32x4 x = piece(i, wave, lane);
      u32x4 lo, hi;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const mm::f32x2 a = mm::cvt_pk_f32_fp8<false>(x[j]), b = mm::cvt_pk_f32_fp8<true>(x[j]);
        const uint32_t x0 = mm::pack_bf16x2_hi(a[0], a[1]), x1 = mm::pack_bf16x2_hi(b[0], b[1]);
        if (j < 2) { lo[2 * j] = x0; lo[2 * j + 1] = x1; } else { hi[2 * j - 4] = x0; hi[2 * j - 3] = x1; }
      }
      *(lds_u32x4*)(dst + Layout::offset(row, 32u * c)) = lo;
      *(lds_u32x4*)(dst + Layout::offset(row, 32u * c + 16u)) = hi;
    }
  }
};
template <class Shape> using Fp8K = Fp8Rows<typename Shape::KLayout, Shape::Dqk, Shape::kFp8Staged>;
template <class Shape> using Fp8V = Fp8Rows<typename Shape::VLayout, Shape::Dv, Shape::kFp8Staged>;

template <class Shape>
MM_DEVICE void load_k_fp8(const DenseTile<Shape>& tile, int32_t key0, Fp8K<Shape>& r, uint32_t wave, uint32_t lane) {
  r.load(tile.k_block(key0), tile.a.k_token, wave, lane);
}
template <class Shape>
MM_DEVICE void load_v_fp8(const DenseTile<Shape>& tile, int32_t key0, Fp8V<Shape>& r, uint32_t wave, uint32_t lane) {
  r.load(tile.v_block(key0), tile.a.v_token, wave, lane);
}

// The MFMA phase M(n): PV of the previous block (V buffer KBuf ^ 1, P in st.p, row sums into lb) then
// QK of this block (K buffer KBuf) into s. One stream of fragments - V^T (two transposing reads each),
// then K (one b128 read each) - read kPrefetch fragments ahead of the MFMA that uses them.
// `mid` (the DMA of group A) runs once the first fragments are in flight and the row-sum MFMAs issued, its scalar
// set-up then overlapping the MFMA pipe; in the kStepOrder kernels right behind the first fragment's reads instead,
// before O's rescale: the loads land earlier, and group A's vmcnt(0) at the end of its softmax phase (which bounds the
// pipeline) waits less (d128 dense 2825 -> 2793 modeled cycles per block, d192 3195 -> 3116).
// Fragments read ahead of their MFMA (Prefetch): 6 where Dqk 128 leaves room for them, else 4; 2 for the
// paged Dqk 192 kernels (their page indices take the VGPRs of the others). The fp8 kernels hold the next block's
// K/V loads across a phase (Fp8Rows) and the paged kernels of the other head dims their page indices and
// partial-round branches: 4 and 2 (6 spilled).
template <class Shape, bool Dense>
constexpr int kPrefetch = Shape::Dqk == 256 ? 2
                          : Shape::Dqk == 128 && !Shape::kKvFp8 ? 6
                          : Shape::Dqk == 192 && !Shape::kKvFp8 && Dense ? 6
                          : Shape::Dqk < 128 && !Shape::kKvFp8 && Dense ? 6
                          : Dense ? 4 : 2;
// The MFMA phase keeps its written step order (a sched_barrier per step) for the bf16 Dqk 128 / 192 kernels, where it
// was measured; the others keep the compiler's schedule (the fp8 and 256 kernels are at their register limits).
template <class Shape>
constexpr bool kStepOrder = !Shape::kKvFp8 && (Shape::Dqk == 128 || Shape::Dqk == 192);
template <class Shape, int KBuf, bool DoPv, bool DoQk, int Prefetch, class Mid>
MM_DEVICE void mfma_phase(WaveState<Shape>& st, const LdsAddrs<Shape>& ad, FragC (&s)[Shape::kKeyTiles], Mid mid) {
  constexpr int kPv = DoPv ? Shape::kPvSteps * Shape::kDvTiles : 0;      // V fragments: (step c, n-tile)
  constexpr int kQk = DoQk ? Shape::kKeyTiles * Shape::kQkSteps : 0;     // K fragments: (key tile, step)
  constexpr int kN = kPv + kQk;
  constexpr int kVBuf = KBuf ^ 1;
  u32x4 kf[kQk > 0 ? kQk : 1];                 // K fragments
  u32x2 vlo[kPv > 0 ? kPv : 1], vhi[kPv > 0 ? kPv : 1];   // V^T fragments: keys +0..3 and +8..11 of the lane
  auto issue = [&](auto F) MM_INLINE_LAMBDA {
    constexpr int f = decltype(F)::value;
    if constexpr (f < kPv) {
      constexpr int c = f / Shape::kDvTiles, n = f % Shape::kDvTiles;
      constexpr int off = kVBuf * (int)Shape::kVBytes + 16 * c * (int)Shape::kVRow;
      vlo[f] = ds_read_tr16_b64<off>(ad.v[n]);
      vhi[f] = ds_read_tr16_b64<off + 8 * (int)Shape::kVRow>(ad.v[n]);
    } else {
      constexpr int g = f - kPv, t = g / Shape::kQkSteps, ks = g % Shape::kQkSteps;
      using Ad = LdsAddrs<Shape>;
      kf[g] = ds_read_b128<KBuf * (int)Shape::kKBytes + 32 * t * (int)Shape::kKRow + Ad::k_imm(ks)>(ad.k[ks % Ad::kK]);
    }
  };
  static_for<kN + Prefetch>([&](auto I) MM_INLINE_LAMBDA {
    constexpr int i = decltype(I)::value;
    if constexpr (i < kN) issue(Ic<i>{});
    if constexpr (kStepOrder<Shape> && i == 0) mid();
    if constexpr (DoPv && i == 0) rescale_pending(st);   // behind the first reads, before any MFMA
    if constexpr (DoPv && i == Prefetch - 1) {
      // lb += row sums of the bf16 P the PV MFMAs use (against ones), while the first reads land:
      // normalising by them makes each output row's weights sum to 1 exactly; l stays for the LSE.
      using RS = typename Shape::RowSumMfma;
      const mm::FragA<RS> ones = row_sum_ones<RS>();
#pragma unroll
      for (int c = 0; c < Shape::kPvSteps; ++c) mm::mma(st.lb, ones, mm::FragB<RS>{st.p[c].w}, st.lb);
    }
    if constexpr (!kStepOrder<Shape> && i == Prefetch - 1) mid();
    if constexpr (i >= Prefetch - 1 && i - (Prefetch - 1) < kN) {
      constexpr int f = i - (Prefetch - 1);
      constexpr int last = i < kN ? i : kN - 1;
      constexpr int pend = []() MM_INLINE_LAMBDA {
        int r = 0;
        for (int x = f + 1; x <= last; ++x) r += x < kPv ? 2 : 1;
        return r;
      }();
      if constexpr (f < kPv) {
        constexpr int c = f / Shape::kDvTiles, n = f % Shape::kDvTiles;
        wait_lds<pend>(vlo[f], vhi[f]);
        mm::mma(st.o[n], FragA{u32x4{vlo[f][0], vlo[f][1], vhi[f][0], vhi[f][1]}}, st.p[c], st.o[n]);
      } else {
        constexpr int g = f - kPv, t = g / Shape::kQkSteps, ks = g % Shape::kQkSteps;
        wait_lds<pend>(kf[g]);
        if constexpr (ks == 0) s[t] = mfma_first(FragA{kf[g]}, st.q[ks]);
        else mm::mma(s[t], FragA{kf[g]}, st.q[ks], s[t]);
      }
      // Each step stays where it is written (reads, their wait, the MFMA): left free, clang sank the MFMAs past the
      // later steps' waits, so the phase ended in lgkmcnt stalls with the MFMA pipe idle (d128 dense 2869 -> 2856
      // modeled cycles per block, d192 3284 -> 3226; docs/kernels/attention_gfx950.md).
      if constexpr (kStepOrder<Shape>) mm::sched_barrier();
    }
  });
}

// Gemma-2 soft-cap of the raw scores: s -> tanh(|scale| s / cap) = 1 - 2 / (1 + 2^(s pre2)), pre2 =
// 2 |scale| log2(e) / cap; the softmax then multiplies by c = cap log2(e), so its logits are
// cap tanh(scale s / cap) in log2 units. exp2 overflowing to inf gives rcp = 0, t = 1 (no NaN); tanh is
// monotone, so the max-then-scale of softmax_step stays exact. Before the mask: a masked key stays -inf.
template <class Shape>
MM_DEVICE void softcap_block(FragC (&s)[Shape::kKeyTiles], float pre2) {
#pragma unroll
  for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
    for (int r = 0; r < 16; ++r) s[t].v[r] = __builtin_fmaf(-2.f, mm::rcp(1.f + mm::exp2(s[t].v[r] * pre2)), 1.f);
}

// Key of register r of key tile t for lane half h: 32t + 8(r/4) + 4h + r%4.
MM_DEVICE int32_t key_of(int t, int r, int32_t h) { return 32 * t + 8 * (r / 4) + 4 * h + r % 4; }

// s if the key offset x (from the block and lane) is below the bound b, else -inf: by the sign of x - b
// (v_sub, v_ashr, v_bfi in VGPRs; a compare per score would hold a 64-bit lane mask in SGPRs each, and the
// compiler keeps many alive at once).
MM_DEVICE float keep_below(float s, int32_t x, int32_t b) {
  const uint32_t keep = (uint32_t)((x - b) >> 31);   // all ones when x < b
  return __builtin_bit_cast(float, (__builtin_bit_cast(uint32_t, s) & keep) | (0xFF800000u & ~keep));
}

// Keys at or past the row's limit (k_len, or the causal diagonal) -> -inf. Only blocks that cross a
// limit of the wave's rows pay for it (a wave-uniform branch).
template <class Shape>
MM_DEVICE void mask_block(FragC (&s)[Shape::kKeyTiles], int32_t key0, int32_t limit, uint32_t lane) {
  const int32_t h = (int32_t)(lane >> 5), lim = limit - key0 - 4 * h;
#pragma unroll
  for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
    for (int r = 0; r < 16; ++r) s[t].v[r] = keep_below(s[t].v[r], key_of(t, r, 0), lim);
}

// The window form: keys below the row's lower bound lo go too (the upper bound is in limit).
template <class Shape>
MM_DEVICE void mask_block_window(FragC (&s)[Shape::kKeyTiles], int32_t key0, int32_t limit, int32_t lo, uint32_t lane) {
  const int32_t h = (int32_t)(lane >> 5), lim = limit - key0 - 4 * h, low = lo - key0 - 4 * h;
#pragma unroll
  for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
    for (int r = 0; r < 16; ++r)   // key < low <=> -key < 1 - low... i.e. keep when low - 1 < key
      s[t].v[r] = keep_below(keep_below(s[t].v[r], key_of(t, r, 0), lim), low - 1, key_of(t, r, 0));
}

// Online softmax over one block of raw scores s (c = |scale| log2 e > 0, so max(c s) = c max(s)): the
// reference m is the running row max (p <= 1; a reference kept up to 2^8 below the max - a lazy rescale -
// saved ~0.4k cycles per block on the model but raised the rel. Frobenius error 2-4% above AITER's on the
// peer shapes). When some row of the wave moved its max (a wave-uniform branch), l is rescaled here and
// O, lb by the next MFMA phase (rescale_pending). Then p = exp2(fma(s, c, -m)) and P -> bf16 into st.p
// (the next PV's B operands). First: the first block of the tile (O, lb, l are still 0).
template <class Shape>
constexpr bool kSkipL = kStepOrder<Shape>;
template <bool NeedL, class Shape>
MM_DEVICE void softmax_step(WaveState<Shape>& st, FragC (&s)[Shape::kKeyTiles], float c, bool first) {
  float mx = kNegInf;
#pragma unroll
  for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
    for (int r = 0; r < 16; ++r) mx = __builtin_fmaxf(mx, s[t].v[r]);
  mx = row_max2(mx) * c;
  const bool move = mx > st.m;   // -inf: a row's first finite max always moves it
  if (__builtin_amdgcn_ballot_w64(move)) {
    const float r_old = move ? mm::exp2(st.m - mx) : 1.f;   // 0 when m was -inf; rows that keep m: 1
    st.m = move ? mx : st.m;
    if (!first) {   // l now; O and lb by the next MFMA phase (rescale_pending)
      st.l *= r_old;
      st.r = r_old;
      st.rescale = true;
    }
  }
  // A row that has seen no key yet keeps m = -inf: use 0 as its reference so exp2 gives 0, not NaN.
  const float m_ref = st.m == kNegInf ? 0.f : st.m;
  // The lane's share of l in kSumChains independent partial sums, combined once per block, instead of one
  // serial chain of 16 kKeyTiles dependent adds (the same adds; modeled d128 cycles per block 2998 -> 2905,
  // 2941 with 2 chains, 2915 with 8: docs/kernels/attention_gfx950.md).
  constexpr int kSumChains = 4;
  static_assert(kSumChains == 4, "the combine below adds four partial sums");
  // l serves the LSE (and a split part's merge) only: the normaliser is lb. NeedL false (the key loop's copy for
  // final rows without the LSE, bf16 d128 / d192 kernels: kSkipL) skips its 32 adds per block.
  if constexpr (NeedL) {
    float sum[kSumChains] = {};
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        const float p = mm::exp2(__builtin_fmaf(s[t].v[r], c, -m_ref));
        s[t].v[r] = p;
        sum[r % kSumChains] += p;
      }
    st.l += (sum[0] + sum[1]) + (sum[2] + sum[3]);
  } else {
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 16; ++r) s[t].v[r] = mm::exp2(__builtin_fmaf(s[t].v[r], c, -m_ref));
  }
  // P^T for PV step c: registers 8(c%2) .. +7 of key tile c/2 (KOfPackedC order, see the header).
#pragma unroll
  for (int cs = 0; cs < Shape::kPvSteps; ++cs) {
    const FragC& x = s[cs / 2];
    const int b = 8 * (cs % 2);
    st.p[cs].w = u32x4{cvt_pk_bf16(x.v[b], x.v[b + 1]), cvt_pk_bf16(x.v[b + 2], x.v[b + 3]),
                       cvt_pk_bf16(x.v[b + 4], x.v[b + 5]), cvt_pk_bf16(x.v[b + 6], x.v[b + 7])};
  }
}

// gpt-oss sinks: the head's sink logit (log2 units, sink2 = sink log2 e, unscaled) joins every row's
// denominator as one more "key" with no value: M = max(m, sink2), O and both sums rescaled by 2^(m - M),
// 2^(sink2 - M) added to the sums (once per row: lane half 0 for the per-lane share l; every register of the
// row-uniform lb). A row that saw no key ends with O = 0 and lse = sink.
template <class Shape>
MM_DEVICE void add_sink(WaveState<Shape>& st, float sink2, uint32_t lane) {
  const bool first_half = lane < 32u;
  const float M = __builtin_fmaxf(st.m, sink2);
  const float M_ref = M == kNegInf ? 0.f : M;          // sink -inf and no key: nothing to add
  const float r = mm::exp2(st.m - M_ref), e = mm::exp2(sink2 - M_ref);
  st.m = M;
  st.l = st.l * r + (first_half ? e : 0.f);
#pragma unroll
  for (int i = 0; i < Shape::RowSumMfma::kCRegs; ++i) st.lb.v[i] = st.lb.v[i] * r + e;
#pragma unroll
  for (int n = 0; n < Shape::kDvTiles; ++n) mm::scale(st.o[n], r);
}

// Where a wave's rows go, resolved before the key loop (8 SGPRs through it, not the plan fields they come from).
// Final rows: out (bf16, row_bytes = the token stride) and lse (0 bytes when not wanted: its stores drop).
// A split part: its workspace slot's fp32 O [kTileRows][Dv] (row_bytes = 4 Dv) and (m, l, lb, 0) per row.
struct Epilogue {
  mm::buffer_rsrc rows, aux;
  uint32_t row_bytes;
  bool final_rows;
};

// Final rows: out = O / lb in bf16 (RTNE, canonical NaN), lse = (m + log2 l) * ln 2.
template <class Shape>
MM_DEVICE void store_final(const WaveState<Shape>& st, const Epilogue& ep, uint32_t wave, uint32_t lane) {
  const uint32_t h = lane >> 5, j = lane & 31u;
  const uint32_t row = kWaveRows * wave + j;
  const float l = row_sum2(st.l);
  const float lb = st.lb.v[0];
  const float inv = lb > 0.f ? mm::rcp(lb) : 0.f;
#pragma unroll
  for (int n = 0; n < Shape::kDvTiles; ++n)
#pragma unroll
    for (int qd = 0; qd < 4; ++qd) {
      if (32 * n + 8 * qd >= Shape::Dv) continue;   // Dv's pad columns (80 -> 96)
      const u32x2 w = {pack_out(st.o[n].v[4 * qd] * inv, st.o[n].v[4 * qd + 1] * inv),
                       pack_out(st.o[n].v[4 * qd + 2] * inv, st.o[n].v[4 * qd + 3] * inv)};
      mm::buffer_store_b64(w, ep.rows, row * ep.row_bytes + (32u * n + 8u * qd + 4u * h) * 2u);
    }
  if (h == 0) {
    const float x = l > 0.f ? (st.m + mm::log2(l)) * mm::kLn2 : kNegInf;
    mm::buffer_store_f32(x, ep.aux, row * 4u);
  }
}

// A split part: fp32 O (unnormalised) and (m, l, lb) per row into its workspace slot.
// ws_o: [slot][head][kTileRows][Dv]; ws_ml: [slot][head][kTileRows][4] = m, l (fp32 p), lb (bf16 P), 0.
template <class Shape>
MM_DEVICE void store_part(const WaveState<Shape>& st, const Epilogue& ep, uint32_t wave, uint32_t lane) {
  const uint32_t hf = lane >> 5, j = lane & 31u;
  const uint32_t row = kWaveRows * wave + j;
  const float l = row_sum2(st.l);
#pragma unroll
  for (int n = 0; n < Shape::kDvTiles; ++n)
#pragma unroll
    for (int qd = 0; qd < 4; ++qd) {
      if (32 * n + 8 * qd >= Shape::Dv) continue;
      const f32x4 v = {st.o[n].v[4 * qd], st.o[n].v[4 * qd + 1], st.o[n].v[4 * qd + 2], st.o[n].v[4 * qd + 3]};
      mm::buffer_store_b128(__builtin_bit_cast(u32x4, v), ep.rows,
                            row * ep.row_bytes + (32u * n + 8u * qd + 4u * hf) * 4u);
    }
  if (hf == 0) {
    const u32x4 ml = {__builtin_bit_cast(uint32_t, st.m), __builtin_bit_cast(uint32_t, l),
                      __builtin_bit_cast(uint32_t, st.lb.v[0]), 0u};
    mm::buffer_store_b128(ml, ep.aux, row * 16u);
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
  const float* k_descale = nullptr;   // the *_fp8 kernels: fp32 [heads_kv] descales of K and V; else null
  const float* v_descale = nullptr;
};

template <class Shape, class Tile>
MM_DEVICE Epilogue epilogue(const Tile& tile, const FwdPointers& ptr, int32_t h) {
  if (tile.it.slot < 0) {
    const bool want_lse = (tile.a.flags & kFlagLse) != 0;
    return Epilogue{tile.o_rsrc(ptr.o), want_lse ? tile.lse_rsrc(ptr.lse) : mm::make_buffer(ptr.lse, 0u),
                    (uint32_t)tile.a.o_token * 2u, true};
  }
  const int64_t slot = (int64_t)tile.it.slot * tile.a.heads_q + h;
  return Epilogue{mm::make_buffer(ptr.ws_o + slot * kTileRows * Shape::Dv, kTileRows * Shape::Dv * 4u),
                  mm::make_buffer(ptr.ws_ml + slot * kTileRows * 4, kTileRows * 16u), Shape::Dv * 4u, false};
}

// A phase boundary: every wave of the workgroup. The fragments a phase produces are tied to it (an
// empty asm volatile reading and writing them on each side; volatile asm keeps its order), so neither
// their producers nor their consumers can be moved across it (sched_barrier alone does not stop the IR
// passes from sinking the softmax arithmetic into the next MFMA phase).
template <class T> MM_DEVICE void pin(T& x) { asm volatile("" : "+v"(x)); }
template <class S> MM_DEVICE void pin(mm::FragC<S>& x) { pin(x.v); }
MM_DEVICE void pin(FragB& x) { pin(x.w); }
template <class T, int N> MM_DEVICE void pin(T (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) pin(x[i]);
}
template <class... T>
MM_DEVICE void phase_barrier(T&... ties) {
  (pin(ties), ...);
  mm::sched_barrier();
  __builtin_amdgcn_s_barrier();
  mm::sched_barrier();
  (pin(ties), ...);
}

// Tile: the partitioner (DenseTile; PagedTile in attention_fwd_paged.hpp), built from the item and
// the pointers plus its own extra arguments.
template <class Shape, class Tile = DenseTile<Shape>, class... TileExtra>
MM_DEVICE void attention_fwd(const AttnFwdArgs* __restrict__ plan, const FwdPointers& ptr, lds_u8* lds,
                             const TileExtra&... extra) {
  const AttnFwdArgs a = *plan;
  // Workgroup x = item * heads_q + h: the heads of an item are dispatched together, so the launch runs the plan's
  // items (heaviest first) in order across all heads - a longest-first list schedule over the CUs (causal balance).
  const uint32_t wg = mm::block_id_x(), hq = (uint32_t)a.heads_q, item = wg / hq;
  const AttnWorkItem it = reinterpret_cast<const AttnWorkItem*>(plan + 1)[item];
  const int32_t h = (int32_t)(wg - item * hq);
  const uint32_t wave = mm::wave_id(), lane = mm::lane_id();
  const bool lead = wave < (uint32_t)kGroupWaves;   // group A; group B lags one phase
  const Tile tile(a, it, h, ptr.k, ptr.v, extra...);
  const bool causal = (a.flags & kFlagCausal) != 0;

  WaveState<Shape> st;
  load_q(st, tile.q_rsrc(ptr.q), a.q_token, wave, lane);
  if (a.flags & kFlagNegScale) negate_q(st);
  st.m = kNegInf;
  st.l = 0.f;
  st.r = 1.f;
  st.rescale = false;
  st.lb = mm::zeros<typename Shape::RowSumMfma>();
#pragma unroll
  for (int n = 0; n < Shape::kDvTiles; ++n) st.o[n] = mm::zeros<Mfma>();
  // Row limit: key < limit. Causal is bottom-right aligned: row i sees keys <= i + k_len - q_len.
  const int32_t diag = it.k_len - it.q_len + 1;
  const int32_t wave_row0 = it.q_row0 + kWaveRows * (int32_t)wave;
  const int32_t row = wave_row0 + (int32_t)(lane & 31u);
  int32_t limit = causal && row + diag < it.k_len ? row + diag : it.k_len;
  // The wave's smallest limit decides whether a block needs the mask at all.
  int32_t wave_limit = causal && wave_row0 + diag < it.k_len ? wave_row0 + diag : it.k_len;
  int32_t kv_begin = it.kv_begin, kv_end = it.kv_end;
  // Window: row i sees keys [d - left, d + right], d = i + k_len - q_len (-1: unbounded). The host planner
  // already plans only the window's blocks; the clip here makes a device-written plan (the full causal
  // range) skip them too. wave_lo is the largest lower bound of the wave's rows (its last row's).
  int32_t lo = 0, wave_lo = 0;
  if constexpr (Shape::kWindow) {
    const int32_t off = it.k_len - it.q_len, left = a.window_left, right = a.window_right;
    if (right >= 0 && row + off + right + 1 < limit) limit = row + off + right + 1;
    lo = left >= 0 ? row + off - left : -kKvBlock;
    if (right >= 0 && wave_row0 + off + right + 1 < wave_limit) wave_limit = wave_row0 + off + right + 1;
    wave_lo = left >= 0 ? wave_row0 + kWaveRows - 1 + off - left : -kKvBlock;
    if (left >= 0) {
      const int32_t tile_lo = it.q_row0 + off - left;
      if (tile_lo > kv_begin) kv_begin = tile_lo & ~(kKvBlock - 1);
    }
    if (right >= 0) {
      const int32_t last = (it.q_len - it.q_row0 < kTileRows ? it.q_len : it.q_row0 + kTileRows) - 1;
      if (last + off + right + 1 < kv_end) kv_end = last + off + right + 1;
    }
  }
  // fp8 K/V: S = kd (Q K8), so K's descale joins the logit factor (the tanh argument under a soft-cap; at least
  // FLT_MIN, as the planner's scale); V's scales O once after the loop.
  float scale_log2 = a.scale_log2, softcap_pre2 = a.softcap_pre2, vd = 1.f;
  if constexpr (Shape::kKvFp8) {
    const float kd = ptr.k_descale[tile.hk];
    vd = in_sgpr(ptr.v_descale[tile.hk]);   // read now: one SGPR through the loop, not the pointer's two
    if constexpr (Shape::kSoftcap) softcap_pre2 *= kd;
    else scale_log2 = __builtin_fmaxf(scale_log2 * kd, 1.17549435e-38f);
  }
  // The sink logit (log2 units) read now too; -inf where this item adds none (a split part but the first:
  // add_sink with -inf leaves m, l, lb and O bit for bit), so no item field stays live through the loop for it.
  float sink2 = kNegInf;
  if constexpr (Shape::kSinks) {
    if (it.slot < 0 || it.sink_part) sink2 = in_sgpr(ptr.sinks[h] * mm::kLog2e);
  }
  const Epilogue ep = epilogue<Shape>(tile, ptr, h);
  const bool need_l = !ep.final_rows || (a.flags & kFlagLse) != 0;   // the fp32 sum l: LSE or merge only
  const int32_t nb = kv_begin < kv_end ? (kv_end - kv_begin + kKvBlock - 1) / kKvBlock : 0;
  const LdsAddrs<Shape> ad(lds, lane);
  constexpr int kPf = kPrefetch<Shape, __is_same(Tile, DenseTile<Shape>)>;
  auto kbuf = [&](int32_t n) MM_INLINE_LAMBDA { return lds + Shape::kKBuf0 + (uint32_t)(n & 1) * Shape::kKBytes; };
  auto vbuf = [&](int32_t n) MM_INLINE_LAMBDA { return lds + Shape::kVBuf0 + (uint32_t)(n & 1) * Shape::kVBytes; };
  auto key_of_block = [&](int32_t n) MM_INLINE_LAMBDA { return kv_begin + n * kKvBlock; };
  // The DMA of global phase 2n: K(n+1) and V(n), each if it exists. fp8: their loads into VGPRs (fk, fv),
  // written to LDS by land(n) (each group lands dma_phase(n) within block n: see block).
  Fp8K<Shape> fk(lds + Shape::kStageK);
  Fp8V<Shape> fv(lds + Shape::kStageV);
  // Dense bf16 tiles walk K and V (BlockWalk): every wave's DMA calls go n = 0, 1, 2 ... (K(n+1) and V(n) at call n).
  constexpr bool kWalk = !Shape::kKvFp8 && __is_same(Tile, DenseTile<Shape>);
  typedef typename Shape::KvT KvT;
  BlockWalk<KvT> kwalk(tile.k_head, key_of_block(1), tile.it.k_len, tile.a.k_token);
  BlockWalk<KvT> vwalk(tile.v_head, key_of_block(0), tile.it.k_len, tile.a.v_token);
  // par = n % 2, known where it is called: the buffers' LDS addresses are then constants.
  auto dma_phase = [&](int32_t n, auto par) MM_INLINE_LAMBDA {
    constexpr int p = decltype(par)::value;
    if constexpr (Shape::kKvFp8) {
      if (n + 1 < nb) load_k_fp8<Shape>(tile, key_of_block(n + 1), fk, wave, lane);
      if (n < nb) load_v_fp8<Shape>(tile, key_of_block(n), fv, wave, lane);
    } else if constexpr (kWalk) {
      if (n + 1 < nb) {
        dma_rows<typename Shape::KLayout>(kwalk.template rsrc<Shape::Dqk>(), tile.a.k_token, kbuf(p ^ 1), wave, lane);
        kwalk.advance();
      }
      if (n < nb) {
        dma_rows<typename Shape::VLayout, Shape::Dv * 2>(vwalk.template rsrc<Shape::Dv>(), tile.a.v_token, vbuf(p), wave, lane);
        vwalk.advance();
      }
    } else {
      if (n + 1 < nb) dma_k<Shape>(tile, key_of_block(n + 1), kbuf(p ^ 1), wave, lane);
      if (n < nb) dma_v<Shape>(tile, key_of_block(n), vbuf(p), wave, lane);
    }
  };
  // The wave's DMA of the phase in LDS (before the barrier that makes it visible): vmcnt(0); fp8: then the
  // widening writes and their lgkmcnt(0) (the barrier does not wait for them).
  auto land = [&](int32_t n) MM_INLINE_LAMBDA {
    mm::wait_vmcnt<0>();
    if constexpr (Shape::kKvFp8) {
      if (n + 1 < nb) fk.land(kbuf(n + 1), wave, lane);
      if (n < nb) fv.land(vbuf(n), wave, lane);
      mm::wait_lgkmcnt<0>();
    }
  };
  // Group B's DMA of a softmax phase after the softmax, not before it (dense bf16 d128): the softmax phase bounds the
  // pipeline and its scalar set-up no longer delays the exp2s; the loads still have the next (MFMA) phase to land in
  // (modeled d128 dense 2793 -> 2736 cycles per block; d192, whose MFMA phase is longer, 3116 -> 3148: not there).
  constexpr bool kLateDmaB = kWalk && Shape::Dqk == 128;
  // Prologue (dense bf16): every wave issues its share of K(1), V(0) with K(0) and waits only for Q and K(0), counting
  // the V loads it certainly issued behind them (the fewest any wave issues); the phase-0 DMA of both groups is then
  // already in flight. A short item pays this latency once per workgroup (was: K(1), V(0) issued after K(0) landed).
  constexpr bool kEarlyDma = kWalk;
  constexpr int kVLoadsMin = DmaRows<typename Shape::VLayout, Shape::Dv * 2>::kRowLoads / kWaves;
  constexpr int kKLoadsMin = DmaRows<typename Shape::KLayout>::kRowLoads / kWaves;
  FragC s[Shape::kKeyTiles];
  auto softmax_phase = [&](int32_t n, bool first, auto nl) MM_INLINE_LAMBDA {
    const int32_t key0 = key_of_block(n);
    if constexpr (Shape::kSoftcap) softcap_block<Shape>(s, softcap_pre2);
    if constexpr (Shape::kWindow) {
      if (key0 + kKvBlock > wave_limit || key0 < wave_lo) mask_block_window<Shape>(s, key0, limit, lo, lane);
    } else {
      if (key0 + kKvBlock > wave_limit) mask_block<Shape>(s, key0, limit, lane);
    }
    softmax_step<decltype(nl)::value != 0>(st, s, scale_log2, first);
  };
  // One block n >= 1 with K in buffer KBuf: M(n), barrier, X(n), barrier (DMA and waits by group).
  auto block = [&](auto kb, int32_t n, auto nl) MM_INLINE_LAMBDA {
    mm::set_priority<1>();
    mfma_phase<Shape, decltype(kb)::value, true, true, kPf>(st, ad, s, [&]() MM_INLINE_LAMBDA { if (lead) dma_phase(n, kb); });
    mm::set_priority<0>();
    if (!lead) land(n);
    phase_barrier(s, st.o, st.lb);
    if (!lead && !kLateDmaB) dma_phase(n + 1, Ic<decltype(kb)::value ^ 1>{});
    softmax_phase(n, false, nl);
    if (!lead && kLateDmaB) dma_phase(n + 1, Ic<decltype(kb)::value ^ 1>{});
    if (lead) land(n);
    phase_barrier(st.p, st.o, st.lb, st.l);
  };

  if (nb > 0) {
    if constexpr (Shape::kKvFp8) {
      load_k_fp8<Shape>(tile, key_of_block(0), fk, wave, lane);
      mm::wait_vmcnt<0>();
      fk.land(kbuf(0), wave, lane);
      mm::wait_lgkmcnt<0>();
    } else if constexpr (kEarlyDma) {
      if (lead) {                          // group A alone: the first barrier waits for A's loads only
        dma_rows<typename Shape::KLayout, Shape::KLayout::kRowBytes, kGroupWaves>(tile.k_block(key_of_block(0)),
                                                                                  tile.a.k_token, kbuf(0), wave, lane);
      }
      dma_phase(0, Ic<0>{});               // K(1), V(0) right behind K(0): the first blocks' latencies overlap
      if (lead) {                          // Q and K(0) landed (loads retire in order); K(1), V(0) may still fly
        if (nb > 1) mm::wait_vmcnt<kKLoadsMin + kVLoadsMin>();
        else mm::wait_vmcnt<kVLoadsMin>();
      }
    } else {
      dma_k<Shape>(tile, key_of_block(0), kbuf(0), wave, lane);
      mm::wait_vmcnt<0>();
    }
    phase_barrier();                       // K(0) visible
    if (!lead) {                           // group B's phase 0: its share of the DMA of K(1), V(0)
      if constexpr (!kEarlyDma) dma_phase(0, Ic<0>{});
      phase_barrier();
    }
    // The key loop, in two copies where kSkipL: with the fp32 sum l (LSE or a split part) and without it (l serves
    // only those; the normaliser is lb): modeled d128 dense 2736 -> 2632 cycles per block without the LSE, 2736 with
    // it (a branch inside the softmax phase instead cost the LSE path 416 cycles per block: the adds then no longer
    // filled the exp2 windows). The other kernels keep one copy (a second spilled the fp8 d256 ones).
    auto key_loop = [&](auto nl) MM_INLINE_LAMBDA {
    // block 0: QK only
    mm::set_priority<1>();
    mfma_phase<Shape, 0, false, true, kPf>(st, ad, s, [&]() MM_INLINE_LAMBDA { if (lead && !kEarlyDma) dma_phase(0, Ic<0>{}); });
    mm::set_priority<0>();
    if (!lead) land(0);
    phase_barrier(s);
    if (!lead && !kLateDmaB) dma_phase(1, Ic<1>{});
    softmax_phase(0, true, nl);
    if (!lead && kLateDmaB) dma_phase(1, Ic<1>{});
    if (lead) land(0);
    phase_barrier(st.p, st.o, st.lb, st.l);
    int32_t n = 1;
    for (; n + 1 < nb; n += 2) {
      block(Ic<1>{}, n, nl);
      block(Ic<0>{}, n + 1, nl);
    }
    if (n < nb) {
      block(Ic<1>{}, n, nl);
      ++n;
    }
    // the last PV: M(nb) without QK (V(nb-1) in buffer (nb-1) % 2)
    mm::set_priority<1>();
    if (nb & 1) mfma_phase<Shape, 1, true, false, kPf>(st, ad, s, []() MM_INLINE_LAMBDA {});
    else mfma_phase<Shape, 0, true, false, kPf>(st, ad, s, []() MM_INLINE_LAMBDA {});
    mm::set_priority<0>();
    if (lead) phase_barrier();             // group A's last phase: the barrier count of group B
    };
    if (!kSkipL<Shape> || need_l) key_loop(Ic<1>{});
    else key_loop(Ic<0>{});
  }

  if constexpr (Shape::kKvFp8) {
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) mm::scale(st.o[n], vd);
  }
  if constexpr (Shape::kSinks) {
    add_sink(st, sink2, lane);
  }
  if (ep.final_rows) store_final(st, ep, wave, lane);
  else store_part(st, ep, wave, lane);
}

}  // namespace attn950
