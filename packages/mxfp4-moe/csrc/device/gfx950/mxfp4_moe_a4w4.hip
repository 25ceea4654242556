// MXFP4 MoE grouped GEMM for gfx950, a4w4: MXFP4 activations (E2M1 codes + one E8M0 scale per 32 k, the
// layout mxfp4_quant.hip writes) x the repacked MXFP4 weights, on v_mfma_scale_f32_16x16x128_f8f6f4: the
// hardware applies both scales, so the hot loop has no dequantisation VALU. Serves gate/up (EPI_SILU /
// EPI_SITU, output bf16 or, fused, MXFP4 again for the down projection) and down (EPI_NONE, bf16 output,
// routed weight) at any K % 128 == 0.
//
//   A   codes [A_rows, K/2] bytes (byte b: k = 2b lo nibble, 2b + 1 hi nibble; rows a_stride bytes apart)
//       and scales [A_rows, K/32] bytes; the A row of sorted slot s is s / a_row_div
//   W   repacked weights [E, K/32, N, 16] + scales [E, K/32, N] (repack_mxfp4, the a16w4 kernels' layout)
//   C   bf16 [C_rows, N_out], or (quantised output) codes [C_rows, N_out/2] + scales [C_rows, N_out/32]
//
// Tiling and waves as the a16w4 gate/up kernel (gfx942/mxfp4_moe_gateup.hip): 8 waves, one block of BM
// sorted rows, each wave NT column tiles of 16 (gated: NT gate + NT up tiles of the same outputs), K in
// slabs of 128 double-buffered in LDS, one barrier per slab, weights straight from global a slab ahead.
// One slab is exactly one scaled MFMA per (16-row subtile, tile): lane (q, i) gives its weight granule
// (column i, k-block 4*slab + q: 32 k) as the fp4 A operand with its scale byte, and the activation row
// j = lane % 16, k-block q (16 bytes read from LDS) as the B operand with that row's scale byte.
//
// The k order inside a granule: the repacked weights hold, in dword d, k = 8d + j (lo nibble of byte j)
// and 8d + 4 + j (hi nibble); the activations arrive in the standard order (byte b: k = 8d + 2b, 2b + 1).
// A contraction only needs both operands to agree, so the staging threads permute the activation nibbles
// into the weights' order on their way to LDS (to_weight_order: 6 VALU per dword, once per block per
// slab, shared by all 8 waves) and the MFMA reads both as they are.
//
// LDS per slab buffer: BM rows x 64 bytes of codes (16-byte granule g of row r at slot g ^ (r & 3)) and
// BM x 4 scale bytes (row r, k-block q at 4r + q). Loads of rows that are dead (padding) or past K read 0.
//
// Quantised output (the stage-1 epilogue of a4w4, AITER's semantics: the bf16-rounded SwiGLU output is
// quantised per 32 columns by mxfp4_quant.hpp's rule): NT = 2, so a wave owns whole groups of 32 output
// columns: lane (q, j) holds columns 4q..4q+3 of both tiles of row j; amax over the lane's 8 values, then
// across the 4 lane groups (two exchanges), scale byte, 4 v_cvt_scalef32_pk_fp4_bf16, two 2-byte stores
// and (lane group 0) one scale byte per row.
//
// Grid: (ceil(N_out / (128 * NT)), num_m_blocks). Blocks past *ntpp or with an expert id outside
// [0, num_experts) return at once; dead rows are never written. mul_routed != 0 multiplies each row by
// topk_w[slot] (fp32) after the epilogue, before rounding.
#include "gfx942/mxfp4_moe_common.hpp"
#include "gfx950/mxfp4_quant.hpp"

using namespace mm;
using namespace mm::moe;

namespace {

enum : int { kEpiNone = 0, kEpiSitu = 1, kEpiSilu = 2 };
constexpr bool gated(int epi) { return epi == kEpiSitu || epi == kEpiSilu; }
template <bool B> struct Flag { static constexpr bool value = B; };  // a compile-time bool as a lambda argument

// The layer's down sweep: weight steps in flight (register sets of NT granules + scales). 4: the first four are
// issued before the stage-1 epilogue and cover most of it; 2 at block_m 48, I 512, where 4 spill (256 VGPRs), and
// at block_m 16, I 256 (16 steps a workgroup at T 8: 4 sets' bookkeeping cost more instructions than they hid).
constexpr int layer_down_sets(int BM, int WAVES) { return (BM == 48 && WAVES == 8) || (BM == 16 && WAVES == 4) ? 2 : 4; }
constexpr int kDownMaxSlabs = 16;  // the resident-tile down kernel: K <= 2048 (48 x 1 KiB + scales <= 52 KiB)
// The layer's stage 1: weight slabs in flight (three register sets for two). Two at block_m 32, I 256 (session 7,
// with the interleaved columns: modeled bs 128 231.4k vs 232.0k cycles, bs 512 462.3k vs 464.8k; 234 VGPRs, the
// same 2 workgroups per CU). One at I 512 (242 VGPRs, over the layer's budget of 240), at 16 (two: bs 16 192.4k vs
// 193.2k, but T8 +5 % instructions per routed row, 248 VGPRs) and at 48 (spills). Before session 7 two slabs were
// slower at every block_m (docs/kernels/mxfp4_moe_gfx950.md).
constexpr int layer_depth(int BM, int WAVES) { return BM == 32 && WAVES == 4 ? 2 : 1; }

// Standard fp4x2 order (byte b: k 2b, 2b + 1) -> the repacked weights' order (byte j: k j, j + 4), one
// dword of 8 k.
MM_DEVICE uint32_t to_weight_order(uint32_t x) {
  const uint32_t ev = x & 0x0F0F0F0Fu;         // k 0, 2, 4, 6 in bytes 0..3
  const uint32_t od = (x >> 4) & 0x0F0F0F0Fu;  // k 1, 3, 5, 7
  const uint32_t lo = perm(od, ev, 0x05010400u);  // k 0, 1, 2, 3
  const uint32_t hi = perm(od, ev, 0x07030602u);  // k 4, 5, 6, 7
  return lo | (hi << 4);
}

// MXFP8 (e4m3) activations: 8 consecutive k (two dwords, one byte each) -> the weights' order of the same
// 8 hardware positions (k 0, 4, 1, 5 | 2, 6, 3, 7): the scaled MFMA pairs fp8 byte p of a lane with fp4
// nibble p of the weights, whose nibble p holds k p / 2 + 4 (p % 2) of each 8.
MM_DEVICE u32x2 fp8_to_weight_order(uint32_t k0123, uint32_t k4567) {
  return u32x2{perm(k4567, k0123, 0x05010400u), perm(k4567, k0123, 0x07030602u)};
}

// The activation operand by format: its scaled MFMA (fp4 weights as A), the bytes of one A row in one slab
// of 128 k, the slab's LDS layout (16-byte granule g of row r at slot g ^ (r % slots)), the staging
// permutation of one 16-byte granule, and the lane's B operand read. fp4: one 16-byte run (k-block q);
// fp8: two 16-byte runs, hardware k 16q..16q+15 and 64+16q.. (the ISA's fp8 operand layout, tile.hpp).
template <MxFormat AF> struct Act;
template <> struct Act<MxFormat::E2M1> {
  typedef MfmaScaled16x16x128<MxFormat::E2M1, MxFormat::E2M1> Mx;
  static constexpr int kRowBytes = 64;
  typedef XorLds<kRowBytes, 16, 4> Lds;
  MM_DEVICE static u32x4 to_lds(u32x4 c) {
    return u32x4{to_weight_order(c.x), to_weight_order(c.y), to_weight_order(c.z), to_weight_order(c.w)};
  }
  MM_DEVICE static FragB<Mx> read(const uint8_t* codes, uint32_t row, uint32_t q) {
    FragB<Mx> a;
    a.w = lds_read_b128(codes, Lds::offset(row, q * 16u));
    return a;
  }
};
template <> struct Act<MxFormat::E4M3> {
  typedef MfmaScaled16x16x128<MxFormat::E2M1, MxFormat::E4M3> Mx;
  static constexpr int kRowBytes = 128;
  typedef XorLds<kRowBytes, 16, 8> Lds;
  MM_DEVICE static u32x4 to_lds(u32x4 c) {
    const u32x2 lo = fp8_to_weight_order(c.x, c.y), hi = fp8_to_weight_order(c.z, c.w);
    return u32x4{lo.x, lo.y, hi.x, hi.y};
  }
  MM_DEVICE static FragB<Mx> read(const uint8_t* codes, uint32_t row, uint32_t q) {
    const u32x4 p0 = lds_read_b128(codes, Lds::offset(row, q * 16u));
    const u32x4 p1 = lds_read_b128(codes, Lds::offset(row, 64u + q * 16u));
    FragB<Mx> a;
    a.w = __builtin_shufflevector(p0, p1, 0, 1, 2, 3, 4, 5, 6, 7);
    return a;
  }
};
template <MxFormat AF> using MxOf = typename Act<AF>::Mx;
constexpr MxFormat kFp4 = MxFormat::E2M1, kFp8 = MxFormat::E4M3;
typedef MxOf<kFp4> Mx;  // the a4w4 product (resident down, the layer)
constexpr int kA4RowBytes = Act<kFp4>::kRowBytes;
typedef Act<kFp4>::Lds A4Lds;

// One lane's weight granule and scale byte of slab `slab`: the slab's offset is uniform, so it rides in
// soffset (SALU) and the per-lane offsets are computed once (w_off = 16 * granule index, s_off = index).
// The scale stays a byte until its MFMA: widened at the load, LLVM zero-extends the loaded byte with a
// v_and 0xffff placed right after the load, which waits for it (vmcnt) before the next slab's loads issue:
// the weight stream then drained every slab (stage 1 of the layer: 182k modeled cycles for 153k of HBM
// time at bs 16; 153k with the byte kept). The v_and now sits at the MFMA, which waits for the load anyway.
struct W4Slab {
  u32x4 nib;
  uint8_t scale;
};

// Ties values to this point of the program (an empty asm volatile reading and writing them; volatile asm
// keeps its order): the MFMAs producing them cannot be sunk past the next barrier (the IR passes do sink
// them, MFMAs having no side effects: then three weight sets are live and the register allocator copies the
// one just loaded, waiting for it right after the loads).
template <class T> MM_DEVICE void pin(T& x) { asm volatile("" : "+v"(x)); }
template <class MX, int SUBS, int TILES> MM_DEVICE void pin(FragC<MX> (&acc)[SUBS][TILES]) {
#pragma unroll
  for (int r = 0; r < SUBS; ++r)
#pragma unroll
    for (int t = 0; t < TILES; ++t) pin(acc[r][t].v);
}
// readfirstlane: the slab offset is uniform, but LLVM may carry it as a VGPR induction variable and then
// wrap each load in a waterfall loop (it did in the resident down kernel: +15 % instructions).
// col0: a uniform column offset (the down sweep's chunk), added to the slab's in soffset.
MM_DEVICE W4Slab load_weights(const ExpertWeights& ew, uint32_t w_off, uint32_t s_off, uint32_t slab,
                              uint32_t col0 = 0) {
  W4Slab ws;
  const uint32_t sn = __builtin_amdgcn_readfirstlane(slab * 4u * ew.n + col0);
  ws.nib = buffer_load_b128(ew.w, w_off, sn * 16u);
  ws.scale = buffer_load_u8(ew.s, s_off, sn);
  return ws;
}

// One slab's weights of TILES column tiles for this lane (granules and E8M0 scales). idx[]: weight_index of the
// lane's first column of each tile (ILV = false) or group of 4 tiles (ILV = true); col0: a uniform column offset.
// ILV = false: tile t has columns c + 16 t + lane % 16, one scale byte each (widened to a dword at its MFMA).
// ILV = true (the layer; interleaved columns): tile t of group g has columns c + 64 g + 4 (lane % 16) + t % 4, so a
// lane's 4 granules of a group are one 64-byte run and its 4 scale bytes one aligned dword (N % 4 == 0): one scale
// load instead of 4 and no widening VALU; the MFMA selects byte t % 4 with op_sel. A lane then holds 16 adjacent
// output columns of a group (tile t, element e: column 16 (lane / 16) + 4 e + t % 4).
template <int TILES, bool ILV> struct WSet {
  static constexpr int kIdx = TILES;
  W4Slab t[TILES];
  MM_DEVICE void load(const ExpertWeights& ew, const uint32_t (&idx)[kIdx], uint32_t slab, uint32_t col0 = 0) {
#pragma unroll
    for (int i = 0; i < TILES; ++i) t[i] = load_weights(ew, 16u * idx[i], idx[i], slab, col0);
  }
  MM_DEVICE u32x4 nib(int i) const { return t[i].nib; }
  MM_DEVICE uint32_t scales(int i) const { return t[i].scale; }
  static constexpr int byte(int) { return 0; }
};
template <int TILES> struct WSet<TILES, true> {
  static_assert(TILES % 4 == 0, "interleaved columns: groups of 4 tiles");
  static constexpr int kIdx = TILES / 4;
  u32x4 g[TILES];
  uint32_t sc[TILES / 4];
  MM_DEVICE void load(const ExpertWeights& ew, const uint32_t (&idx)[kIdx], uint32_t slab, uint32_t col0 = 0) {
    const uint32_t sn = __builtin_amdgcn_readfirstlane(slab * 4u * ew.n + col0);  // as load_weights
#pragma unroll
    for (int k = 0; k < kIdx; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i) g[4 * k + i] = buffer_load_b128(ew.w, 16u * (idx[k] + i), sn * 16u);
      sc[k] = buffer_load_b32(ew.s, idx[k], sn);
    }
  }
  MM_DEVICE u32x4 nib(int i) const { return g[i]; }
  MM_DEVICE uint32_t scales(int i) const { return sc[i / 4]; }
  static constexpr int byte(int i) { return i % 4; }
};

// The scaled MFMA with the weight scale in byte `byte` of sw (op_sel; byte is a constant after unrolling).
template <class M>
MM_DEVICE void mma_wbyte(FragC<M>& acc, u32x4 nib, uint32_t sw, int byte, const FragB<M>& a, const Scales<M>& sa) {
  FragA<M> w;
  w.w = nib;
  switch (byte) {
    case 0: mma<0, 0>(acc, w, Scales<M>{sw}, a, sa, acc); break;
    case 1: mma<1, 0>(acc, w, Scales<M>{sw}, a, sa, acc); break;
    case 2: mma<2, 0>(acc, w, Scales<M>{sw}, a, sa, acc); break;
    default: mma<3, 0>(acc, w, Scales<M>{sw}, a, sa, acc); break;
  }
}

// acc[r][t] += W(tile t) x A(subtile r) over one slab: one scaled MFMA each; the activation operand and its
// scale byte come from the slab's LDS (codes in Act<AF>::Lds layout, scales as 4 bytes per row).
template <MxFormat AF, int SUBS, int TILES, bool ILV>
MM_DEVICE void slab_mma4(FragC<MxOf<AF>> (&acc)[SUBS][TILES], const WSet<TILES, ILV>& ws, const uint8_t* codes,
                         const uint8_t* scales) {
  typedef MxOf<AF> M;
  const uint32_t j = lane_id() & 15u, q = lane_id() >> 4;
#pragma unroll
  for (int r = 0; r < SUBS; ++r) {
    const FragB<M> a = Act<AF>::read(codes, 16u * r + j, q);
    const Scales<M> sa{(uint32_t)scales[(16u * r + j) * 4u + q]};
#pragma unroll
    for (int t = 0; t < TILES; ++t) mma_wbyte(acc[r][t], ws.nib(t), ws.scales(t), WSet<TILES, ILV>::byte(t), a, sa);
  }
}

template <int EPI>
MM_DEVICE float epilogue(float g, float u, float beta, float inv_beta, float lin, float inv_lin) {
  if constexpr (EPI == kEpiSitu) return situ(g, u, beta, inv_beta, lin, inv_lin);
  else if constexpr (EPI == kEpiSilu) return swiglu(g, u);
  else return g;
}

// The main loop of the streaming kernel and of stage 1 of the fused layer: acc[r][t] over all of K for
// block rows m0 .. m0 + BM, this wave's tiles (tile t: columns wave_col + 16 (t % NT) + lane % 16, gated:
// tiles t >= NT the up columns nout + ...). lds / lds_scales: the two slab buffers. Ends behind a barrier.
// DEPTH: weight slabs in flight during one slab's MFMAs (DEPTH + 1 register sets, the loop unrolled by
// DEPTH + 1 so they rotate without copies); the activations stay one slab ahead (double-buffered LDS).
// ILV: interleaved columns (WSet; NT % 4 == 0): tile t of the gate (up) group g has columns wave_col + 64 g +
// 4 (lane % 16) + t % 4 (+ nout).
template <MxFormat AF, int BM, int NT, int EPI, int WAVES = kWaves, int DEPTH = 1, bool ILV = false>
MM_DEVICE void a4w4_mainloop(FragC<MxOf<AF>> (&acc)[BM / 16][gated(EPI) ? 2 * NT : NT],
                             uint8_t (*lds)[BM * Act<AF>::kRowBytes],
                             uint32_t (*lds_scales)[BM], const uint8_t* A, const uint8_t* As, const ExpertWeights& ew,
                             const int32_t* sorted_ids, uint32_t num_sorted, uint32_t num_valid, uint32_t m0,
                             uint32_t a_rows, uint32_t a_row_div, uint32_t K, uint32_t nout, uint32_t wave_col,
                             uint32_t a_stride) {
  constexpr int SUBS = BM / 16;
  constexpr int TILES = gated(EPI) ? 2 * NT : NT;
  constexpr int ROW_BYTES = Act<AF>::kRowBytes;  // of one slab
  constexpr int G = ROW_BYTES / 16;               // 16-byte granules per row and slab
  constexpr int GRANULES = BM * G;                // of one slab of the A tile
  constexpr uint32_t SC0 = WAVES * kWaveSize / 2;  // the first scale-staging thread
  static_assert(GRANULES <= WAVES * kWaveSize && BM <= (int)SC0, "one staging granule / scale dword per thread");
  const uint32_t tid = thread_id_x(), lane = lane_id();
  const uint32_t kblocks = K / 32u;
  const uint32_t slabs = K / kSlabK;
  const buffer_rsrc abuf = make_buffer(A, (a_rows - 1u) * a_stride + K / (kSlabK / ROW_BYTES));
  const buffer_rsrc sbuf = make_buffer(As, a_rows * kblocks);

  typedef WSet<TILES, ILV> Set;
  uint32_t widx[Set::kIdx];
#pragma unroll
  for (int t = 0; t < Set::kIdx; ++t) {
    const int tile = ILV ? 4 * t : t;  // the first tile of the entry
    const uint32_t c = wave_col + (ILV ? 16u * (tile % NT) + 4u * (lane & 15u) : 16u * (tile % NT) + (lane & 15u));
    widx[t] = weight_index(ew, (gated(EPI) && tile >= NT) ? nout + c : c);
  }

  // Staging roles: thread tid < GRANULES moves granule (row tid / G, g = tid % G) of each slab; thread
  // SC0 + r (r < BM) moves row r's 4 scale bytes (one dword: K % 128 == 0 keeps it aligned). Waves without
  // a staging lane skip the loads and writes on a scalar branch (wave_id is uniform).
  const uint32_t wave = wave_id();
  const bool wave_codes = wave * kWaveSize < (uint32_t)GRANULES, wave_scales = wave == SC0 / kWaveSize;
  const bool st_code = tid < (uint32_t)GRANULES;
  const uint32_t st_row = tid / G, st_g = tid % G;
  const RowInfo st_ri = row_info(sorted_ids, num_sorted, m0 + (st_code ? st_row : 0u), num_valid);
  const bool st_live = st_code && st_ri.live;
  const uint32_t st_off = st_live ? (st_ri.slot / a_row_div) * a_stride + st_g * 16u : kOOB;
  const uint32_t sc_row = tid - SC0;
  const bool st_scale = tid >= SC0 && sc_row < (uint32_t)BM;
  const RowInfo sc_ri = row_info(sorted_ids, num_sorted, m0 + (st_scale ? sc_row : 0u), num_valid);
  const bool sc_live = st_scale && sc_ri.live;
  const uint32_t sc_off = sc_live ? (sc_ri.slot / a_row_div) * kblocks : kOOB;

  struct Staged {
    u32x4 codes;
    uint32_t scales;
  };
  auto load_act = [&](uint32_t s) {
    Staged a;
    if (wave_codes) a.codes = buffer_load_b128(abuf, st_live ? st_off + s * ROW_BYTES : kOOB);
    if (wave_scales) a.scales = buffer_load_b32(sbuf, sc_live ? sc_off + s * 4u : kOOB);
    return a;
  };
  auto stage = [&](uint32_t buf, const Staged& a) {
    if (wave_codes && st_code) lds_write_b128(lds[buf], Act<AF>::Lds::offset(st_row, st_g * 16u), Act<AF>::to_lds(a.codes));
    if (wave_scales && st_scale) lds_scales[buf][sc_row] = a.scales;
  };

#pragma unroll
  for (int r = 0; r < SUBS; ++r)
#pragma unroll
    for (int t = 0; t < TILES; ++t) acc[r][t] = zeros<MxOf<AF>>();

  static_assert(DEPTH == 1 || DEPTH == 2, "one or two weight slabs in flight");
  constexpr int SETS = DEPTH + 1;
  Set w[SETS];
  {
    const Staged a0 = load_act(0);
#pragma unroll
    for (int d = 0; d < DEPTH; ++d)
      if (d == 0 || (uint32_t)d < slabs) w[d].load(ew, widx, (uint32_t)d);  // uniform
    stage(0, a0);
  }
  block_sync();

  // One slab: next slab's activation loads first, then the weights DEPTH slabs ahead, this slab's MFMAs,
  // stage the next activations, barrier (as the a16w4 kernel).
  const uint32_t last = slabs - 1u;  // activation prefetches past the last slab reload it (uniform clamp)
  auto slab_step = [&](uint32_t s, const Set& cur, Set& ahead) {
    const Staged a = load_act(s + 1u < slabs ? s + 1u : last);
    sched_barrier();
    // Unconditional: a slab past the last lies past the expert's buffers (reads 0, fetches nothing). A branch
    // here made LLVM's waitcnt merge drain every load (vmcnt(0)) before staging, weights in flight included.
    ahead.load(ew, widx, s + DEPTH);
    sched_barrier();  // every load issued before the first MFMA waits for this slab's weights
    slab_mma4<AF>(acc, cur, lds[s & 1], (const uint8_t*)lds_scales[s & 1]);
    pin(acc);  // this slab's MFMAs before the barrier
    if (s + 1 < slabs) stage((s + 1) & 1, a);
    block_sync();
  };
  // Whole rotations of the SETS register sets, then the remaining slabs (uniform branches outside the loop).
  uint32_t s = 0;
  for (; s + SETS <= slabs; s += SETS) {
#pragma unroll
    for (int d = 0; d < SETS; ++d) slab_step(s + d, w[d], w[(d + DEPTH) % SETS]);
  }
#pragma unroll
  for (int d = 0; d + 1 < SETS; ++d)
    if (s + d < slabs) slab_step(s + d, w[d], w[(d + DEPTH) % SETS]);
}

// pack_bf16x2<Round::RTNE> (on gfx950 the same conversion after a NaN select, 2 VALU per value more) where a NaN
// may occur (wave_has_nan), else pack_bf16x2_finite (numerics.hpp).
template <bool MAY_NAN> MM_DEVICE uint32_t pack_bf16x2_rtne(float lo, float hi) {
  return MAY_NAN ? pack_bf16x2<Round::RTNE>(lo, hi) : pack_bf16x2_finite(lo, hi);
}
// Whether any lane of the wave holds a NaN among v (uniform; call under full EXEC): one sum per lane (v_pk_add_f32;
// a NaN propagates through it, an Inf - Inf only sends a NaN-free chunk down the canonical path) and a ballot.
// Epilogues convert with pack_bf16x2_finite unless it is set: the canonical NaN costs 2 VALU per value otherwise.
template <int N> MM_DEVICE bool wave_has_nan(const f32x4 (&v)[N]) {
  f32x2 s = f32x2{v[0].x, v[0].y} + f32x2{v[0].z, v[0].w};
#pragma unroll
  for (int i = 1; i < N; ++i) s += f32x2{v[i].x, v[i].y} + f32x2{v[i].z, v[i].w};
  const float t = s.x + s.y;
  return ballot(t != t) != 0;
}

// The MXFP4 form of one 32-column group of a gated epilogue (AITER's semantics: the bf16-rounded output
// quantised by mxfp4_quant.hpp's rule): group p of the wave is tiles 2p, 2p + 1; lane (q, j) holds columns
// 4q..4q+3 of both tiles of block row 16r + j: amax over its 8 values, then across the 4 lane groups (two
// exchanges: every lane must call this), the scale byte, 4 v_cvt_scalef32_pk_fp4_bf16.
struct Fp4Quad {
  uint32_t codes[2];  // per tile: 4 codes in 16 bits, standard order
  uint32_t scale;     // E8M0 byte of the group
};
template <int EPI, class MX, int SUBS, int TILES>
MM_DEVICE Fp4Quad quantise_group(const FragC<MX> (&acc)[SUBS][TILES], int r, int p, float w, float beta,
                                 float inv_beta, float lin, float inv_lin) {
  constexpr int NT = TILES / 2;
  uint32_t h[2][2];  // bf16 pairs: tile, pair
  float amax = kAmaxFloor;
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const f32x4 g = acc[r][2 * p + t].v, up = acc[r][NT + 2 * p + t].v;
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = epilogue<EPI>(g[i], up[i], beta, inv_beta, lin, inv_lin) * w;
    h[t][0] = pack_bf16x2<Round::RTNE>(v[0], v[1]);
    h[t][1] = pack_bf16x2<Round::RTNE>(v[2], v[3]);
    amax = amax_bf16x2(amax_bf16x2(amax, h[t][0]), h[t][1]);
  }
  amax = __builtin_fmaxf(amax, __builtin_bit_cast(float, swizzle_xor<16>(__builtin_bit_cast(uint32_t, amax))));
  amax = __builtin_fmaxf(amax, xor_lane(amax, 32u));
  Fp4Quad f;
  f.scale = quant_scale_byte(amax);
  const float sc = scale_operand(f.scale);
#pragma unroll
  for (int t = 0; t < 2; ++t) f.codes[t] = cvt_fp4x2<1>(cvt_fp4x2<0>(0u, h[t][0], sc), h[t][1], sc);
  return f;
}

// The layer's stage-1 epilogue (interleaved tiles, NT = 4: WSet<8, true>): lane (q, j) holds columns 16 q .. 16 q + 15
// of the wave's 64 (column 4 e + t: gate tile t, up tile 4 + t, element e) of block row 16 r + j, half of the 32-column
// group q / 2. The same values and rounding as quantise_group: the amax of the bf16-rounded values is the rounded
// amax of the fp32 ones (RTNE is monotone), one exchange (lane ^ 16) completes the group, 8 conversions give the
// lane's 16 codes as 8 bytes in the standard order. The canonical-NaN rounding only if some lane holds a NaN.
struct Fp4Oct {
  u32x2 codes;
  uint32_t scale;  // E8M0 byte of the group
};
template <int EPI, class MX, int SUBS>
MM_DEVICE Fp4Oct quantise_half_group(const FragC<MX> (&acc)[SUBS][8], int r, float beta, float inv_beta, float lin,
                                     float inv_lin) {
  f32x4 v[4];  // v[e]: columns 4 e .. 4 e + 3
  float amax = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; ++e)
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      v[e][t] = epilogue<EPI>(acc[r][t].v[e], acc[r][4 + t].v[e], beta, inv_beta, lin, inv_lin);
      amax = __builtin_fmaxf(amax, __builtin_fabsf(v[e][t]));  // NaN-ignoring, as amax_bf16x2
    }
  const bool nan = wave_has_nan(v);
  amax = __builtin_fmaxf(kAmaxFloor, bf16_lo(pack_bf16x2_finite(amax, 0.0f)));  // amax is not NaN
  amax = detail::combine_xor16(amax, MaxOp());
  Fp4Oct f;
  f.scale = quant_scale_byte(amax);
  const float sc = scale_operand(f.scale);
  uint32_t h[8];  // bf16 pair m: columns 2 m, 2 m + 1
  if (nan) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      h[2 * e] = pack_bf16x2<Round::RTNE>(v[e].x, v[e].y), h[2 * e + 1] = pack_bf16x2<Round::RTNE>(v[e].z, v[e].w);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      h[2 * e] = pack_bf16x2_finite(v[e].x, v[e].y), h[2 * e + 1] = pack_bf16x2_finite(v[e].z, v[e].w);
  }
  f.codes = u32x2{cvt_fp4x8(h, sc), cvt_fp4x8(h + 4, sc)};
  return f;
}

template <MxFormat AF, int BM, int NT, int EPI, bool QOUT>
MM_DEVICE void a4w4(const uint8_t* A, const uint8_t* As, const uint8_t* W, const uint8_t* S, void* C, uint8_t* Cs,
                    const float* topk_w, const int32_t* sorted_ids, const int32_t* expert_ids, const int32_t* ntpp,
                    uint32_t num_sorted, uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t K,
                    uint32_t N, uint32_t num_experts, uint32_t mul_routed, float beta, float lin, uint32_t a_stride) {
  static_assert(BM % 16 == 0 && BM <= 64, "block_m is 16, 32 or 48");
  static_assert(!QOUT || (gated(EPI) && NT == 2), "quantised output: a gated epilogue over whole 32-column groups");
  constexpr int SUBS = BM / 16;
  constexpr int TILES = gated(EPI) ? 2 * NT : NT;
  MM_LDS __attribute__((aligned(16))) uint8_t lds[2][BM * Act<AF>::kRowBytes];
  MM_LDS __attribute__((aligned(16))) uint32_t lds_scales[2][BM];

  const uint32_t m_block = block_id_y();
  const uint32_t m0 = m_block * BM;
  if (m0 >= (uint32_t)*ntpp) return;
  const int32_t expert = expert_ids[m_block];
  if (expert < 0 || (uint32_t)expert >= num_experts) return;

  const uint32_t lane = lane_id(), wave = wave_id();
  const uint32_t nout = gated(EPI) ? N / 2u : N;
  const uint32_t wave_col = block_id_x() * (kWaves * 16 * NT) + wave * (16 * NT);
  const ExpertWeights ew = expert_weights(W, S, (uint32_t)expert, N, K / 32u);
  FragC<MxOf<AF>> acc[SUBS][TILES];
  a4w4_mainloop<AF, BM, NT, EPI>(acc, lds, lds_scales, A, As, ew, sorted_ids, num_sorted, num_valid, m0, a_rows,
                                 a_row_div, K, nout, wave_col, a_stride);

  const uint32_t j = lane & 15u, q = lane >> 4;
  const float inv_beta = 1.0f / beta, inv_lin = 1.0f / lin;
  if constexpr (!QOUT) {
    // Lane (q, j) holds output columns 4q..4q+3 of block row 16r + j.
    const buffer_rsrc cbuf = make_buffer(C, num_valid * nout * 2u);
    const uint32_t c_mis = misalignment8(C);
#pragma unroll
    for (int r = 0; r < SUBS; ++r) {
      const RowInfo ri = row_info(sorted_ids, num_sorted, m0 + 16u * r + j, num_valid);
      if (!ri.live) continue;
      const float w = mul_routed ? topk_w[ri.slot] : 1.0f;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const uint32_t col0 = wave_col + 16u * t + 4u * q;
        if (col0 >= nout) continue;
        f32x4 v = acc[r][t].v;
        if constexpr (gated(EPI)) {
          const f32x4 up = acc[r][NT + t].v;
#pragma unroll
          for (int i = 0; i < 4; ++i) v[i] = epilogue<EPI>(v[i], up[i], beta, inv_beta, lin, inv_lin);
        }
        store_out4(cbuf, c_mis, ri.slot, nout, col0, nout, v * w);
      }
    }
  } else {
    // Quantised output: codes [rows, nout/2], scales [rows, nout/32]; nout % 32 == 0, so a 32-column group
    // (this wave's two tiles) is either wholly inside or wholly past nout.
    const buffer_rsrc cbuf = make_buffer(C, num_valid * (nout / 2u));
    const buffer_rsrc csbuf = make_buffer(Cs, num_valid * (nout / 32u));
    const bool in_range = wave_col < nout;
#pragma unroll
    for (int r = 0; r < SUBS; ++r) {
      const RowInfo ri = row_info(sorted_ids, num_sorted, m0 + 16u * r + j, num_valid);
      const float w = (mul_routed && ri.live) ? topk_w[ri.slot] : 1.0f;
      const Fp4Quad f = quantise_group<EPI>(acc, r, 0, w, beta, inv_beta, lin, inv_lin);
      if (!ri.live || !in_range) continue;
      const uint32_t off = ri.slot * (nout / 2u) + wave_col / 2u + 2u * q;
#pragma unroll
      for (int t = 0; t < 2; ++t) buffer_store_u16((uint16_t)f.codes[t], cbuf, off + 8u * t);
      if (q == 0) buffer_store_u8((uint8_t)f.scale, csbuf, ri.slot * (nout / 32u) + wave_col / 32u);
    }
  }
}

// The down projection's weights of step (chunk, slab) for this lane's NT tiles (chunk c: columns c * 16 NT WAVES +
// wave * 16 NT + 16 t + lane % 16); the chunk's columns ride in soffset (uniform), the lane offsets are chunk 0's.
// A chunk at or past chunk_end reads slab `slabs` (past the buffers: 0, no fetch).
template <int NT, int WAVES, bool ILV>
MM_DEVICE void down_weights(WSet<NT, ILV>& dst, const ExpertWeights& ew, uint32_t slabs, uint32_t chunk, uint32_t slab,
                            uint32_t chunk_end) {
  const bool past = chunk >= chunk_end;  // uniform
  uint32_t widx[WSet<NT, ILV>::kIdx];
#pragma unroll
  for (int t = 0; t < WSet<NT, ILV>::kIdx; ++t)
    widx[t] = weight_index(ew, wave_id() * (16u * NT) + (ILV ? 64u * t + 4u * (lane_id() & 15u) : 16u * t + (lane_id() & 15u)));
  dst.load(ew, widx, past ? slabs : slab, past ? 0u : chunk * (16u * NT * WAVES));
}

// The down projection of one block against its A tile resident in LDS (slab s: codes at codes + s * BM * 64
// in A4Lds layout, scale bytes at scales + s * BM), column chunks [chunk0, chunk_end) of 16 * NT * WAVES swept
// without barriers, weights SETS (chunk, slab) steps ahead. Each output's chain is slabs ascending, one MFMA each (the
// streaming kernel's with EPI_NONE). rows / rw: the lane's rows 16r + j and their routed weights.
// ALIGNED (the host checked N % 4 == 0 and C 8-byte aligned): one 8-byte store per 4 columns, bf16 by
// pack_bf16x2<Round::RTNE>; else store_out4. SETS: weight register sets (steps in flight); first: the first SETS steps'
// weights (down_weights of steps 0 .. SETS - 1) already issued by the caller, or null. SLABS: slabs known at
// compile time (then == slabs, and SETS % SLABS == 0: a step's slab and its epilogue are fixed by its place in the
// rotation), or 0. ILV: interleaved columns (WSet; ALIGNED only).
template <int BM, int NT, bool ALIGNED, int WAVES = kWaves, int SETS = 2, int SLABS = 0, bool ILV = false>
MM_DEVICE void down_sweep(const uint8_t* codes, const uint32_t* scales, const ExpertWeights& ew,
                          const RowInfo (&rows)[BM / 16], const float (&rw)[BM / 16], buffer_rsrc cbuf,
                          uint32_t c_mis, uint32_t N, uint32_t slabs, uint32_t chunk0, uint32_t chunk_end,
                          const WSet<NT, ILV>* first = nullptr) {
  static_assert(!ILV || ALIGNED, "interleaved columns: 4 adjacent columns per store");
  constexpr int SUBS = BM / 16;
  constexpr int BN = WAVES * 16 * NT;
  constexpr bool FIXED = SLABS > 0;
  static_assert(!FIXED || SETS % SLABS == 0, "a rotation of SETS steps covers whole chunks");
  const uint32_t j = lane_id() & 15u, q = lane_id() >> 4, wave = wave_id();
  if constexpr (FIXED) slabs = SLABS;
  auto slab_codes = [&](uint32_t s) { return codes + s * (BM * kA4RowBytes); };
  auto slab_scales = [&](uint32_t s) { return (const uint8_t*)(scales + s * BM); };
  if (chunk0 >= chunk_end) return;
  // The (chunk, slab) steps k = 0 .. steps - 1 in one sequence (step k: chunk chunk0 + k / slabs, slab k % slabs),
  // across chunk boundaries too (a chunk's first slab does not wait a whole memory latency). SETS register sets,
  // set k % SETS reloaded with step k + SETS right after step k's MFMAs: at every wait SETS steps are in flight,
  // and the caller can issue the first SETS before its own work (the layer issues 4 before its stage-1 epilogue,
  // ~6k modeled cycles at bs 128 that the HBM would otherwise idle through). At fixed SLABS the last SETS steps
  // reload nothing.
  typedef WSet<NT, ILV> Set;
  auto load = [&](Set& dst, uint32_t chunk, uint32_t slab) {
    down_weights<NT, WAVES>(dst, ew, slabs, chunk, slab, chunk_end);
  };
  FragC<Mx> acc[SUBS][NT];
  uint32_t chunk = chunk0, slab_rt = 0;
  uint32_t next_chunk = chunk0 + (uint32_t)SETS / slabs, next_slab = (uint32_t)SETS % slabs;  // step k + SETS
  // Step d of a rotation (d % SETS: its register set); reload: issue step k + SETS into that set.
  // always_inline: left to clang, the runtime-slab kernels kept the slab counter in scratch (3 dwords).
  auto step = [&](Set& cur, int d, bool reload) __attribute__((always_inline)) {
    uint32_t slab;
    if constexpr (FIXED) slab = (uint32_t)(d % SLABS);
    else slab = slab_rt;
    if (slab == 0) {
#pragma unroll
      for (int r = 0; r < SUBS; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = zeros<Mx>();
    }
    slab_mma4<kFp4>(acc, cur, slab_codes(slab), slab_scales(slab));
    pin(acc);  // the MFMAs stay here, not sunk under the epilogue's partial EXEC (compiler pitfall, docs)
    if (reload) {
      sched_barrier();  // the reload after the MFMAs that read cur (hoisted, it would need a copy: a wait)
      if constexpr (FIXED) {
        load(cur, chunk + (uint32_t)(SETS / (FIXED ? SLABS : 1)), slab);  // SETS steps on: same slab
      } else {
        load(cur, next_chunk, next_slab);
        if (++next_slab == slabs) next_slab = 0, ++next_chunk;
      }
      sched_barrier();
    }
    if (slab + 1u == slabs) {  // the chunk's epilogue
      const uint32_t wave_col = chunk * BN + wave * (16 * NT);
      f32x4 v[SUBS * NT];
#pragma unroll
      for (int r = 0; r < SUBS; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) v[r * NT + t] = acc[r][t].v * rw[r];
      // A uniform branch: NaN-free chunks (all but a corrupt input's) skip the canonical-NaN conversion.
      const bool nan = ALIGNED && wave_has_nan(v);
      auto store_chunk = [&](auto canonical) __attribute__((always_inline)) {
#pragma unroll
        for (int r = 0; r < SUBS; ++r) {
          if (!rows[r].live) continue;
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            const uint32_t col0 = wave_col + (ILV ? 64u * (t / 4) + 16u * q + 4u * (t % 4) : 16u * t + 4u * q);
            if (col0 >= N) continue;
            // 4 adjacent output columns (ILV: element t % 4 of the group's 4 tiles)
            const f32x4* g = v + r * NT + (ILV ? 4 * (t / 4) : t);
            const f32x4 x = ILV ? f32x4{g[0][t % 4], g[1][t % 4], g[2][t % 4], g[3][t % 4]} : g[0];
            constexpr bool MAY_NAN = decltype(canonical)::value;
            if constexpr (!ALIGNED)
              store_out4(cbuf, c_mis, rows[r].slot, N, col0, N, x);
            else
              buffer_store_b64(u32x2{pack_bf16x2_rtne<MAY_NAN>(x.x, x.y), pack_bf16x2_rtne<MAY_NAN>(x.z, x.w)}, cbuf,
                               (rows[r].slot * N + col0) * 2u);
          }
        }
      };
      // ILV, NaN-free and the whole chunk inside N (uniform; every chunk but the last of a ragged N): a lane's 16
      // adjacent columns of a group as two 16-byte stores, no per-store column test.
      auto store_full_chunk = [&]() __attribute__((always_inline)) {
#pragma unroll
        for (int r = 0; r < SUBS; ++r) {
          if (!rows[r].live) continue;
#pragma unroll
          for (int g = 0; g < NT / 4; ++g) {
            const f32x4* x = v + r * NT + 4 * g;  // x[t][e]: column 16 q + 4 e + t of the group
            uint32_t h[8];  // bf16 pair m: columns 2 m, 2 m + 1
#pragma unroll
            for (int e = 0; e < 4; ++e)
              h[2 * e] = pack_bf16x2_finite(x[0][e], x[1][e]), h[2 * e + 1] = pack_bf16x2_finite(x[2][e], x[3][e]);
            const uint32_t off = (rows[r].slot * N + wave_col + 64u * g + 16u * q) * 2u;
            buffer_store_b128(u32x4{h[0], h[1], h[2], h[3]}, cbuf, off);
            buffer_store_b128(u32x4{h[4], h[5], h[6], h[7]}, cbuf, off + 16u);
          }
        }
      };
      if (nan) store_chunk(Flag<true>{});
      else if (ILV && (chunk + 1u) * BN <= N) store_full_chunk();
      else store_chunk(Flag<false>{});
      slab_rt = 0, ++chunk;
    } else {
      ++slab_rt;
    }
  };
  Set w[SETS];
  if (first) {
#pragma unroll
    for (int d = 0; d < SETS; ++d) w[d] = first[d];
  } else {
#pragma unroll
    for (int d = 0; d < SETS; ++d) load(w[d], chunk0 + (uint32_t)d / slabs, (uint32_t)d % slabs);
  }
  const uint32_t steps = (chunk_end - chunk0) * slabs;
  // Whole rotations while every step's step k + SETS exists, then the last SETS .. 2 SETS - 1 steps (fewer if
  // steps < SETS), whose reloads stop SETS steps before the end (uniform branches; pin(acc) keeps a tail step's
  // MFMAs out of its epilogue's partial EXEC, where clang would sink them: the compiler pitfall of the docs).
  // At runtime slabs (the resident down kernel, the layer at block_m 48, I 512) every step reloads (past the last
  // they fetch nothing): there the drain's slab is not known at compile time.
  uint32_t i = 0;
  if constexpr (FIXED) {
    for (; i + 2u * SETS <= steps; i += SETS) {
#pragma unroll
      for (int d = 0; d < SETS; ++d) step(w[d], d, true);
    }
#pragma unroll
    for (int d = 0; d + 1 < 2 * SETS; ++d)
      if (i + d < steps) step(w[d % SETS], d, d < SETS && i + d + SETS < steps);
  } else {
    for (; i + SETS <= steps; i += SETS) {
#pragma unroll
      for (int d = 0; d < SETS; ++d) step(w[d], d, true);
    }
#pragma unroll
    for (int d = 0; d + 1 < SETS; ++d)
      if (i + d < steps) step(w[d], d, true);
  }
}

// The lane's block rows 16r + j and their routed weights (1 unless mul_routed), for the down epilogue.
template <int SUBS>
MM_DEVICE void down_rows(RowInfo (&rows)[SUBS], float (&rw)[SUBS], const int32_t* sorted_ids, uint32_t num_sorted,
                         uint32_t m0, uint32_t num_valid, const float* topk_w, uint32_t mul_routed) {
#pragma unroll
  for (int r = 0; r < SUBS; ++r) {
    rows[r] = row_info(sorted_ids, num_sorted, m0 + 16u * r + (lane_id() & 15u), num_valid);
    rw[r] = (mul_routed && rows[r].live) ? topk_w[rows[r].slot] : 1.0f;
  }
}

// Down projection (EPI_NONE, bf16 output) at K <= 128 * KMAX_SLABS: the whole BM x K activation tile and
// its scales are staged in LDS once, behind the kernel's only barrier; then the waves sweep n_steps column
// chunks of 128 * NT against it (down_sweep), as the a16w4 down kernel does. Bit-equal to
// mxfp4_moe_a4w4_*_none on the same inputs, at every n_steps.
template <int BM, int NT, int KMAX_SLABS>
MM_DEVICE void a4w4_down(const uint8_t* A, const uint8_t* As, const uint8_t* W, const uint8_t* S, uint16_t* C,
                         const float* topk_w, const int32_t* sorted_ids, const int32_t* expert_ids,
                         const int32_t* ntpp, uint32_t num_sorted, uint32_t num_valid, uint32_t a_rows,
                         uint32_t a_row_div, uint32_t K, uint32_t N, uint32_t num_experts, uint32_t mul_routed,
                         uint32_t n_steps, uint32_t a_stride) {
  constexpr int SUBS = BM / 16;
  constexpr int BN = kWaves * 16 * NT;
  constexpr int STAGE = (BM * 4 * KMAX_SLABS + kThreads - 1) / kThreads;  // code granules per thread
  constexpr int STAGE_S = (BM * KMAX_SLABS + kThreads - 1) / kThreads;    // scale dwords per thread
  MM_LDS __attribute__((aligned(16))) uint8_t lds[KMAX_SLABS][BM * kA4RowBytes];
  MM_LDS __attribute__((aligned(16))) uint32_t lds_scales[KMAX_SLABS][BM];

  const uint32_t m_block = block_id_y();
  const uint32_t m0 = m_block * BM;
  if (m0 >= (uint32_t)*ntpp) return;
  const int32_t expert = expert_ids[m_block];
  if (expert < 0 || (uint32_t)expert >= num_experts) return;

  const uint32_t tid = thread_id_x();
  const uint32_t kblocks = K / 32u, slabs = K / kSlabK;
  const ExpertWeights ew = expert_weights(W, S, (uint32_t)expert, N, kblocks);
  const buffer_rsrc abuf = make_buffer(A, (a_rows - 1u) * a_stride + K / 2u);
  const buffer_rsrc sbuf = make_buffer(As, a_rows * kblocks);

  // Stage the tile: every load in flight, then the permuted LDS writes, then the barrier. Unit u of the
  // codes is (slab u / (4 BM), row (u / 4) % BM, granule u % 4); unit u of the scales (slab u / BM, row u % BM).
  u32x4 codes[STAGE];
  uint32_t scl[STAGE_S];
#pragma unroll
  for (int p = 0; p < STAGE; ++p) {
    const uint32_t u = tid + p * kThreads, slab = u / (4u * BM), row = (u / 4u) % BM;
    const RowInfo ri = row_info(sorted_ids, num_sorted, m0 + row, num_valid);
    const bool live = slab < slabs && ri.live;
    codes[p] = buffer_load_b128(abuf, live ? (ri.slot / a_row_div) * a_stride + slab * 64u + (u % 4u) * 16u : kOOB);
  }
#pragma unroll
  for (int p = 0; p < STAGE_S; ++p) {
    const uint32_t u = tid + p * kThreads, slab = u / BM;
    const RowInfo ri = row_info(sorted_ids, num_sorted, m0 + u % BM, num_valid);
    const bool live = slab < slabs && ri.live;
    scl[p] = buffer_load_b32(sbuf, live ? (ri.slot / a_row_div) * kblocks + slab * 4u : kOOB);
  }
#pragma unroll
  for (int p = 0; p < STAGE; ++p) {
    const uint32_t u = tid + p * kThreads, slab = u / (4u * BM), row = (u / 4u) % BM;
    if (slab < slabs) {
      lds_write_b128(lds[slab], A4Lds::offset(row, (u % 4u) * 16u), Act<kFp4>::to_lds(codes[p]));
    }
  }
#pragma unroll
  for (int p = 0; p < STAGE_S; ++p) {
    const uint32_t u = tid + p * kThreads;
    if (u / BM < slabs) lds_scales[u / BM][u % BM] = scl[p];
  }

  RowInfo rows[SUBS];
  float rw[SUBS];
  down_rows<SUBS>(rows, rw, sorted_ids, num_sorted, m0, num_valid, topk_w, mul_routed);
  const buffer_rsrc cbuf = make_buffer(C, num_valid * N * 2u);
  const uint32_t c_mis = misalignment8(C);
  block_sync();

  const uint32_t chunks = (N + BN - 1u) / BN, chunk0 = block_id_x() * n_steps;
  down_sweep<BM, NT, false>(lds[0], lds_scales[0], ew, rows, rw, cbuf, c_mis, N, slabs, chunk0,
                     chunk0 + n_steps < chunks ? chunk0 + n_steps : chunks);
}

// The whole a4w4 MoE layer of one block in one launch (AITER's 1-stage structure): stage 1 over the whole
// intermediate I = 16 NT WAVES (WAVES waves x NT gate + NT up tiles: a4w4_mainloop; NT = 4, so I = 256 runs 4
// waves and 512 runs 8: the fewer the waves, the less per-slab loop work is repeated; layer_depth(BM, WAVES) weight slabs
// in flight), the gated epilogue quantised to
// MXFP4 into LDS (quantise_half_group, standard order), one pass of the staging permutation into the down
// operand's layout (to_weight_order: BM x I/32 granules), then the down projection over all N columns
// against that resident tile (down_sweep, NTD tiles per wave). The intermediate never leaves the CU, and
// every result is the three-launch path's bit for bit (the same chains and the same rounding points).
// Both GEMMs run their tiles with interleaved columns (WSet<.., true>: a lane's 4 tiles of a group are 4 adjacent
// columns, their scales one dword selected by op_sel), so a lane's outputs are 16 adjacent columns.
//
// LDS: stage-1 slab buffers 2 x BM x (64 + 4) bytes; the intermediate BM x I/2 code bytes in the standard
// order and BM x I/32 scale dwords, then I/128 slabs of BM x 64 in A4Lds layout + BM x 4 scale bytes each.
// Grid (splits, num_m_blocks): the down columns split over `splits` workgroups of one block, each computing
// stage 1 in full (mxfp4_moe_layer_a4w4_down_splits: only when the blocks leave CUs idle).
template <int BM, int NT, int EPI, int NTD, int WAVES>
MM_DEVICE void a4w4_layer(const uint8_t* A, const uint8_t* As, const uint8_t* W1, const uint8_t* S1,
                          const uint8_t* W2, const uint8_t* S2, uint16_t* C, const float* topk_w,
                          const int32_t* sorted_ids, const int32_t* expert_ids, const int32_t* ntpp,
                          uint32_t num_sorted, uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t K,
                          uint32_t N, uint32_t num_experts, uint32_t mul_routed, float beta, float lin,
                          uint32_t a_stride) {
  static_assert(gated(EPI) && NT % 2 == 0, "the layer: a gated epilogue over whole 32-column groups");
  constexpr int SUBS = BM / 16;
  constexpr int TILES = 2 * NT;
  constexpr int I = WAVES * 16 * NT;
  constexpr int THREADS = WAVES * kWaveSize;
  constexpr int H_SLABS = I / kSlabK;
  constexpr int H_UNITS = BM * I / 32;  // 16-byte granules of the intermediate tile
  constexpr int BND = WAVES * 16 * NTD;
  MM_LDS __attribute__((aligned(16))) uint8_t lds[2][BM * kA4RowBytes];
  MM_LDS __attribute__((aligned(16))) uint32_t lds_scales[2][BM];
  MM_LDS __attribute__((aligned(16))) uint8_t h_std[BM][I / 2];
  MM_LDS __attribute__((aligned(16))) uint32_t h_sstd[BM][I / 32];  // one scale per dword: no two waves share one
  MM_LDS __attribute__((aligned(16))) uint8_t h_codes[H_SLABS][BM * kA4RowBytes];
  MM_LDS __attribute__((aligned(16))) uint32_t h_scales[H_SLABS][BM];

  const uint32_t m_block = block_id_y();
  const uint32_t m0 = m_block * BM;
  if (m0 >= (uint32_t)*ntpp) return;
  const int32_t expert = expert_ids[m_block];
  if (expert < 0 || (uint32_t)expert >= num_experts) return;

  const uint32_t tid = thread_id_x(), lane = lane_id(), wave = wave_id(), j = lane & 15u, q = lane >> 4;
  const uint32_t wave_col = wave * (16u * NT);
  const ExpertWeights ew1 = expert_weights(W1, S1, (uint32_t)expert, 2u * I, K / 32u);
  // The down epilogue's rows, read now: their loads must not wait behind the down weights issued after stage 1
  // (vmcnt is in order).
  RowInfo rows[SUBS];
  float rw[SUBS];
  down_rows<SUBS>(rows, rw, sorted_ids, num_sorted, m0, num_valid, topk_w, mul_routed);
  FragC<Mx> acc[SUBS][TILES];
  a4w4_mainloop<kFp4, BM, NT, EPI, WAVES, layer_depth(BM, WAVES), true>(acc, lds, lds_scales, A, As, ew1, sorted_ids, num_sorted, num_valid, m0, a_rows,
                             a_row_div, K, I, wave_col, a_stride);
  // The down projection's first DSETS steps' weights issued now: they arrive during the epilogue and
  // the permutation instead of after them.
  const ExpertWeights ew2 = expert_weights(W2, S2, (uint32_t)expert, N, I / 32u);
  const uint32_t chunks = (N + BND - 1u) / BND, splits = grid_dim_x();
  const uint32_t per = (chunks + splits - 1u) / splits, c0 = block_id_x() * per;
  const uint32_t c_end = c0 + per < chunks ? c0 + per : chunks;
  constexpr int DSETS = layer_down_sets(BM, WAVES);
  WSet<NTD, true> down0[DSETS];
#pragma unroll
  for (int d = 0; d < DSETS; ++d)
    down_weights<NTD, WAVES>(down0[d], ew2, H_SLABS, c0 + (uint32_t)d / H_SLABS, (uint32_t)d % H_SLABS, c_end);

  // Stage-1 epilogue into LDS (dead rows too: their zero accumulators give zero codes, never stored). Lane (q, j)
  // holds columns wave_col + 16 q .. + 15 (interleaved tiles), half of group wave_col / 32 + q / 2.
  const float inv_beta = 1.0f / beta, inv_lin = 1.0f / lin;
#pragma unroll
  for (int r = 0; r < SUBS; ++r) {
    const uint32_t row = 16u * r + j, col = wave_col + 16u * q;
    const Fp4Oct f = quantise_half_group<EPI>(acc, r, beta, inv_beta, lin, inv_lin);
    lds_write_b64(h_std[row], col / 2u, f.codes);
    if ((q & 1u) == 0) h_sstd[row][col / 32u] = f.scale;
  }
  block_sync();
#pragma unroll
  for (int p = 0; p < (H_UNITS + THREADS - 1) / THREADS; ++p) {
    const uint32_t u = tid + p * THREADS, row = u / (I / 32), kb = u % (I / 32);
    if (H_UNITS % THREADS == 0 || u < (uint32_t)H_UNITS) {
      const u32x4 v = lds_read_b128(h_std[row], kb * 16u);
      lds_write_b128(h_codes[kb / 4u], A4Lds::offset(row, (kb % 4u) * 16u), Act<kFp4>::to_lds(v));
      if (kb % 4u == 0) {  // the slab's 4 scale bytes of the row, packed into the operand's dword
        const u32x4 sc = lds_read_b128(h_sstd[row], kb * 4u);
        h_scales[kb / 4u][row] = sc.x | (sc.y << 8) | (sc.z << 16) | (sc.w << 24);
      }
    }
  }
  const buffer_rsrc cbuf = make_buffer(C, num_valid * N * 2u);
  const uint32_t c_mis = misalignment8(C);
  block_sync();
  // Down-column split: workgroup x of grid_dim_x() sweeps its share [c0, c_end) of the column chunks (each
  // computes the whole stage 1; at small batches the CUs are idle otherwise, and each one's share of HBM bounds it).
  down_sweep<BM, NTD, true, WAVES, DSETS, DSETS % H_SLABS == 0 ? H_SLABS : 0, true>(h_codes[0], h_scales[0], ew2, rows, rw, cbuf, c_mis, N, H_SLABS, c0, c_end, down0);
}

}  // namespace

#define MXFP4_A4W4_DOWN_ARGS                                                                               \
  const uint8_t *A, const uint8_t *As, const uint8_t *W, const uint8_t *S, uint16_t *C, const float *topk_w, \
      const int32_t *sorted_ids, const int32_t *expert_ids, const int32_t *ntpp, uint32_t num_sorted,        \
      uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t K, uint32_t N, uint32_t num_experts, \
      uint32_t mul_routed, uint32_t n_steps, uint32_t a_stride
// Kernel name: mxfp4_moe_a4w4_down_bm<BM>_nt<NT> (K <= 2048: the tile of 16 slabs).
#define MXFP4_A4W4_DOWN(BM, NT)                                                                             \
  MM_KERNEL MM_LAUNCH_BOUNDS(kThreads) void mxfp4_moe_a4w4_down_bm##BM##_nt##NT(MXFP4_A4W4_DOWN_ARGS) {     \
    a4w4_down<BM, NT, kDownMaxSlabs>(A, As, W, S, C, topk_w, sorted_ids, expert_ids, ntpp, num_sorted,       \
                                     num_valid, a_rows, a_row_div, K, N, num_experts, mul_routed, n_steps,   \
                                     a_stride);                                                              \
  }
MXFP4_A4W4_DOWN(16, 1)
MXFP4_A4W4_DOWN(16, 2)
MXFP4_A4W4_DOWN(32, 1)
MXFP4_A4W4_DOWN(32, 2)
MXFP4_A4W4_DOWN(48, 1)
MXFP4_A4W4_DOWN(48, 2)

#define MXFP4_A4W4_ARGS                                                                                        \
  const uint8_t *A, const uint8_t *As, const uint8_t *W, const uint8_t *S, void *C, uint8_t *Cs,               \
      const float *topk_w, const int32_t *sorted_ids, const int32_t *expert_ids, const int32_t *ntpp,         \
      uint32_t num_sorted, uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t K, uint32_t N,   \
      uint32_t num_experts, uint32_t mul_routed, float beta, float lin, uint32_t a_stride
#define MXFP4_A4W4_PASS                                                                                        \
  A, As, W, S, C, Cs, topk_w, sorted_ids, expert_ids, ntpp, num_sorted, num_valid, a_rows, a_row_div, K, N,   \
      num_experts, mul_routed, beta, lin, a_stride

// Kernel name: mxfp4_moe_a4w4_bm<BM>_nt<NT>_<epilogue>[_q] (_q: MXFP4 output codes + scales).
#define MXFP4_A4W4(BM, NT, EPI, NAME, QOUT, SUFFIX)                                                       \
  MM_KERNEL MM_LAUNCH_BOUNDS(kThreads) void mxfp4_moe_a4w4_bm##BM##_nt##NT##_##NAME##SUFFIX(MXFP4_A4W4_ARGS) { \
    a4w4<kFp4, BM, NT, EPI, QOUT>(MXFP4_A4W4_PASS);                                                       \
  }
#define MXFP4_A4W4_BMS(NT, EPI, NAME, QOUT, SUFFIX) \
  MXFP4_A4W4(16, NT, EPI, NAME, QOUT, SUFFIX)       \
  MXFP4_A4W4(32, NT, EPI, NAME, QOUT, SUFFIX)       \
  MXFP4_A4W4(48, NT, EPI, NAME, QOUT, SUFFIX)

MXFP4_A4W4_BMS(1, kEpiNone, none, false, )
MXFP4_A4W4_BMS(2, kEpiNone, none, false, )
MXFP4_A4W4_BMS(1, kEpiSilu, silu, false, )
MXFP4_A4W4_BMS(2, kEpiSilu, silu, false, )
MXFP4_A4W4_BMS(1, kEpiSitu, situ, false, )
MXFP4_A4W4_BMS(2, kEpiSitu, situ, false, )
MXFP4_A4W4_BMS(2, kEpiSilu, silu, true, _q)
MXFP4_A4W4_BMS(2, kEpiSitu, situ, true, _q)

#define MXFP4_A4W4_LAYER_ARGS                                                                                  \
  const uint8_t *A, const uint8_t *As, const uint8_t *W1, const uint8_t *S1, const uint8_t *W2, const uint8_t *S2, \
      uint16_t *C, const float *topk_w, const int32_t *sorted_ids, const int32_t *expert_ids, const int32_t *ntpp, \
      uint32_t num_sorted, uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t K, uint32_t N,      \
      uint32_t num_experts, uint32_t mul_routed, float beta, float lin, uint32_t a_stride
// Kernel name: mxfp4_moe_a4w4_layer_bm<BM>_i<I>_<epilogue>: I / 64 waves of 4 gate + 4 up tiles, 4 down tiles.
#define MXFP4_A4W4_LAYER(BM, I, EPI, NAME)                                                                     \
  MM_KERNEL MM_LAUNCH_BOUNDS(I) void mxfp4_moe_a4w4_layer_bm##BM##_i##I##_##NAME(MXFP4_A4W4_LAYER_ARGS) {   \
    a4w4_layer<BM, 4, EPI, 4, I / 64>(A, As, W1, S1, W2, S2, C, topk_w, sorted_ids, expert_ids, ntpp, num_sorted,       \
                               num_valid, a_rows, a_row_div, K, N, num_experts, mul_routed, beta, lin, a_stride);  \
  }

#define MXFP4_A4W4_LAYERS(I)                 \
  MXFP4_A4W4_LAYER(16, I, kEpiSilu, silu)    \
  MXFP4_A4W4_LAYER(32, I, kEpiSilu, silu)    \
  MXFP4_A4W4_LAYER(48, I, kEpiSilu, silu)    \
  MXFP4_A4W4_LAYER(16, I, kEpiSitu, situ)    \
  MXFP4_A4W4_LAYER(32, I, kEpiSitu, situ)    \
  MXFP4_A4W4_LAYER(48, I, kEpiSitu, situ)
MXFP4_A4W4_LAYERS(256)
MXFP4_A4W4_LAYERS(512)

// a8w4: MXFP8 (e4m3) activations, codes [A_rows, K] bytes + E8M0 scales [A_rows, K/32] (mxfp8_quant_bf16's
// layout), bf16 output. Kernel name: mxfp4_moe_a8w4_bm<BM>_nt<NT>_<epilogue>.
#define MXFP4_A8W4(BM, NT, EPI, NAME)                                                                        \
  MM_KERNEL MM_LAUNCH_BOUNDS(kThreads) void mxfp4_moe_a8w4_bm##BM##_nt##NT##_##NAME(MXFP4_A4W4_ARGS) {     \
    a4w4<kFp8, BM, NT, EPI, false>(MXFP4_A4W4_PASS);                                                       \
  }
#define MXFP4_A8W4_BMS(NT, EPI, NAME) \
  MXFP4_A8W4(16, NT, EPI, NAME)       \
  MXFP4_A8W4(32, NT, EPI, NAME)       \
  MXFP4_A8W4(48, NT, EPI, NAME)
MXFP4_A8W4_BMS(1, kEpiNone, none)
MXFP4_A8W4_BMS(2, kEpiNone, none)
MXFP4_A8W4_BMS(1, kEpiSilu, silu)
MXFP4_A8W4_BMS(2, kEpiSilu, silu)
MXFP4_A8W4_BMS(1, kEpiSitu, situ)
MXFP4_A8W4_BMS(2, kEpiSitu, situ)
