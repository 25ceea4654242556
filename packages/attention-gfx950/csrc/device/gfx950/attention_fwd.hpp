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
// Head dims (FwdShape): 64, 80 (K padded to 96), 96, 128, 192/128, 256; with Dv 256 a wave owns one 16-row tile
// and two workgroups run a 256-row item (FwdShape::kRowSplit).
//
// LDS (160 KiB on gfx950; we use 64 KiB for Dqk 128, 80 KiB for 192, 128 KiB for 256): two stages, each one K block
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
// Head dims (issue 17: 64, 80, 96, 128, 192/128, 256). Dqk is padded to the 32-wide k-step of the QK MFMA in
// LDS (80 -> 96; the pad chunks are DMA'd as zeros and Q's pad lanes zeroed), Dv is a multiple of 16. The XOR
// swizzle period is the largest of 8, 4, 2 that divides a row's 16-byte chunks (12 for 96: period 4).
// Rows: kRowTiles 16-row tiles per wave. While the wave's resident Q and O fit in 128 VGPRs it holds two
// (every K/V fragment feeds two MFMAs); Dqk = Dv = 256 holds one, and a 256-row work item is run by
// kRowSplit = 2 workgroups of 128 rows each (the item, the plan and the planner stay those of 256 rows; the
// launch doubles grid.x).
constexpr int swizzle_period(int chunks) { return chunks % 8 == 0 ? 8 : chunks % 4 == 0 ? 4 : 2; }

// KvFp8_: K and V are OCP e4m3fn in memory (fp8 K/V, issue 17), dequantised to bf16 on their way to LDS
// (dequant_block: exact, every e4m3fn value is a bf16 value); their descales fold into the softmax scale (K) and
// the output (V). LDS and every later stage are those of bf16 K/V.
template <bool Fp8> struct KvElem { typedef uint16_t type; };
template <> struct KvElem<true> { typedef uint8_t type; };

template <int Dqk_, int Dv_, bool Softcap_ = false, bool Window_ = false, bool Sinks_ = false, bool KvFp8_ = false>
struct FwdShape {
  static constexpr int Dqk = Dqk_, Dv = Dv_;
  static constexpr bool kSoftcap = Softcap_, kWindow = Window_, kSinks = Sinks_, kKvFp8 = KvFp8_;
  typedef typename KvElem<KvFp8_>::type KvT;                 // K/V element in memory
  static constexpr int kKvBytes = sizeof(KvT);
  static constexpr int kDqkPad = (Dqk + 31) / 32 * 32;      // K row in LDS, Q operand width
  static constexpr int kQkSteps = kDqkPad / 32;             // MFMA k-steps per 16-key QK tile
  static constexpr int kDvTiles = Dv / 16;                  // 16-column output tiles
  static constexpr int kKeyTiles = kKvBlock / 16;           // 16-key tiles per block (4)
  static constexpr int kPvSteps = kKvBlock / 32;            // 32-key MFMA steps of PV (2)
  static constexpr int kRowTiles = (kQkSteps + kDvTiles) * 4 * kRowTilesPerWave <= 128 ? kRowTilesPerWave : 1;
  static constexpr int kWaveRows = 16 * kRowTiles;          // query rows of a wave
  static constexpr int kWgRows = kWaves * kWaveRows;        // query rows of a workgroup
  static constexpr int kRowSplit = kTileRows / kWgRows;   // workgroups per 256-row work item
  static constexpr uint32_t kKRow = kDqkPad * 2, kVRow = Dv * 2;  // LDS row bytes
  static constexpr int kKPeriod = swizzle_period(kKRow / 16), kVPeriod = swizzle_period(kVRow / 16);
  static constexpr uint32_t kKBytes = kKvBlock * kKRow, kVBytes = kKvBlock * kVRow;
  static constexpr uint32_t kStageBytes = kKBytes + kVBytes;
  static constexpr uint32_t kLdsBytes = 2 * kStageBytes;
  static_assert(Dqk % 16 == 0 && Dv % 16 == 0 && kTileRows % kWgRows == 0, "head dims");
  static_assert(!kKvFp8 || kDqkPad == Dqk, "fp8 K/V: Dqk a multiple of 32");
  static_assert(kKBytes % 1024 == 0 && kVBytes % 1024 == 0, "whole 64-lane DMA rows");
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
// The same read at p + Off (the instruction's immediate offset; Off < 2^16): Dv = 256 reads its 16 tiles from 4
// base addresses (see pv) instead of 32 address registers.
template <uint32_t Off>
MM_DEVICE i16x4 lds_read_tr16_b64_at(const lds_u8* p) {
  static_assert(Off < 65536u, "DS offset field");
  i16x4 r;
  asm volatile("ds_read_b64_tr_b16 %0, %1 offset:%2" : "=v"(r) : "v"(__builtin_bit_cast(uint32_t, p)), "i"(Off) : "memory");
  return r;
}
// s_waitcnt lgkmcnt(0) that the compiler cannot schedule a use of x[] before.
MM_DEVICE void lds_wait_tied(i16x4 (&x)[8]) {
  asm volatile("s_waitcnt lgkmcnt(0)"
               : "+v"(x[0]), "+v"(x[1]), "+v"(x[2]), "+v"(x[3]), "+v"(x[4]), "+v"(x[5]), "+v"(x[6]), "+v"(x[7]));
}
// Any other count (head dims other than 128): the wait, then an empty asm per value that the compiler must
// keep after it (volatile asm statements stay in order), so no use of x[] moves above the wait.
template <int N>
MM_DEVICE void lds_wait_tied(i16x4 (&x)[N]) {
  asm volatile("s_waitcnt lgkmcnt(0)");
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+v"(x[i]));
}

// Byte offset of 16-byte chunk c of row r in a swizzled LDS block of row_bytes per row (swizzle period P).
template <uint32_t P = 8>
MM_DEVICE uint32_t swz(uint32_t r, uint32_t c, uint32_t row_bytes) { return r * row_bytes + ((c ^ (r & (P - 1u))) << 4); }

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
  typedef typename Shape::KvT KvT;
  const KvT* k_head;        // k of (batch, kv head), token 0 of the sequence
  const KvT* v_head;

  MM_DEVICE DenseTile(const AttnFwdArgs& a_, const AttnWorkItem& it_, int32_t h_, const uint16_t* k,
                      const uint16_t* v)
      : a(a_), it(it_), h(h_), hk(h_ / a_.group) {
    k_head = reinterpret_cast<const KvT*>(k) + it.batch * a.k_batch + hk * a.k_head + (int64_t)it.k_tok0 * a.k_token;
    v_head = reinterpret_cast<const KvT*>(v) + it.batch * a.v_batch + hk * a.v_head + (int64_t)it.k_tok0 * a.v_token;
  }
  // Rows [r0, r0 + Shape::kWgRows) of the tile (the workgroup's: all 256 but with Dv 256, see FwdShape),
  // clipped to the sequence; <= 0: none.
  MM_DEVICE int32_t rows(int32_t r0 = 0) const {
    const int32_t r = it.q_len - it.q_row0 - r0;
    return r < Shape::kWgRows ? r : Shape::kWgRows;
  }
  MM_DEVICE mm::buffer_rsrc q_rsrc(const uint16_t* q, int32_t r0 = 0) const {
    const uint16_t* p = q + it.batch * a.q_batch + h * a.q_head + (int64_t)(it.q_tok0 + it.q_row0 + r0) * a.q_token;
    return mm::make_buffer(p, extent_bytes(rows(r0), a.q_token, Shape::Dqk, 2));
  }
  MM_DEVICE mm::buffer_rsrc o_rsrc(uint16_t* o, int32_t r0 = 0) const {
    uint16_t* p = o + it.batch * a.o_batch + h * a.o_head + (int64_t)(it.q_tok0 + it.q_row0 + r0) * a.o_token;
    return mm::make_buffer(p, extent_bytes(rows(r0), a.o_token, Shape::Dv, 2));
  }
  MM_DEVICE mm::buffer_rsrc lse_rsrc(float* lse, int32_t r0 = 0) const {
    float* p = lse + it.batch * a.lse_batch + h * a.lse_head + it.q_tok0 + it.q_row0 + r0;
    return mm::make_buffer(p, rows(r0) > 0 ? (uint32_t)rows(r0) * 4u : 0u);
  }
  // K / V rows [key0, key0 + 64) of the sequence, clipped to k_len: loads past the end return 0.
  MM_DEVICE int32_t block_rows(int32_t key0) const { int32_t r = it.k_len - key0; return r < kKvBlock ? r : kKvBlock; }
  MM_DEVICE mm::buffer_rsrc k_block(int32_t key0) const {
    return mm::make_buffer(k_head + (int64_t)key0 * a.k_token,
                           extent_bytes(block_rows(key0), a.k_token, Shape::Dqk, Shape::kKvBytes));
  }
  MM_DEVICE mm::buffer_rsrc v_block(int32_t key0) const {
    return mm::make_buffer(v_head + (int64_t)key0 * a.v_token,
                           extent_bytes(block_rows(key0), a.v_token, Shape::Dv, Shape::kKvBytes));
  }
};

// ---- pipeline state -----------------------------------------------------------------------------
template <class Shape>
struct WaveState {
  FragB q[Shape::kRowTiles][Shape::kQkSteps];       // Q^T operands, resident
  FragC o[Shape::kRowTiles][Shape::kDvTiles];       // O^T accumulators
  float m[Shape::kRowTiles];                        // running max (log2 units, row-uniform)
  float l[Shape::kRowTiles];                        // this lane's share of the running sum (fp32 p: the LSE)
  FragC lb[Shape::kRowTiles];                       // running sum of the bf16 P (every register = the row's)
};

// ---- stages -------------------------------------------------------------------------------------
// Q rows of this wave: lane (g, j) of row tile rt holds Q[row kWaveRows w + 16rt + j][32s + 8g .. +7] (rows of
// the q resource: the workgroup's). Dqk 80: the lanes of dims 80..95 (g >= 2 of the last step) hold zeros.
template <class Shape>
MM_DEVICE void load_q(WaveState<Shape>& st, mm::buffer_rsrc q, int64_t q_token, uint32_t wave, uint32_t lane) {
  (void)lane;
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt)
#pragma unroll
    for (int s = 0; s < Shape::kQkSteps; ++s) {
      mm::load_b(st.q[rt][s], q, ((uint32_t)Shape::kWaveRows * wave + 16u * rt) * (uint32_t)q_token * 2u + 64u * s,
                 (uint32_t)q_token * 2u);
      if constexpr (Shape::kDqkPad != Shape::Dqk) {
        if (s == Shape::kQkSteps - 1 && 32 * s + 8 * (int)(lane >> 4) >= Shape::Dqk) st.q[rt][s].w = u32x4{0u, 0u, 0u, 0u};
      }
    }
}

// A negative softmax_scale: s' = (-q) k with the scale |scale| (bf16 negation is exact).
template <class Shape>
MM_DEVICE void negate_q(WaveState<Shape>& st) {
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt)
#pragma unroll
    for (int s = 0; s < Shape::kQkSteps; ++s)
      st.q[rt][s].w ^= 0x80008000u;
}

// DMA one K block and one V block into a stage: the CTA's 8 waves share the block's 64-lane loads of 16 bytes,
// Loads per wave (wave w issues loads w*Loads .. +Loads-1 that exist: with 96 or 80 dims the last round is
// partial, a wave-uniform skip); LDS chunk position p = 64*load + lane is row p / chunks, chunk p % chunks,
// fetched from global chunk (p % chunks) ^ (row & (period - 1)) (the swizzle). Chunks past the source row (the
// pad of Dqk 80 to 96) read past the resource: zeros.
template <int RowBytes, int SrcBytes = RowBytes>
struct DmaRows {
  static constexpr uint32_t kChunks = RowBytes / 16, kSrcChunks = SrcBytes / 16;
  static constexpr uint32_t kPeriod = swizzle_period(RowBytes / 16);
  static constexpr int kRowLoads = kKvBlock * RowBytes / 1024;         // 64-lane loads of a 64-row block
  static constexpr int kLoads = (kRowLoads + kWaves - 1) / kWaves;     // per wave
  static constexpr bool kPartial = kRowLoads % kWaves != 0;
  static constexpr uint32_t kPastEnd = 1u << 31;   // beyond any block resource (64 rows < 2^31 bytes)
  MM_DEVICE static bool issued(uint32_t wave, int i) { return !kPartial || (int)wave * kLoads + i < kRowLoads; }
  // (row, global chunk) of lane `lane` in load i of wave `wave`
  MM_DEVICE static uint32_t row_of(uint32_t wave, int i, uint32_t lane) { return ((wave * kLoads + i) * 64u + lane) / kChunks; }
  MM_DEVICE static uint32_t chunk_of(uint32_t wave, int i, uint32_t lane) {
    const uint32_t p = (wave * kLoads + i) * 64u + lane;
    return (p % kChunks) ^ ((p / kChunks) & (kPeriod - 1u));
  }
};

template <int RowBytes, int SrcBytes = RowBytes>
MM_DEVICE void dma_rows(mm::buffer_rsrc src, int64_t token_stride, lds_u8* dst, uint32_t wave, uint32_t lane) {
  using D = DmaRows<RowBytes, SrcBytes>;
#pragma unroll
  for (int i = 0; i < D::kLoads; ++i) {
    if (!D::issued(wave, i)) continue;
    const uint32_t base = (wave * D::kLoads + i) * 64u;
    const uint32_t row = D::row_of(wave, i, lane), c = D::chunk_of(wave, i, lane);
    uint32_t off = row * (uint32_t)token_stride * 2u + c * 16u;
    if constexpr (D::kSrcChunks < D::kChunks) off = c < D::kSrcChunks ? off : D::kPastEnd;
    mm::buffer_load_to_lds<16>(src, (void*)(dst + base * 16u), off);
  }
}

// fp8 K/V: the load stage dequantises. Each lane loads 16 fp8 (one 16-byte buffer load), widens them exactly to
// 16 bf16 (v_cvt_pk_f32_fp8, then the high halves) and writes the two bf16 chunks to their swizzled LDS places
// (the layout dma_rows makes from bf16 rows). Rows past k_len load 0. The loads are waited here (no overlap
// with the math yet); block_sync's release fence retires the LDS writes before the barrier. DequantRows is the
// lane -> (row, 16-element piece) map and the widening store, shared with the paged loader.
template <int RowBytes, int Elems>
struct DequantRows {
  static constexpr uint32_t kSrcChunks = Elems / 16;                   // 16-byte fp8 pieces of a row
  static constexpr int kRowLoads = kKvBlock * (int)kSrcChunks / 64;    // 64-lane loads of a block
  static constexpr int kLoads = (kRowLoads + kWaves - 1) / kWaves;
  static constexpr uint32_t kPeriod = swizzle_period(RowBytes / 16);
  MM_DEVICE static bool issued(uint32_t wave, int i) { return kRowLoads % kWaves == 0 || (int)wave * kLoads + i < kRowLoads; }
  MM_DEVICE static uint32_t row_of(uint32_t wave, int i, uint32_t lane) { return ((wave * kLoads + i) * 64u + lane) / kSrcChunks; }
  MM_DEVICE static uint32_t piece_of(uint32_t wave, int i, uint32_t lane) { return ((wave * kLoads + i) * 64u + lane) % kSrcChunks; }
  MM_DEVICE static void store(lds_u8* dst, uint32_t row, uint32_t c, u32x4 w) {
    u32x4 lo, hi;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const mm::f32x2 a = mm::cvt_pk_f32_fp8<false>(w[j]), b = mm::cvt_pk_f32_fp8<true>(w[j]);
      const uint32_t x0 = mm::pack_bf16x2_hi(a[0], a[1]), x1 = mm::pack_bf16x2_hi(b[0], b[1]);
      if (j < 2) { lo[2 * j] = x0; lo[2 * j + 1] = x1; } else { hi[2 * j - 4] = x0; hi[2 * j - 3] = x1; }
    }
    mm::lds_write_b128(dst, swz<kPeriod>(row, 2u * c, RowBytes), lo);
    mm::lds_write_b128(dst, swz<kPeriod>(row, 2u * c + 1u, RowBytes), hi);
  }
};

template <int RowBytes, int Elems>
MM_DEVICE void dequant_rows(mm::buffer_rsrc src, int64_t token_stride, lds_u8* dst, uint32_t wave, uint32_t lane) {
  using D = DequantRows<RowBytes, Elems>;
#pragma unroll
  for (int i = 0; i < D::kLoads; ++i) {
    if (!D::issued(wave, i)) continue;
    const uint32_t row = D::row_of(wave, i, lane), c = D::piece_of(wave, i, lane);
    D::store(dst, row, c, mm::buffer_load_b128(src, row * (uint32_t)token_stride + c * 16u));
  }
}

template <class Shape, class Tile>
MM_DEVICE void dma_block(const Tile& tile, int32_t key0, lds_u8* stage, uint32_t wave, uint32_t lane) {
  if constexpr (Shape::kKvFp8) {
    dequant_rows<Shape::kKRow, Shape::Dqk>(tile.k_block(key0), tile.a.k_token, stage, wave, lane);
    dequant_rows<Shape::kVRow, Shape::Dv>(tile.v_block(key0), tile.a.v_token, stage + Shape::kKBytes, wave, lane);
  } else {
    dma_rows<Shape::kKRow, Shape::Dqk * 2>(tile.k_block(key0), tile.a.k_token, stage, wave, lane);
    dma_rows<Shape::kVRow>(tile.v_block(key0), tile.a.v_token, stage + Shape::kKBytes, wave, lane);
  }
}

// S^T for the wave's row tiles against the 64 keys of a stage: A = K tile t from the swizzled LDS
// block (one b128 read feeds both row tiles), B = the resident Q^T.
template <class Shape>
MM_DEVICE void qk(const WaveState<Shape>& st, const lds_u8* kblk, FragC (&s)[Shape::kRowTiles][Shape::kKeyTiles],
                  uint32_t lane) {
  (void)lane;
  using KLayout = mm::XorLds<Shape::kKRow, 16, Shape::kKPeriod>;   // chunk c of row r at chunk c ^ (r % period)
#pragma unroll
  for (int t = 0; t < Shape::kKeyTiles; ++t) {
#pragma unroll
    for (int rt = 0; rt < Shape::kRowTiles; ++rt) s[rt][t] = mm::zeros<Mfma>();
#pragma unroll
    for (int ks = 0; ks < Shape::kQkSteps; ++ks) {
      FragA kf;
      mm::lds_load_a<KLayout>(kf, (const void*)kblk, 16u * t, 32u * ks);
#pragma unroll
      for (int rt = 0; rt < Shape::kRowTiles; ++rt) mm::mma(s[rt][t], kf, st.q[rt][ks], s[rt][t]);
    }
  }
}

// Gemma-2 soft-cap of the raw scores: s -> tanh(|scale| s / cap) = 1 - 2 / (1 + 2^(s pre2)), pre2 =
// 2 |scale| log2(e) / cap; the softmax then multiplies by c = cap log2(e), so its logits are
// cap tanh(scale s / cap) in log2 units. exp2 overflowing to inf gives rcp = 0, t = 1 (no NaN); tanh is
// monotone, so the max-then-scale of softmax_step stays exact. Before the mask: a masked key stays -inf.
template <class Shape>
MM_DEVICE void softcap_block(FragC (&s)[Shape::kRowTiles][Shape::kKeyTiles], float pre2) {
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt)
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        s[rt][t].v[r] = __builtin_fmaf(-2.f, mm::rcp(1.f + mm::exp2(s[rt][t].v[r] * pre2)), 1.f);
}

// Keys at or past a row's limit (k_len, or the causal diagonal) -> -inf. Only blocks that cross a
// limit of the wave's rows pay for it (a wave-uniform branch).
template <class Shape>
MM_DEVICE void mask_block(FragC (&s)[Shape::kRowTiles][Shape::kKeyTiles], int32_t key0,
                          const int32_t (&limit)[Shape::kRowTiles], uint32_t lane) {
  const int32_t g = (int32_t)(lane >> 4);
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt)
#pragma unroll
    for (int t = 0; t < Shape::kKeyTiles; ++t)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        if (key0 + 16 * t + 4 * g + r >= limit[rt]) s[rt][t].v[r] = kNegInf;
}

// The window form: keys below a row's lower bound lo go too (the upper bound is in limit).
template <class Shape>
MM_DEVICE void mask_block_window(FragC (&s)[Shape::kRowTiles][Shape::kKeyTiles], int32_t key0,
                                 const int32_t (&limit)[Shape::kRowTiles], const int32_t (&lo)[Shape::kRowTiles],
                                 uint32_t lane) {
  const int32_t g = (int32_t)(lane >> 4);
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt)
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
MM_DEVICE void softmax_step(WaveState<Shape>& st, FragC (&s)[Shape::kRowTiles][Shape::kKeyTiles], float c) {
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt) {
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

// The wide-V reads of pv: tile N at base[N % 4] + 128 (N / 4), its key_hi half 16 rows further (into lo/hi
// [N - N0]), for tiles N0 <= N < N1.
template <class Shape, int N0, int N1, int N = N0>
MM_DEVICE void read_v_wide(i16x4 (&lo)[N1 - N0], i16x4 (&hi)[N1 - N0], const lds_u8* const (&base)[4]) {
  if constexpr (N < N1) {
    constexpr uint32_t off = (N / 4) * 128u;
    lo[N - N0] = lds_read_tr16_b64_at<off>(base[N % 4]);
    hi[N - N0] = lds_read_tr16_b64_at<off + 16u * Shape::kVRow>(base[N % 4]);
    read_v_wide<Shape, N0, N1, N + 1>(lo, hi, base);
  }
}

// PV step c of a wide V, 8 output tiles at a time from N0 on.
template <class Shape, int N0 = 0>
MM_DEVICE void pv_wide(WaveState<Shape>& st, const FragB (&pb)[Shape::kRowTiles][Shape::kPvSteps], int c,
                       const lds_u8* const (&base)[4]) {
  if constexpr (N0 < Shape::kDvTiles) {
    i16x4 lo[8], hi[8];
    read_v_wide<Shape, N0, N0 + 8>(lo, hi, base);
    lds_wait_tied(lo);
    lds_wait_tied(hi);
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const mm::i16x8 a8 = {lo[n][0], lo[n][1], lo[n][2], lo[n][3], hi[n][0], hi[n][1], hi[n][2], hi[n][3]};
      const FragA vf = {__builtin_bit_cast(u32x4, a8)};
#pragma unroll
      for (int rt = 0; rt < Shape::kRowTiles; ++rt) mm::mma(st.o[rt][N0 + n], vf, pb[rt][c], st.o[rt][N0 + n]);
    }
    pv_wide<Shape, N0 + 8>(st, pb, c, base);
  }
}

// O^T += V^T P^T over the 64 keys of a stage.
template <class Shape>
MM_DEVICE void pv(WaveState<Shape>& st, const FragC (&p)[Shape::kRowTiles][Shape::kKeyTiles], const lds_u8* vblk,
                  uint32_t lane) {
  const uint32_t g = lane >> 4, sl = lane & 15u;
  FragB pb[Shape::kRowTiles][Shape::kPvSteps];      // P^T: two packed 16-key C tiles per 32-key step
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt)
#pragma unroll
    for (int c = 0; c < Shape::kPvSteps; ++c) pb[rt][c].w = __builtin_bit_cast(u32x4, to_bf16x8(p[rt][2 * c].v, p[rt][2 * c + 1].v));
  // lb += row sums of the bf16 P the PV MFMAs use (an MFMA against ones): normalising by them makes the
  // weights of each output row sum to 1 exactly (measured: lower rel. Frobenius error on every peer shape);
  // the fp32 sum l stays for the LSE, which it gets ~1000x more accurately.
  const FragA ones = {u32x4{0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u}};
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt)
#pragma unroll
    for (int c = 0; c < Shape::kPvSteps; ++c) mm::mma(st.lb[rt], ones, pb[rt][c], st.lb[rt]);
#pragma unroll
  for (int c = 0; c < Shape::kPvSteps; ++c) {
    // Source lane sl of group g supplies key 16(2c+h) + 4g + sl/4, columns 16n + 4(sl%4) .. +3.
    const uint32_t key_lo = 32u * c + 4u * g + (sl >> 2), key_hi = key_lo + 16u;
    if constexpr (Shape::kDvTiles > 8) {
      // Wide V (Dv 256): the swizzle only permutes chunks within groups of 8 (4 tiles), and key_hi is 16 rows
      // (16 kVRow bytes) below key_lo: tile n reads base[n % 4] + 128 (n / 4) (+ 16 kVRow for hi). Read and
      // multiplied 8 tiles at a time (32 VGPRs of V in flight, not 64: the register file is full at Dv 256).
      static_assert(Shape::kVPeriod == 8 && Shape::kDvTiles % 8 == 0, "groups of 8 chunks, 8 tiles");
      const lds_u8* base[4];
#pragma unroll
      for (int n = 0; n < 4; ++n)
        base[n] = vblk + swz<8>(key_lo, 2u * n + ((sl & 3u) >> 1), Shape::kVRow) + (sl & 1u) * 8u;
      pv_wide<Shape>(st, pb, c, base);
      continue;
    }
    i16x4 lo[Shape::kDvTiles], hi[Shape::kDvTiles];
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) {
      const uint32_t chunk = 2u * n + ((sl & 3u) >> 1), half = (sl & 1u) * 8u;
      lo[n] = lds_read_tr16_b64(vblk + swz<Shape::kVPeriod>(key_lo, chunk, Shape::kVRow) + half);
      hi[n] = lds_read_tr16_b64(vblk + swz<Shape::kVPeriod>(key_hi, chunk, Shape::kVRow) + half);
    }
    lds_wait_tied(lo);
    lds_wait_tied(hi);
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) {
      const mm::i16x8 a8 = {lo[n][0], lo[n][1], lo[n][2], lo[n][3], hi[n][0], hi[n][1], hi[n][2], hi[n][3]};
      const FragA vf = {__builtin_bit_cast(u32x4, a8)};
#pragma unroll
      for (int rt = 0; rt < Shape::kRowTiles; ++rt) mm::mma(st.o[rt][n], vf, pb[rt][c], st.o[rt][n]);
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
  for (int rt = 0; rt < Shape::kRowTiles; ++rt) {
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
  for (int rt = 0; rt < Shape::kRowTiles; ++rt) {
    const uint32_t row = (uint32_t)Shape::kWaveRows * wave + 16u * rt + j;   // of the o / lse resources (the workgroup's)
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

// A split part: fp32 O (unnormalised) and (m, l, lb) per row into its workspace slot (r0: the workgroup's first row
// of the tile).
// ws_o: [slot][head][kTileRows][Dv]; ws_ml: [slot][head][kTileRows][4] = m, l (fp32 p), lb (bf16 P), 0.
template <class Shape>
MM_DEVICE void store_part(const WaveState<Shape>& st, float* ws_o, float* ws_ml, int32_t slot, int32_t h,
                          int32_t heads, uint32_t wave, uint32_t lane, uint32_t r0 = 0) {
  const uint32_t g = lane >> 4, j = lane & 15u;
  const int64_t tile = (int64_t)slot * heads + h;
  const mm::buffer_rsrc ro = mm::make_buffer(ws_o + tile * kTileRows * Shape::Dv, kTileRows * Shape::Dv * 4u);
  const mm::buffer_rsrc rml = mm::make_buffer(ws_ml + tile * kTileRows * 4, kTileRows * 16u);
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt) {
    const uint32_t row = r0 + (uint32_t)Shape::kWaveRows * wave + 16u * rt + j;
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
  const float* k_descale = nullptr;   // the *_fp8 kernels: fp32 [heads_kv] descales of K and V; else null
  const float* v_descale = nullptr;
};

// The workgroup's rows [r0, r0 + Shape::kWgRows) of the tile against the item's keys (r0 = 0, all 256 rows,
// but with Dv 256).
template <class Shape, class Tile>
MM_DEVICE void attention_rows(const AttnFwdArgs& a, const AttnWorkItem& it, int32_t h, const Tile& tile,
                              const FwdPointers& ptr, lds_u8* lds, uint32_t wave, uint32_t lane, int32_t r0) {
  const bool causal = (a.flags & kFlagCausal) != 0;

  WaveState<Shape> st;
  load_q(st, tile.q_rsrc(ptr.q, r0), a.q_token, wave, lane);
  if (a.flags & kFlagNegScale) negate_q(st);
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt) {
    st.m[rt] = kNegInf;
    st.l[rt] = 0.f;
    st.lb[rt] = mm::zeros<Mfma>();
#pragma unroll
    for (int n = 0; n < Shape::kDvTiles; ++n) st.o[rt][n] = mm::zeros<Mfma>();
  }
  // Row limits: key < limit. Causal is bottom-right aligned: row i sees keys <= i + k_len - q_len.
  const int32_t diag = it.k_len - it.q_len + 1;
  const int32_t wave_row0 = it.q_row0 + r0 + Shape::kWaveRows * (int32_t)wave;
  int32_t limit[Shape::kRowTiles];
#pragma unroll
  for (int rt = 0; rt < Shape::kRowTiles; ++rt) {
    const int32_t row = wave_row0 + 16 * rt + (int32_t)(lane & 15u);
    limit[rt] = causal && row + diag < it.k_len ? row + diag : it.k_len;
  }
  // The wave's smallest limit decides whether a block needs the mask at all.
  int32_t wave_limit = causal && wave_row0 + diag < it.k_len ? wave_row0 + diag : it.k_len;
  int32_t kv_begin = it.kv_begin, kv_end = it.kv_end;
  // Window: row i sees keys [d - left, d + right], d = i + k_len - q_len (-1: unbounded). The host planner
  // already plans only the window's blocks; the clip here makes a device-written plan (the full causal
  // range) skip them too. wave_lo is the largest lower bound of the wave's rows (its last row's).
  int32_t lo[Shape::kRowTiles];
  int32_t wave_lo = 0;
  if constexpr (Shape::kWindow) {
    const int32_t off = it.k_len - it.q_len, left = a.window_left, right = a.window_right;
#pragma unroll
    for (int rt = 0; rt < Shape::kRowTiles; ++rt) {
      const int32_t row = wave_row0 + 16 * rt + (int32_t)(lane & 15u);
      if (right >= 0 && row + off + right + 1 < limit[rt]) limit[rt] = row + off + right + 1;
      lo[rt] = left >= 0 ? row + off - left : -kKvBlock;
    }
    if (right >= 0 && wave_row0 + off + right + 1 < wave_limit) wave_limit = wave_row0 + off + right + 1;
    wave_lo = left >= 0 ? wave_row0 + (Shape::kWaveRows - 1) + off - left : -kKvBlock;
    if (left >= 0) {
      const int32_t tile_lo = it.q_row0 + r0 + off - left;
      if (tile_lo > kv_begin) kv_begin = tile_lo & ~(kKvBlock - 1);
    }
    if (right >= 0) {
      const int32_t end_row = it.q_row0 + r0 + Shape::kWgRows;
      const int32_t last = (it.q_len < end_row ? it.q_len : end_row) - 1;
      if (last + off + right + 1 < kv_end) kv_end = last + off + right + 1;
    }
  }

  // fp8 K/V: S = kd (Q K8), so K's descale joins the logit factor (the tanh argument under a soft-cap; at least
  // FLT_MIN as the planner's scale); V's scales O once after the loop.
  float scale_log2 = a.scale_log2, softcap_pre2 = a.softcap_pre2;
  if constexpr (Shape::kKvFp8) {
    const float kd = ptr.k_descale[tile.hk];
    if constexpr (Shape::kSoftcap) softcap_pre2 *= kd;
    else scale_log2 = __builtin_fmaxf(scale_log2 * kd, 1.17549435e-38f);
  }

  if (kv_begin < kv_end) dma_block<Shape>(tile, kv_begin, lds, wave, lane);
  uint32_t stage = 0;
  for (int32_t key0 = kv_begin; key0 < kv_end; key0 += kKvBlock) {
    mm::wait_vmcnt<0>();
    mm::block_sync();
    lds_u8* cur = lds + stage * Shape::kStageBytes;
    if (key0 + kKvBlock < kv_end) dma_block<Shape>(tile, key0 + kKvBlock, lds + (stage ^ 1u) * Shape::kStageBytes, wave, lane);
    FragC s[Shape::kRowTiles][Shape::kKeyTiles];
    qk(st, cur, s, lane);
    if constexpr (Shape::kSoftcap) softcap_block<Shape>(s, softcap_pre2);
    if constexpr (Shape::kWindow) {
      if (key0 + kKvBlock > wave_limit || key0 < wave_lo) mask_block_window<Shape>(s, key0, limit, lo, lane);
    } else {
      if (key0 + kKvBlock > wave_limit) mask_block<Shape>(s, key0, limit, lane);
    }
    softmax_step(st, s, scale_log2);
    pv(st, s, cur + Shape::kKBytes, lane);
    stage ^= 1u;
  }

  if constexpr (Shape::kKvFp8) {
    const float vd = ptr.v_descale[tile.hk];
#pragma unroll
    for (int rt = 0; rt < Shape::kRowTiles; ++rt)
#pragma unroll
      for (int n = 0; n < Shape::kDvTiles; ++n) mm::scale(st.o[rt][n], vd);
  }
  if constexpr (Shape::kSinks) {
    if (it.slot < 0 || it.sink_part) add_sink(st, ptr.sinks[h] * mm::kLog2e, lane);
  }
  if (it.slot < 0)
    store_final(st, tile.o_rsrc(ptr.o, r0), a.o_token, tile.lse_rsrc(ptr.lse, r0), (a.flags & kFlagLse) != 0, wave,
                lane);
  else
    store_part(st, ptr.ws_o, ptr.ws_ml, it.slot, h, a.heads_q, wave, lane, (uint32_t)r0);
}

// Tile: the partitioner (DenseTile; PagedTile in attention_fwd_paged.hpp), built from the item and
// the pointers plus its own extra arguments. Workgroup x runs item x / kRowSplit, rows r0 = (x % kRowSplit)
// kWgRows .. of its 256 (one workgroup per item unless Dv = 256: the grid is then kRowSplit x the items).
template <class Shape, class Tile = DenseTile<Shape>, class... TileExtra>
MM_DEVICE void attention_fwd(const AttnFwdArgs* __restrict__ plan, const FwdPointers& ptr, lds_u8* lds,
                             const TileExtra&... extra) {
  const AttnFwdArgs a = *plan;
  const uint32_t x = mm::block_id_x();
  const AttnWorkItem it = reinterpret_cast<const AttnWorkItem*>(plan + 1)[x / (uint32_t)Shape::kRowSplit];
  const int32_t h = (int32_t)mm::block_id_y();
  const uint32_t wave = mm::wave_id(), lane = mm::lane_id();
  const Tile tile(a, it, h, ptr.k, ptr.v, extra...);
  const int32_t r0 = (int32_t)(x % (uint32_t)Shape::kRowSplit) * Shape::kWgRows;
  if constexpr (Shape::kRowSplit > 1) {
    if (tile.rows(r0) <= 0) return;        // the sequence ends in an earlier part (workgroup-uniform)
  }
  attention_rows<Shape>(a, it, h, tile, ptr, lds, wave, lane, r0);
}

}  // namespace attn950
