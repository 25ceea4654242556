// MXFP4 MoE gate/up grouped GEMM for gfx942 (also the down projection at K the down kernel does not
// serve): C[slot, :] = epilogue(A[slot / a_row_div, :] . dequant(W[expert])^T) for every live slot of
// each block of `sorted_ids`.
//
// Workgroup = 8 waves = one block of BM sorted rows x one column block. The waves split the columns:
// each holds all BM rows and NT column tiles of 16 (EPI_NONE: 128*NT columns per workgroup), or, under
// EPI_SITU or EPI_SILU, NT gate tiles and the NT up tiles of the same output columns (128*NT output
// columns), so the gated epilogue is lane-local. NT = 0 (gated, decode): one 16-column tile per wave whose
// rows 0..7 are the gate and 8..15 the up columns of 8 outputs (64 output columns per workgroup: half the
// work, so a decode launch spreads more evenly over the CUs); the epilogue fetches the up half across the
// wave's halves (ds_bpermute). K is walked in slabs of 128: the activation slab is
// double-buffered in LDS (one barrier per slab), the weights never touch LDS: each lane loads one
// 16-byte granule and one scale byte per column tile per slab, a slab ahead, and dequantises them in
// registers (v_perm lookups in the scale byte's table; the 256 tables sit in 4 KiB of LDS). At block_m 16
// (decode) the activation loads run two slabs ahead (a second register stage), so the store before each
// slab's barrier waits for loads issued a slab earlier. Any K that is a multiple of 32 works: the last, partial slab reads zeros past K (the
// activation loads are masked, the weight buffer is bounded per expert).
//
// Grid: (ceil(N_out / (128*NT)) (NT = 0: ceil(N_out / 64)), num_m_blocks). A block past *ntpp or whose expert id is negative
// (or >= num_experts) returns at once. Dead rows (slot >= num_valid: padding) are never written.
// Output bf16 RTNE, canonical NaN. Epilogues: EPI_NONE v = acc; EPI_SITU v = SituGLU(gate, up);
// EPI_SILU (SwiGLU) v = silu(gate) * up = gate * sigmoid(gate) * up. mul_routed != 0 multiplies each row
// by topk_w[slot] (fp32) after the epilogue, before rounding, under every epilogue.
#include "mxfp4_moe_common.hpp"

using namespace mm;
using namespace mm::moe;

namespace {

enum : int { kEpiNone = 0, kEpiSitu = 1, kEpiSilu = 2 };
constexpr bool gated(int epi) { return epi == kEpiSitu || epi == kEpiSilu; }

template <int BM, int NT, int EPI>
MM_DEVICE void gateup(const uint16_t* A, const uint8_t* W, const uint8_t* S, uint16_t* C, const float* topk_w,
                      const int32_t* sorted_ids, const int32_t* expert_ids, const int32_t* ntpp,
                      uint32_t num_sorted, uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t K,
                      uint32_t N, uint32_t num_experts, uint32_t mul_routed, float beta, float lin, uint32_t a_stride) {
  static_assert(BM % 16 == 0 && BM <= 64, "block_m is 16, 32 or 48");
  static_assert(NT > 0 || gated(EPI), "nt 0 (a shared gate/up tile) is a gated variant");
  constexpr int SUBS = BM / 16;
  // nt 0: one 16-column tile per wave holding the gate columns (tile rows 0..7) and the up columns (8..15)
  // of 8 output columns: half a workgroup's width and work (decode: finer pieces balance the CUs).
  constexpr bool kShared = NT == 0;
  constexpr int TILES = kShared ? 1 : gated(EPI) ? 2 * NT : NT;
  constexpr uint32_t kWaveCols = kShared ? 8u : 16u * NT;  // output columns per wave
  constexpr int STAGE = (BM * kGranulesPerRow + kThreads - 1) / kThreads;  // A granules per thread per slab
  MM_LDS __attribute__((aligned(16))) uint8_t lds[2][BM * kRowBytes];
  MM_LDS __attribute__((aligned(16))) uint8_t tables[kTableBytes];

  const uint32_t m_block = block_id_y();
  const uint32_t m0 = m_block * BM;
  if (m0 >= (uint32_t)*ntpp) return;
  const int32_t expert = expert_ids[m_block];
  if (expert < 0 || (uint32_t)expert >= num_experts) return;

  const uint32_t tid = thread_id_x(), lane = lane_id(), wave = wave_id();
  const uint32_t nout = gated(EPI) ? N / 2u : N;
  const uint32_t wave_col = block_id_x() * (kWaves * kWaveCols) + wave * kWaveCols;  // first output column
  const uint32_t kblocks = K / 32u;
  const uint32_t slabs = (K + kSlabK - 1) / kSlabK;
  const ExpertWeights ew = expert_weights(W, S, (uint32_t)expert, N, kblocks);
  // A rows are a_stride elements apart (any row stride, contiguous k); the buffer ends at the
  // last row's K-th element.
  const buffer_rsrc abuf = make_buffer(A, ((a_rows - 1u) * a_stride + K) * 2u);

  // Weight column of tile t for this lane (gated: tiles NT.. are the up half of the same outputs).
  uint32_t widx[TILES];
  if constexpr (kShared) {
    const uint32_t c = wave_col + (lane & 7u);
    widx[0] = weight_index(ew, (lane & 8u) ? nout + c : c);
  } else {
#pragma unroll
    for (int t = 0; t < TILES; ++t) {
      const uint32_t c = wave_col + 16u * (t % NT) + (lane & 15u);
      widx[t] = weight_index(ew, (gated(EPI) && t >= NT) ? nout + c : c);
    }
  }

  // This thread's staging granules: block row and A row offset.
  uint32_t st_row[STAGE], st_off[STAGE];
  bool st_live[STAGE];
#pragma unroll
  for (int p = 0; p < STAGE; ++p) {
    const uint32_t u = tid + p * kThreads;
    st_row[p] = u >> 4;
    const RowInfo ri = row_info(sorted_ids, num_sorted, m0 + st_row[p], num_valid);
    st_live[p] = u < BM * kGranulesPerRow && ri.live;
    st_off[p] = ri.live ? (ri.slot / a_row_div) * a_stride * 2u : 0u;
  }
  const uint32_t g = tid & 15u;

  FragC<Mma> acc[SUBS][TILES];
#pragma unroll
  for (int r = 0; r < SUBS; ++r)
#pragma unroll
    for (int t = 0; t < TILES; ++t) acc[r][t] = zeros<Mma>();

  // Prologue: dequantisation tables and slab 0 to LDS, slab 0 weights in flight.
  build_tables(tables);
  // Decode (block_m 16: few workgroups per CU, latency-bound) keeps two activation slabs in flight; larger
  // blocks keep one (the extra registers would cost occupancy: measured in docs/kernels/mxfp4_moe_gfx942.md).
  if constexpr (BM == 16) {
    u32x4 sa[STAGE], sb[STAGE];  // activation registers: slab s + 1 (being stored) and s + 2 (in flight)
    WeightSlab wa[TILES], wb[TILES];
#pragma unroll
    for (int p = 0; p < STAGE; ++p) sa[p] = load_a_granule(abuf, st_off[p], st_live[p], 0, g, K);
#pragma unroll
    for (int p = 0; p < STAGE; ++p) sb[p] = load_a_granule(abuf, st_off[p], st_live[p], 1, g, K);
#pragma unroll
    for (int t = 0; t < TILES; ++t) wa[t] = load_weight_slab(ew, widx[t], 0);
#pragma unroll
    for (int p = 0; p < STAGE; ++p)
      if (tid + p * kThreads < BM * kGranulesPerRow) store_a_granule(lds[0], st_row[p], g, sa[p]);
    block_sync();

    // One slab: start the activation loads TWO slabs ahead and the weight loads one slab ahead (issue order
    // = retire order: the activations of slab s + 1, issued one slab earlier, are the oldest loads the
    // end-of-slab store waits for), run this slab's MFMAs, store slab s + 1's activations to LDS, barrier.
    // Registers alternate (the loop is unrolled by two): weights wa/wb, activations sa/sb.
    auto slab_step = [&](uint32_t s, const WeightSlab(&cur)[TILES], WeightSlab(&next)[TILES], u32x4(&ready)[STAGE],
                         u32x4(&ahead)[STAGE]) {
      // ready holds slab s + 1 (loaded a slab ago); ahead receives slab s + 2. Unconditional loads (past the
      // last slab they read zeros): a branch here would make the compiler's vmcnt bookkeeping wait for all.
#pragma unroll
      for (int t = 0; t < TILES; ++t) next[t] = load_weight_slab(ew, widx[t], s + 1);
      sched_barrier();  // keep the issue order: vmcnt retires in order
#pragma unroll
      for (int p = 0; p < STAGE; ++p) ahead[p] = load_a_granule(abuf, st_off[p], st_live[p], s + 2, g, K);
      slab_mma<SUBS, TILES>(acc, cur, lds[s & 1], tables);
      if (s + 1 < slabs) {
#pragma unroll
        for (int p = 0; p < STAGE; ++p)
          if (tid + p * kThreads < BM * kGranulesPerRow) store_a_granule(lds[(s + 1) & 1], st_row[p], g, ready[p]);
      }
      block_sync();
    };
    for (uint32_t s = 0; s < slabs; s += 2) {
      slab_step(s, wa, wb, sb, sa);
      if (s + 1 < slabs) slab_step(s + 1, wb, wa, sa, sb);
    }

  } else {
    u32x4 stage[STAGE];
    WeightSlab wa[TILES], wb[TILES];
#pragma unroll
    for (int p = 0; p < STAGE; ++p) stage[p] = load_a_granule(abuf, st_off[p], st_live[p], 0, g, K);
#pragma unroll
    for (int t = 0; t < TILES; ++t) wa[t] = load_weight_slab(ew, widx[t], 0);
#pragma unroll
    for (int p = 0; p < STAGE; ++p)
      if (tid + p * kThreads < BM * kGranulesPerRow) store_a_granule(lds[0], st_row[p], g, stage[p]);
    block_sync();

    // One slab: start the next slab's loads (activations first: they are waited for before this slab's
    // end, the weights only in the next slab), run this slab's MFMAs, stage the next activation slab.
    // The weight registers alternate between wa and wb (the loop is unrolled by two), so no copy has to
    // wait for a load in flight.
    auto slab_step = [&](uint32_t s, const WeightSlab(&cur)[TILES], WeightSlab(&next)[TILES]) {
      // Unconditional (past the last slab they read zeros): a branch here would make the compiler's
      // vmcnt bookkeeping merge two paths and wait for everything.
#pragma unroll
      for (int p = 0; p < STAGE; ++p) stage[p] = load_a_granule(abuf, st_off[p], st_live[p], s + 1, g, K);
      sched_barrier();  // keep the issue order: vmcnt retires in order
#pragma unroll
      for (int t = 0; t < TILES; ++t) next[t] = load_weight_slab(ew, widx[t], s + 1);
      slab_mma<SUBS, TILES>(acc, cur, lds[s & 1], tables);
      if (s + 1 < slabs) {
#pragma unroll
        for (int p = 0; p < STAGE; ++p)
          if (tid + p * kThreads < BM * kGranulesPerRow) store_a_granule(lds[(s + 1) & 1], st_row[p], g, stage[p]);
      }
      block_sync();
    };
    for (uint32_t s = 0; s < slabs; s += 2) {
      slab_step(s, wa, wb);
      if (s + 1 < slabs) slab_step(s + 1, wb, wa);
    }

  }

  // Epilogue: lane (q, j) holds output columns 4q..4q+3 of block row 16r + j.
  const buffer_rsrc cbuf = make_buffer(C, num_valid * nout * 2u);
  const uint32_t c_mis = misalignment8(C);
  const float inv_beta = 1.0f / beta, inv_lin = 1.0f / lin;
  auto glu4 = [&](f32x4 gt, f32x4 up) {  // the gated epilogue of 4 columns
    if constexpr (EPI == kEpiSitu)
      return f32x4{situ(gt.x, up.x, beta, inv_beta, lin, inv_lin), situ(gt.y, up.y, beta, inv_beta, lin, inv_lin),
                   situ(gt.z, up.z, beta, inv_beta, lin, inv_lin), situ(gt.w, up.w, beta, inv_beta, lin, inv_lin)};
    else
      return f32x4{swiglu(gt.x, up.x), swiglu(gt.y, up.y), swiglu(gt.z, up.z), swiglu(gt.w, up.w)};
  };
  if constexpr (kShared) {
    // Lane (q, j), q < 2, holds gate columns 4q..4q+3 of the wave's 8; lane (q + 2, j) the up columns:
    // fetched across the wave's halves (every lane takes part), then the lanes q < 2 store.
#pragma unroll
    for (int r = 0; r < SUBS; ++r) {
      const f32x4 gt = acc[r][0].v;
      const f32x4 up = f32x4{xor_lane(gt.x, 32u), xor_lane(gt.y, 32u), xor_lane(gt.z, 32u), xor_lane(gt.w, 32u)};
      const RowInfo ri = row_info(sorted_ids, num_sorted, m0 + 16u * r + (lane & 15u), num_valid);
      const uint32_t col0 = wave_col + 4u * (lane >> 4);
      if (!ri.live || lane >= 32u || col0 >= nout) continue;
      const float w = mul_routed ? topk_w[ri.slot] : 1.0f;
      store_out4(cbuf, c_mis, ri.slot, nout, col0, nout, glu4(gt, up) * w);
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < SUBS; ++r) {
    const RowInfo ri = row_info(sorted_ids, num_sorted, m0 + 16u * r + (lane & 15u), num_valid);
    if (!ri.live) continue;
    const float w = mul_routed ? topk_w[ri.slot] : 1.0f;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const uint32_t col0 = wave_col + 16u * t + 4u * (lane >> 4);
      if (col0 >= nout) continue;
      f32x4 v;
      if constexpr (gated(EPI))
        v = glu4(acc[r][t].v, acc[r][NT + t].v);
      else
        v = acc[r][t].v;
      store_out4(cbuf, c_mis, ri.slot, nout, col0, nout, v * w);
    }
  }
}

}  // namespace

#define MXFP4_GATEUP_ARGS                                                                                    \
  const uint16_t *A, const uint8_t *W, const uint8_t *S, uint16_t *C, const float *topk_w,                   \
      const int32_t *sorted_ids, const int32_t *expert_ids, const int32_t *ntpp, uint32_t num_sorted,        \
      uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t K, uint32_t N, uint32_t num_experts, \
      uint32_t mul_routed, float beta, float lin, uint32_t a_stride
#define MXFP4_GATEUP_PASS \
  A, W, S, C, topk_w, sorted_ids, expert_ids, ntpp, num_sorted, num_valid, a_rows, a_row_div, K, N, num_experts, \
      mul_routed, beta, lin, a_stride

#define MXFP4_GATEUP(BM, NT, EPI, NAME)                                                      \
  MM_KERNEL MM_LAUNCH_BOUNDS(kThreads) void mxfp4_moe_gateup_bm##BM##_nt##NT##_##NAME(MXFP4_GATEUP_ARGS) { \
    gateup<BM, NT, EPI>(MXFP4_GATEUP_PASS);                                                  \
  }

#ifndef MXFP4_MOE_SINGLE_VARIANT
MXFP4_GATEUP(16, 1, kEpiNone, none)
MXFP4_GATEUP(16, 2, kEpiNone, none)
MXFP4_GATEUP(16, 3, kEpiNone, none)
MXFP4_GATEUP(32, 1, kEpiNone, none)
MXFP4_GATEUP(32, 2, kEpiNone, none)
MXFP4_GATEUP(32, 3, kEpiNone, none)
MXFP4_GATEUP(48, 1, kEpiNone, none)
MXFP4_GATEUP(48, 2, kEpiNone, none)
MXFP4_GATEUP(48, 3, kEpiNone, none)
MXFP4_GATEUP(16, 0, kEpiSitu, situ)
MXFP4_GATEUP(16, 1, kEpiSitu, situ)
MXFP4_GATEUP(16, 2, kEpiSitu, situ)
MXFP4_GATEUP(32, 1, kEpiSitu, situ)
MXFP4_GATEUP(32, 2, kEpiSitu, situ)
MXFP4_GATEUP(48, 1, kEpiSitu, situ)
MXFP4_GATEUP(48, 2, kEpiSitu, situ)
MXFP4_GATEUP(16, 0, kEpiSilu, silu)
MXFP4_GATEUP(16, 1, kEpiSilu, silu)
MXFP4_GATEUP(16, 2, kEpiSilu, silu)
MXFP4_GATEUP(32, 1, kEpiSilu, silu)
MXFP4_GATEUP(32, 2, kEpiSilu, silu)
MXFP4_GATEUP(48, 1, kEpiSilu, silu)
MXFP4_GATEUP(48, 2, kEpiSilu, silu)
#else
// Development hook: -DMXFP4_MOE_SINGLE_VARIANT -DBMV=.. -DNTV=.. -DEPIV=kEpiNone -DEPIN=none
MXFP4_GATEUP(BMV, NTV, EPIV, EPIN)
#endif
