// MXFP4 MoE grouped GEMMs on gfx942 (and the gfx950 a16w4 build): the pieces the gate/up and down
// kernels share.
//
// Shapes and layouts (docs/kernels/mxfp4_moe_gfx942.md has the full story):
//   A   activations, bf16 [A_rows, K] row-major; the A row of sorted slot `s` is s / a_row_div.
//   W   repacked E2M1 weights, bytes [E, K/32, N, 16]: one 16-byte granule = 32 k of one column.
//       Inside a granule, dword d holds k = 8d..8d+7: the low nibbles of its bytes 0..3 are
//       k = 8d+0..3, the high nibbles k = 8d+4..7. Nibble bit 3 is the sign.
//   S   E8M0 scales, bytes [E, K/32, N] (one per 32 k per column).
//   C   bf16 [C_rows, ldc]; the C row of slot `s` is s.
//
// MFMA mapping (v_mfma_f32_16x16x16_bf16, layouts in moonmath/mfma.hpp): the A operand is the
// dequantised weight (its 16 "rows" are 16 output columns), the B operand is the activation tile
// (its 16 "columns" are 16 token rows). So lane (q = lane/16, j = lane%16) ends with output
// columns 4q..4q+3 of token row j: one 8-byte store per lane.
//
// K is walked in slabs of 128. In a slab, lane group q owns the 32-k block kb = 4*slab + q; MFMA
// m (0..7) of the slab feeds lane group q with k = 32q + 4m + 0..3 of the slab, from both operands.
// Every output element is one fp32 accumulator chained through the slabs in ascending order and
// the 8 MFMAs of a slab in order, whatever block_m, column tiles per wave or column steps the
// planner picked: results do not depend on those choices, bit for bit. The down kernel uses the
// same chain, so it equals the gate/up kernel with EPI_NONE bit for bit.
#pragma once
#include "moonmath/all.hpp"

namespace mm::moe {

constexpr int kWaves = 8;
constexpr int kThreads = kWaves * kWaveSize;
constexpr int kSlabK = 128;          // k per slab
constexpr int kRowBytes = 256;       // bf16 bytes of one A row in one slab
constexpr int kGranulesPerRow = 16;  // 16-byte granules per A row per slab
// Out-of-range voffset of the A loads: buffers span up to 4 GiB - 1 bytes, and an A buffer's size is a
// multiple of 16 (16-byte aligned rows, K % 32 == 0), so it is <= 0xFFFFFFF0: every dword of a b128 load
// here ends past num_records and none wraps past 2^32. Loads return 0.
constexpr uint32_t kOOB = 0xFFFFFFF0u;

// perm(hi, lo, sel) below is mm::perm (moonmath/convert.hpp): one v_perm_b32.

// Dequantisation table of one E8M0 scale byte e: the bf16 bit patterns of c * 2^(e-127) for the E2M1
// magnitudes c = {0, .5, 1, 1.5, 2, 3, 4, 6}, split into high and low bytes so that v_perm can look four
// of them up at once. Built from the fp32 product, which is exact (at most two significant bits, never
// below 2^-128) and exactly representable in bf16 down to its subnormals, inf where it overflows (the
// largest magnitudes from e = 253 on), and NaN for e = 0xFF (every entry, zero included, as 0 * NaN).
// The sign is OR-ed in later.
struct ScaleTable {
  uint32_t h03, h47, l03, l47;  // high bytes of entries 0..3 / 4..7, low bytes likewise
};

MM_DEVICE ScaleTable make_table(uint32_t e) {
  const float s = e8m0_to_f32(e);
  const float mag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  uint32_t q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) q[i] = pack_bf16x2<Round::RTNE>(mag[2 * i] * s, mag[2 * i + 1] * s);
  ScaleTable t;
  t.h03 = perm(q[1], q[0], 0x07050301u);
  t.l03 = perm(q[1], q[0], 0x06040200u);
  t.h47 = perm(q[3], q[2], 0x07050301u);
  t.l47 = perm(q[3], q[2], 0x06040200u);
  return t;
}

// All 256 tables live in LDS (4 KiB), built once per workgroup before its first barrier: a granule's
// table is then one ds_read_b128 instead of a dozen VALU ops.
constexpr int kTableBytes = 256 * 16;

MM_DEVICE void build_tables(uint8_t* tables) {
  const uint32_t tid = thread_id_x();
  if (tid < 256) {
    const ScaleTable t = make_table(tid);
    *(u32x4*)(tables + tid * 16u) = u32x4{t.h03, t.h47, t.l03, t.l47};
  }
}

MM_DEVICE ScaleTable load_table(const uint8_t* tables, uint32_t e) {
  const u32x4 v = *(const u32x4*)(tables + (e & 0xFFu) * 16u);
  ScaleTable t;
  t.h03 = v.x;
  t.h47 = v.y;
  t.l03 = v.z;
  t.l47 = v.w;
  return t;
}

// The MFMA of both kernels (moonmath/tile.hpp): A = dequantised weights, B = activations. gfx950 (the
// a16w4 build in csrc/device/gfx950/) uses its 16x16x32 bf16 shape: one MFMA per dequantised dword of
// 8 weights instead of two, the same lanes, k blocks and registers otherwise.
#if defined(__gfx950__)
typedef Mfma16x16x32Bf16 Mma;
#else
typedef Mfma16x16x16Bf16 Mma;
#endif
// MFMAs per 16x16 output tile per slab: the 4 lane groups each own 32 k of the slab.
constexpr int kSlabMfmas = kSlabK / Mma::K;

// 8 nibbles (k = 0..3 in the low nibbles of bytes 0..3, k = 4..7 in the high nibbles) -> 8 bf16 in k
// order: lo = k 0..3, hi = k 4..7 (two 16x16x16 operands, or together one 16x16x32 operand).
struct Dequant8 {
  u32x2 lo, hi;
};

MM_DEVICE Dequant8 dequant8(uint32_t w, const ScaleTable& t) {
  const uint32_t m03 = w & 0x07070707u;         // magnitudes of k 0..3, one per byte
  const uint32_t m47 = (w >> 4) & 0x07070707u;  // magnitudes of k 4..7
  const uint32_t h03 = perm(t.h47, t.h03, m03) | ((w << 4) & 0x80808080u);  // + sign into bit 15
  const uint32_t l03 = perm(t.l47, t.l03, m03);
  const uint32_t h47 = perm(t.h47, t.h03, m47) | (w & 0x80808080u);
  const uint32_t l47 = perm(t.l47, t.l03, m47);
  Dequant8 r;
  r.lo = u32x2{perm(h03, l03, 0x05010400u), perm(h03, l03, 0x07030602u)};
  r.hi = u32x2{perm(h47, l47, 0x05010400u), perm(h47, l47, 0x07030602u)};
  return r;
}

// One lane's share of one column tile in one slab: its 16-byte granule and the scale byte.
struct WeightSlab {
  u32x4 nib;
  uint32_t scale;
};

// Buffers of one expert's weights and scales: reads at k-blocks >= K/32 fall outside and return 0.
struct ExpertWeights {
  buffer_rsrc w, s;
  uint32_t n;   // columns of W
  uint32_t kb;  // K / 32
};

MM_DEVICE ExpertWeights expert_weights(const uint8_t* W, const uint8_t* S, uint32_t expert, uint32_t n,
                                       uint32_t kb) {
  const uint64_t per_w = (uint64_t)kb * n * 16u, per_s = (uint64_t)kb * n;
  ExpertWeights ew;
  ew.w = make_buffer(W + expert * per_w, (uint32_t)per_w);
  ew.s = make_buffer(S + expert * per_s, (uint32_t)per_s);
  ew.n = n;
  ew.kb = kb;
  return ew;
}

// Lane (q, i) of a wave owns column `col` at k-block 4*slab + q: its granule index is
// weight_index(col) + 4*N*slab (the scale byte has the same index). No masks: k-blocks >= K/32 lie past
// the expert's buffers and read 0; a column >= N reads another column's granule, whose products only
// reach output columns >= N, which are never stored.
MM_DEVICE uint32_t weight_index(const ExpertWeights& ew, uint32_t col) { return (lane_id() >> 4) * ew.n + col; }

// in = false: offsets past both buffers (a weight buffer's size is 16 x its scale buffer's, at most
// 0xFFFFFFF0), so the loads return 0 and fetch nothing.
MM_DEVICE WeightSlab load_weight_slab(const ExpertWeights& ew, uint32_t index0, uint32_t slab, bool in = true) {
  const uint32_t idx = index0 + slab * 4u * ew.n;
  WeightSlab ws;
  ws.nib = buffer_load_b128(ew.w, in ? idx * 16u : kOOB);
  ws.scale = buffer_load_u8(ew.s, in ? idx : kOOB);
  return ws;
}

// A tile of one slab in LDS: BM rows of 256 bytes; the 16-byte granule g of row r sits at granule
// slot g ^ (r & 15), so the 16 rows one ds_read_b128 touches hit 16 different granule slots.
typedef XorLds<kRowBytes, 16, 16> SlabLds;
MM_DEVICE uint32_t a_lds_offset(uint32_t row, uint32_t granule) { return SlabLds::offset(row, granule * 16u); }

// acc[r][t] += W(tile t)^T-ish x A(subtile r) over one slab: dequantise each tile's granule once and
// use it against every row subtile. The activation operands of a 16-row subtile are k-blocked over
// the slab's MFMAs (lane (q, j) reads row j's k = 32q .. 32q+31, granules 4q..4q+3; a[r][m] feeds
// MFMA m), matching the weights' granule of k-block q: dword d of the granule (k = 32q + 8d ..+7)
// feeds MFMAs 2d, 2d+1 (16x16x16: 4 k each) or MFMA d (gfx950 16x16x32: 8 k).
template <int SUBS, int TILES>
MM_DEVICE void slab_mma(FragC<Mma> (&acc)[SUBS][TILES], const WeightSlab (&ws)[TILES], const uint8_t* slab_base,
                        const uint8_t* tables) {
  FragB<Mma> a[SUBS][kSlabMfmas];
#pragma unroll
  for (int r = 0; r < SUBS; ++r) lds_load_b_blocked<SlabLds, kSlabMfmas>(a[r], slab_base, 16u * r);
#pragma unroll
  for (int t = 0; t < TILES; ++t) {
    const ScaleTable tab = load_table(tables, ws[t].scale);
    const uint32_t nib[4] = {ws[t].nib.x, ws[t].nib.y, ws[t].nib.z, ws[t].nib.w};
#pragma unroll
    for (int d = 0; d < 4; ++d) {
      const Dequant8 b = dequant8(nib[d], tab);
#if defined(__gfx950__)
      FragA<Mma> w8;
      w8.w = u32x4{b.lo.x, b.lo.y, b.hi.x, b.hi.y};
#pragma unroll
      for (int r = 0; r < SUBS; ++r) mma(acc[r][t], w8, a[r][d], acc[r][t]);
#else
      FragA<Mma> lo, hi;
      lo.w = b.lo;
      hi.w = b.hi;
#pragma unroll
      for (int r = 0; r < SUBS; ++r) {
        mma(acc[r][t], lo, a[r][2 * d], acc[r][t]);
        mma(acc[r][t], hi, a[r][2 * d + 1], acc[r][t]);
      }
#endif
    }
  }
}

// Row bookkeeping of a block: the sorted slot of a block row, and whether it is live.
struct RowInfo {
  uint32_t slot;
  bool live;
};

MM_DEVICE RowInfo row_info(const int32_t* sorted_ids, uint32_t num_sorted, uint32_t index, uint32_t num_valid) {
  RowInfo ri;
  ri.slot = index < num_sorted ? (uint32_t)sorted_ids[index] : 0xFFFFFFFFu;
  ri.live = ri.slot < num_valid;  // padding sentinels, negatives (as unsigned) and overflow are dead
  return ri;
}

// Stage the 16-byte granule `g` of block row `row`, slab `slab` from global memory (0 when the row
// is dead or the granule lies at or past K).
MM_DEVICE u32x4 load_a_granule(buffer_rsrc a, uint32_t a_row_off, bool live, uint32_t slab, uint32_t g, uint32_t K) {
  const uint32_t k0 = slab * kSlabK + g * 8u;
  const bool in = live && k0 < K;
  return buffer_load_b128(a, in ? a_row_off + k0 * 2u : kOOB);
}

MM_DEVICE void store_a_granule(uint8_t* slab_base, uint32_t row, uint32_t g, u32x4 v) {
  *(u32x4*)(slab_base + a_lds_offset(row, g)) = v;
}

// Output of one lane for one (subtile, tile): token row j (slot `slot`), columns col0..col0+3. One
// 8-byte store when the 4 columns exist and the address is 8-byte aligned (c_mis = C's address mod 8;
// rows of an odd width or a C that starts off 8 bytes are not), else one 2-byte store per column.
MM_DEVICE void store_out4(buffer_rsrc c, uint32_t c_mis, uint32_t slot, uint32_t ldc, uint32_t col0, uint32_t ncols,
                          f32x4 v) {
  const uint32_t off = (slot * ldc + col0) * 2u;
  if (col0 + 4u <= ncols && ((c_mis + off) & 7u) == 0) {
    buffer_store_b64(u32x2{pack_bf16x2<Round::RTNE>(v.x, v.y), pack_bf16x2<Round::RTNE>(v.z, v.w)}, c, off);
  } else {
    const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (col0 + i < ncols) buffer_store_u16(f32_to_bf16<Round::RTNE>(e[i]), c, off + 2u * i);
  }
}

MM_DEVICE uint32_t misalignment8(const void* p) { return (uint32_t)(__builtin_bit_cast(uint64_t, p) & 7u); }

// SituGLU: (beta*tanh(g/beta)*sigmoid(g)) * (L*tanh(u/L)), tanh(x) = 2*sigmoid(2x) - 1.
MM_DEVICE float sigmoid(float x) { return rcp(1.0f + exp2(-x * kLog2e)); }
MM_DEVICE float situ(float g, float u, float beta, float inv_beta, float lin, float inv_lin) {
  const float tg = 2.0f * sigmoid(2.0f * g * inv_beta) - 1.0f;
  const float tu = 2.0f * sigmoid(2.0f * u * inv_lin) - 1.0f;
  return (beta * tg * sigmoid(g)) * (lin * tu);
}

// SwiGLU: silu(g) * u = g * sigmoid(g) * u (DeepSeek-V3/R1, Qwen3). sigmoid as above (exp2 + rcp); a
// non-finite g gives what torch's g * sigmoid(g) gives (+inf -> inf, -inf -> -inf * 0 = NaN).
MM_DEVICE float swiglu(float g, float u) { return g * sigmoid(g) * u; }

}  // namespace mm::moe
