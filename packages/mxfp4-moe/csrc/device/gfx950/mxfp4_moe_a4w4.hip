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

typedef MfmaScaled16x16x128<MxFormat::E2M1, MxFormat::E2M1> Mx;
constexpr int kA4RowBytes = 64;  // fp4 bytes of one A row in one slab (128 k)
typedef XorLds<kA4RowBytes, 16, 4> A4Lds;
constexpr int kDownMaxSlabs = 16;  // the resident-tile down kernel: K <= 2048 (48 x 1 KiB + scales <= 52 KiB)

// Standard fp4x2 order (byte b: k 2b, 2b + 1) -> the repacked weights' order (byte j: k j, j + 4), one
// dword of 8 k.
MM_DEVICE uint32_t to_weight_order(uint32_t x) {
  const uint32_t ev = x & 0x0F0F0F0Fu;         // k 0, 2, 4, 6 in bytes 0..3
  const uint32_t od = (x >> 4) & 0x0F0F0F0Fu;  // k 1, 3, 5, 7
  const uint32_t lo = perm(od, ev, 0x05010400u);  // k 0, 1, 2, 3
  const uint32_t hi = perm(od, ev, 0x07030602u);  // k 4, 5, 6, 7
  return lo | (hi << 4);
}

// One lane's weight granule and scale byte of slab `slab`: the slab's offset is uniform, so it rides in
// soffset (SALU) and the per-lane offsets are computed once (w_off = 16 * granule index, s_off = index).
// The scale stays a byte until the MFMA that uses it: widened at the load, its zero-extension would be
// scheduled beside the current slab's MFMAs and make them wait for this (prefetch) load.
struct W4Slab {
  u32x4 nib;
  uint8_t scale;
};
MM_DEVICE W4Slab load_weights(const ExpertWeights& ew, uint32_t w_off, uint32_t s_off, uint32_t slab) {
  W4Slab ws;
  ws.nib = buffer_load_b128(ew.w, w_off, slab * 64u * ew.n);
  ws.scale = buffer_load_u8(ew.s, s_off, slab * 4u * ew.n);
  return ws;
}

// acc[r][t] += W(tile t) x A(subtile r) over one slab: one scaled MFMA each; the activation operand and its
// scale byte come from the slab's LDS (codes in A4Lds layout, scales as 4 bytes per row).
template <int SUBS, int TILES>
MM_DEVICE void slab_mma4(FragC<Mx> (&acc)[SUBS][TILES], const W4Slab (&ws)[TILES], const uint8_t* codes,
                         const uint8_t* scales) {
  const uint32_t j = lane_id() & 15u, q = lane_id() >> 4;
#pragma unroll
  for (int r = 0; r < SUBS; ++r) {
    FragB<Mx> a;
    a.w = lds_read_b128(codes, A4Lds::offset(16u * r + j, q * 16u));
    const Scales<Mx> sa{(uint32_t)scales[(16u * r + j) * 4u + q]};
#pragma unroll
    for (int t = 0; t < TILES; ++t) {
      FragA<Mx> w;
      w.w = ws[t].nib;
      mma(acc[r][t], w, Scales<Mx>{(uint32_t)ws[t].scale}, a, sa, acc[r][t]);
    }
  }
}

template <int EPI>
MM_DEVICE float epilogue(float g, float u, float beta, float inv_beta, float lin, float inv_lin) {
  if constexpr (EPI == kEpiSitu) return situ(g, u, beta, inv_beta, lin, inv_lin);
  else if constexpr (EPI == kEpiSilu) return swiglu(g, u);
  else return g;
}

template <int BM, int NT, int EPI, bool QOUT>
MM_DEVICE void a4w4(const uint8_t* A, const uint8_t* As, const uint8_t* W, const uint8_t* S, void* C, uint8_t* Cs,
                    const float* topk_w, const int32_t* sorted_ids, const int32_t* expert_ids, const int32_t* ntpp,
                    uint32_t num_sorted, uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t K,
                    uint32_t N, uint32_t num_experts, uint32_t mul_routed, float beta, float lin, uint32_t a_stride) {
  static_assert(BM % 16 == 0 && BM <= 64, "block_m is 16, 32 or 48");
  static_assert(!QOUT || (gated(EPI) && NT == 2), "quantised output: a gated epilogue over whole 32-column groups");
  constexpr int SUBS = BM / 16;
  constexpr int TILES = gated(EPI) ? 2 * NT : NT;
  constexpr int GRANULES = BM * 4;  // 16-byte code granules of one slab of the A tile
  static_assert(GRANULES <= kThreads, "one staging granule per thread");
  MM_LDS __attribute__((aligned(16))) uint8_t lds[2][BM * kA4RowBytes];
  MM_LDS __attribute__((aligned(16))) uint32_t lds_scales[2][BM];

  const uint32_t m_block = block_id_y();
  const uint32_t m0 = m_block * BM;
  if (m0 >= (uint32_t)*ntpp) return;
  const int32_t expert = expert_ids[m_block];
  if (expert < 0 || (uint32_t)expert >= num_experts) return;

  const uint32_t tid = thread_id_x(), lane = lane_id(), wave = wave_id();
  const uint32_t nout = gated(EPI) ? N / 2u : N;
  const uint32_t wave_col = block_id_x() * (kWaves * 16 * NT) + wave * (16 * NT);
  const uint32_t kblocks = K / 32u;
  const uint32_t slabs = K / kSlabK;
  const ExpertWeights ew = expert_weights(W, S, (uint32_t)expert, N, kblocks);
  const buffer_rsrc abuf = make_buffer(A, (a_rows - 1u) * a_stride + K / 2u);
  const buffer_rsrc sbuf = make_buffer(As, a_rows * kblocks);

  uint32_t widx[TILES];
#pragma unroll
  for (int t = 0; t < TILES; ++t) {
    const uint32_t c = wave_col + 16u * (t % NT) + (lane & 15u);
    widx[t] = weight_index(ew, (gated(EPI) && t >= NT) ? nout + c : c);
  }
  const uint32_t last = slabs - 1u;  // prefetches past the last slab reload it (uniform clamp, in range)

  // Staging roles: thread tid < GRANULES moves granule (row tid / 4, g = tid % 4) of each slab; thread
  // 256 + r (r < BM) moves row r's 4 scale bytes (one dword: K % 128 == 0 keeps it aligned).
  const bool st_code = tid < (uint32_t)GRANULES;
  const uint32_t st_row = tid >> 2, st_g = tid & 3u;
  const RowInfo st_ri = row_info(sorted_ids, num_sorted, m0 + (st_code ? st_row : 0u), num_valid);
  const bool st_live = st_code && st_ri.live;
  const uint32_t st_off = st_live ? (st_ri.slot / a_row_div) * a_stride + st_g * 16u : kOOB;
  const uint32_t sc_row = tid - 256u;
  const bool st_scale = tid >= 256u && sc_row < (uint32_t)BM;
  const RowInfo sc_ri = row_info(sorted_ids, num_sorted, m0 + (st_scale ? sc_row : 0u), num_valid);
  const bool sc_live = st_scale && sc_ri.live;
  const uint32_t sc_off = sc_live ? (sc_ri.slot / a_row_div) * kblocks : kOOB;

  auto load_codes = [&](uint32_t s) { return buffer_load_b128(abuf, st_live ? st_off + s * 64u : kOOB); };
  auto load_scales = [&](uint32_t s) { return buffer_load_b32(sbuf, sc_live ? sc_off + s * 4u : kOOB); };
  auto stage = [&](uint32_t buf, u32x4 codes, uint32_t scales) {
    if (st_code) {
      const u32x4 v = u32x4{to_weight_order(codes.x), to_weight_order(codes.y), to_weight_order(codes.z),
                            to_weight_order(codes.w)};
      lds_write_b128(lds[buf], A4Lds::offset(st_row, st_g * 16u), v);
    }
    if (st_scale) lds_scales[buf][sc_row] = scales;
  };

  FragC<Mx> acc[SUBS][TILES];
#pragma unroll
  for (int r = 0; r < SUBS; ++r)
#pragma unroll
    for (int t = 0; t < TILES; ++t) acc[r][t] = zeros<Mx>();

  W4Slab wa[TILES], wb[TILES];
  {
    const u32x4 c0 = load_codes(0);
    const uint32_t s0 = load_scales(0);
#pragma unroll
    for (int t = 0; t < TILES; ++t) wa[t] = load_weights(ew, 16u * widx[t], widx[t], 0);
    stage(0, c0, s0);
  }
  block_sync();

  // One slab: next slab's activation loads first, then its weights, this slab's MFMAs, stage the next
  // activations, barrier (as the a16w4 kernel; the loop is unrolled by two so the weight registers
  // alternate without copies).
  const uint32_t j = lane & 15u, q = lane >> 4;
  auto slab_step = [&](uint32_t s, const W4Slab(&cur)[TILES], W4Slab(&next)[TILES]) {
    const uint32_t sn1 = s + 1u < slabs ? s + 1u : last;
    const u32x4 cn = load_codes(sn1);
    const uint32_t sn = load_scales(sn1);
    sched_barrier();
    if (s + 1u < slabs) {  // uniform: no weight prefetch past the last slab
#pragma unroll
      for (int t = 0; t < TILES; ++t) next[t] = load_weights(ew, 16u * widx[t], widx[t], sn1);
    }
    slab_mma4<SUBS, TILES>(acc, cur, lds[s & 1], (const uint8_t*)lds_scales[s & 1]);
    if (s + 1 < slabs) stage((s + 1) & 1, cn, sn);
    block_sync();
  };
  for (uint32_t s = 0; s < slabs; s += 2) {
    slab_step(s, wa, wb);
    if (s + 1 < slabs) slab_step(s + 1, wb, wa);
  }

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
      uint32_t h[2][2];  // bf16 pairs: tile, pair
      float amax = kAmaxFloor;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const f32x4 g = acc[r][t].v, up = acc[r][2 + t].v;
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = epilogue<EPI>(g[i], up[i], beta, inv_beta, lin, inv_lin) * w;
        h[t][0] = pack_bf16x2<Round::RTNE>(v[0], v[1]);
        h[t][1] = pack_bf16x2<Round::RTNE>(v[2], v[3]);
        amax = amax_bf16x2(amax_bf16x2(amax, h[t][0]), h[t][1]);
      }
      // Across the 4 lane groups holding row j (lanes j, j + 16, j + 32, j + 48); every lane takes part.
      amax = __builtin_fmaxf(amax, __builtin_bit_cast(float, swizzle_xor<16>(__builtin_bit_cast(uint32_t, amax))));
      amax = __builtin_fmaxf(amax, xor_lane(amax, 32u));
      if (!ri.live || !in_range) continue;
      const uint32_t sbyte = quant_scale_byte(amax);
      const float sc = scale_operand(sbyte);
      const uint32_t off = ri.slot * (nout / 2u) + wave_col / 2u + 2u * q;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const uint32_t b = cvt_fp4x2<1>(cvt_fp4x2<0>(0u, h[t][0], sc), h[t][1], sc);
        buffer_store_u16((uint16_t)b, cbuf, off + 8u * t);
      }
      if (q == 0) buffer_store_u8((uint8_t)sbyte, csbuf, ri.slot * (nout / 32u) + wave_col / 32u);
    }
  }
}

// Down projection (EPI_NONE, bf16 output) at K <= 128 * KMAX_SLABS: the whole BM x K activation tile and
// its scales are staged in LDS once, behind the kernel's only barrier; then the waves sweep n_steps column
// chunks of 128 * NT against it (weights one slab ahead, no barriers), as the a16w4 down kernel does. The
// accumulation chain per output (slabs ascending, one MFMA each) is the streaming kernel's: bit-equal to
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

  const uint32_t tid = thread_id_x(), lane = lane_id(), wave = wave_id();
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
      const u32x4 v = u32x4{to_weight_order(codes[p].x), to_weight_order(codes[p].y), to_weight_order(codes[p].z),
                            to_weight_order(codes[p].w)};
      lds_write_b128(lds[slab], A4Lds::offset(row, (u % 4u) * 16u), v);
    }
  }
#pragma unroll
  for (int p = 0; p < STAGE_S; ++p) {
    const uint32_t u = tid + p * kThreads;
    if (u / BM < slabs) lds_scales[u / BM][u % BM] = scl[p];
  }

  const uint32_t j = lane & 15u, q = lane >> 4;
  RowInfo rows[SUBS];
  float rw[SUBS];
#pragma unroll
  for (int r = 0; r < SUBS; ++r) {
    rows[r] = row_info(sorted_ids, num_sorted, m0 + 16u * r + j, num_valid);
    rw[r] = (mul_routed && rows[r].live) ? topk_w[rows[r].slot] : 1.0f;
  }
  const buffer_rsrc cbuf = make_buffer(C, num_valid * N * 2u);
  const uint32_t c_mis = misalignment8(C);
  block_sync();

  for (uint32_t step = 0; step < n_steps; ++step) {
    const uint32_t chunk = block_id_x() * n_steps + step;
    if (chunk * BN >= N) break;
    const uint32_t wave_col = chunk * BN + wave * (16 * NT);
    uint32_t widx[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) widx[t] = weight_index(ew, wave_col + 16u * t + j);
    FragC<Mx> acc[SUBS][NT];
#pragma unroll
    for (int r = 0; r < SUBS; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[r][t] = zeros<Mx>();

    W4Slab wa[NT], wb[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) wa[t] = load_weights(ew, 16u * widx[t], widx[t], 0);
    // No prefetch past the last slab (uniform branches): at K = 256 a clamped reload would read half
    // the weights twice.
    for (uint32_t s = 0; s < slabs; s += 2) {
      if (s + 1u < slabs) {
#pragma unroll
        for (int t = 0; t < NT; ++t) wb[t] = load_weights(ew, 16u * widx[t], widx[t], s + 1u);
      }
      slab_mma4<SUBS, NT>(acc, wa, lds[s], (const uint8_t*)lds_scales[s]);
      if (s + 1u >= slabs) break;
      if (s + 2u < slabs) {
#pragma unroll
        for (int t = 0; t < NT; ++t) wa[t] = load_weights(ew, 16u * widx[t], widx[t], s + 2u);
      }
      slab_mma4<SUBS, NT>(acc, wb, lds[s + 1], (const uint8_t*)lds_scales[s + 1]);
    }

#pragma unroll
    for (int r = 0; r < SUBS; ++r) {
      if (!rows[r].live) continue;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const uint32_t col0 = wave_col + 16u * t + 4u * q;
        if (col0 < N) store_out4(cbuf, c_mis, rows[r].slot, N, col0, N, acc[r][t].v * rw[r]);
      }
    }
  }
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
    a4w4<BM, NT, EPI, QOUT>(MXFP4_A4W4_PASS);                                                             \
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
