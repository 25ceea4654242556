// MXFP4 MoE down-projection grouped GEMM for gfx942, for the short K of tensor-parallel shards
// (K = 128 * KS with KS = 3, 4, 6: K = 384, 512, 768). C[slot, :] = w(slot) * A[slot / a_row_div, :] .
// dequant(W[expert])^T for every live slot of each block of `sorted_ids`.
//
// Workgroup = 8 waves = one block of BM sorted rows x n_steps column chunks of 128*NT columns. The
// whole BM x K activation tile is staged in LDS once, behind the kernel's only barrier; then the waves
// sweep the column chunks against it (each wave: NT column tiles of 16 per chunk, all BM rows),
// loading each lane's weight granule and scale byte one slab ahead and dequantising in registers. The
// weight prefetch runs across chunks (the next chunk's first slab loads during a chunk's last slab), so
// no chunk starts with an empty pipeline.
// The accumulation chain per output element (slabs ascending, 8 MFMAs per slab) is the gate/up
// kernel's, so this kernel equals mxfp4_moe_gateup_*_none bit for bit on the same inputs.
//
// Grid: (ceil(ceil(N / (128*NT)) / n_steps), num_m_blocks). Blocks past *ntpp or with a negative (or
// >= num_experts) expert id return at once; dead rows are never written. Output bf16 RTNE, canonical
// NaN; mul_routed != 0 multiplies each row by topk_w[slot] (fp32) before rounding.
#include "mxfp4_moe_common.hpp"

using namespace mm;
using namespace mm::moe;

namespace {

template <int BM, int KS, int NT>
MM_DEVICE void down(const uint16_t* A, const uint8_t* W, const uint8_t* S, uint16_t* C, const float* topk_w,
                    const int32_t* sorted_ids, const int32_t* expert_ids, const int32_t* ntpp, uint32_t num_sorted,
                    uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t N, uint32_t num_experts,
                    uint32_t mul_routed, uint32_t n_steps, uint32_t a_stride) {
  static_assert(BM % 16 == 0 && BM * KS * kRowBytes + kTableBytes <= 65536, "the A tile must fit in LDS");
  constexpr int SUBS = BM / 16;
  constexpr uint32_t K = KS * kSlabK;
  constexpr int GRANULES = BM * kGranulesPerRow * KS;  // 16-byte granules of the A tile
  constexpr int STAGE = (GRANULES + kThreads - 1) / kThreads;
  constexpr int BN = kWaves * 16 * NT;
  MM_LDS __attribute__((aligned(16))) uint8_t lds[KS][BM * kRowBytes];
  MM_LDS __attribute__((aligned(16))) uint8_t tables[kTableBytes];

  const uint32_t m_block = block_id_y();
  const uint32_t m0 = m_block * BM;
  if (m0 >= (uint32_t)*ntpp) return;
  const int32_t expert = expert_ids[m_block];
  if (expert < 0 || (uint32_t)expert >= num_experts) return;

  const uint32_t tid = thread_id_x(), lane = lane_id(), wave = wave_id();
  const ExpertWeights ew = expert_weights(W, S, (uint32_t)expert, N, K / 32u);
  // A rows are a_stride elements apart (any row stride, contiguous k); the buffer ends at the
  // last row's K-th element.
  const buffer_rsrc abuf = make_buffer(A, ((a_rows - 1u) * a_stride + K) * 2u);

  // Stage the whole A tile: all loads in flight, then all LDS writes (and the dequantisation
  // tables), then the barrier.
  u32x4 stage[STAGE];
#pragma unroll
  for (int p = 0; p < STAGE; ++p) {
    const uint32_t u = tid + p * kThreads;
    const uint32_t slab = u / (BM * kGranulesPerRow), rem = u % (BM * kGranulesPerRow);
    const RowInfo ri = row_info(sorted_ids, num_sorted, m0 + (rem >> 4), num_valid);
    const bool live = u < GRANULES && ri.live;
    stage[p] = load_a_granule(abuf, live ? (ri.slot / a_row_div) * a_stride * 2u : 0u, live, slab, rem & 15u, K);
  }
  build_tables(tables);
#pragma unroll
  for (int p = 0; p < STAGE; ++p) {
    const uint32_t u = tid + p * kThreads;
    const uint32_t slab = u / (BM * kGranulesPerRow), rem = u % (BM * kGranulesPerRow);
    if (u < GRANULES) store_a_granule(lds[slab], rem >> 4, rem & 15u, stage[p]);
  }

  // Row bookkeeping of the epilogue (lane (q, j) stores block row 16r + j).
  RowInfo rows[SUBS];
  float rw[SUBS];
#pragma unroll
  for (int r = 0; r < SUBS; ++r) {
    rows[r] = row_info(sorted_ids, num_sorted, m0 + 16u * r + (lane & 15u), num_valid);
    rw[r] = (mul_routed && rows[r].live) ? topk_w[rows[r].slot] : 1.0f;
  }
  const buffer_rsrc cbuf = make_buffer(C, num_valid * N * 2u);
  const uint32_t c_mis = misalignment8(C);
  block_sync();

  // The weight pipeline runs across column chunks: the slabs of all chunks form one sequence, and the load
  // of sequence slab i + kAhead is issued before slab i's MFMAs, so the first slabs of chunk c + 1 are in
  // flight while chunk c finishes and stores (no drain per chunk). Register set i % KS holds slab i
  // (kAhead < KS: the set being loaded is never one in flight or in use). Past the last chunk the loads'
  // offsets are out of range: they return 0 and fetch nothing.
#ifndef MXFP4_DOWN_AHEAD
  constexpr int kAhead = 1;  // slabs in flight (2 costs 6 VGPRs and a workgroup slot per CU: measured in the doc)
#else
  constexpr int kAhead = MXFP4_DOWN_AHEAD;
#endif
  static_assert(kAhead < KS, "the prefetch distance must be below the slabs per chunk");
  const uint32_t chunk0 = block_id_x() * n_steps;
  const uint32_t total_chunks = (N + BN - 1) / BN;
  const uint32_t left = chunk0 < total_chunks ? total_chunks - chunk0 : 0u;
  const uint32_t chunks = n_steps < left ? n_steps : left;
  auto chunk_index = [&](uint32_t step, int t) {  // weight_index of tile t of chunk `step`
    return weight_index(ew, (chunk0 + step) * BN + wave * (16 * NT) + 16u * t + (lane & 15u));
  };
  WeightSlab ws[KS][NT];
#pragma unroll
  for (int s = 0; s < kAhead; ++s)
#pragma unroll
    for (int t = 0; t < NT; ++t) ws[s][t] = load_weight_slab(ew, chunk_index(0, t), s, chunks > 0);

  for (uint32_t step = 0; step < chunks; ++step) {
    // A compiler-only fence: the activation fragments are re-read from LDS per chunk instead of being
    // hoisted out of the loop (3 slabs x 16 VGPRs held across it would halve the occupancy).
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    const uint32_t wave_col = (chunk0 + step) * BN + wave * (16 * NT);
    uint32_t widx[NT], widx_next[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      widx[t] = chunk_index(step, t);
      widx_next[t] = chunk_index(step + 1, t);
    }
    const bool has_next = step + 1 < chunks;

    FragC<Mma> acc[SUBS][NT];
#pragma unroll
    for (int r = 0; r < SUBS; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[r][t] = zeros<Mma>();

#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const int ahead = s + kAhead;  // sequence slab to issue: this chunk's, or the next chunk's first ones
#pragma unroll
      for (int t = 0; t < NT; ++t)
        ws[ahead % KS][t] = ahead < KS ? load_weight_slab(ew, widx[t], ahead)
                                       : load_weight_slab(ew, widx_next[t], ahead - KS, has_next);
      slab_mma<SUBS, NT>(acc, ws[s], lds[s], tables);
    }

#pragma unroll
    for (int r = 0; r < SUBS; ++r) {
      if (!rows[r].live) continue;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const uint32_t col0 = wave_col + 16u * t + 4u * (lane >> 4);
        if (col0 < N) store_out4(cbuf, c_mis, rows[r].slot, N, col0, N, acc[r][t].v * rw[r]);
      }
    }
  }
}

}  // namespace

#define MXFP4_DOWN_ARGS                                                                                   \
  const uint16_t *A, const uint8_t *W, const uint8_t *S, uint16_t *C, const float *topk_w,                \
      const int32_t *sorted_ids, const int32_t *expert_ids, const int32_t *ntpp, uint32_t num_sorted,     \
      uint32_t num_valid, uint32_t a_rows, uint32_t a_row_div, uint32_t N, uint32_t num_experts,          \
      uint32_t mul_routed, uint32_t n_steps, uint32_t a_stride
#define MXFP4_DOWN_PASS \
  A, W, S, C, topk_w, sorted_ids, expert_ids, ntpp, num_sorted, num_valid, a_rows, a_row_div, N, num_experts, \
      mul_routed, n_steps, a_stride

// Kernel name: mxfp4_moe_down_bm<BM>_k<K>_nt<NT>.
#define MXFP4_DOWN(BM, KS, NT, KV)                                                                     \
  MM_KERNEL MM_LAUNCH_BOUNDS(kThreads) void mxfp4_moe_down_bm##BM##_k##KV##_nt##NT(MXFP4_DOWN_ARGS) { \
    down<BM, KS, NT>(MXFP4_DOWN_PASS);                                                                  \
  }

#ifndef MXFP4_MOE_SINGLE_VARIANT
#define MXFP4_DOWN_NT(BM, KS, KV) MXFP4_DOWN(BM, KS, 1, KV) MXFP4_DOWN(BM, KS, 2, KV)
MXFP4_DOWN_NT(16, 3, 384)
MXFP4_DOWN_NT(16, 4, 512)
MXFP4_DOWN_NT(16, 6, 768)
MXFP4_DOWN_NT(32, 3, 384)
MXFP4_DOWN_NT(32, 4, 512)
MXFP4_DOWN_NT(32, 6, 768)
MXFP4_DOWN_NT(64, 3, 384)
#else
// Development hook: -DMXFP4_MOE_SINGLE_VARIANT -DBMV=.. -DKSV=.. -DNTV=.. -DKVV=..
MXFP4_DOWN(BMV, KSV, NTV, KVV)
#endif
