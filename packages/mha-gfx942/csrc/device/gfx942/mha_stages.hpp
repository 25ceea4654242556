// Stages of the gfx942 MHA forward (bf16, head dim D = 128 or 64) over the tile layer (moonmath/tile.hpp).
// The sizes that depend on D are HeadDim<D>'s; stages that take fragment arrays read D from their extents.
//
// Products (Mfma16x16x16Bf16; lane = 16*quad + col):
//   QK: S^T (16 kv x 16 q) = K Q^T, A = K rows, B = Q^T. A column of S^T is one q row: the softmax state
//       (m, l) is one float per lane (ColVec) and the row max is reduce_cols over the 4 kv subtiles.
//   PV: O^T (16 hd x 16 q) += V^T P^T. The packed S^T *is* the B operand P^T (as_b_operand), so P never
//       leaves the lane; A = V^T comes pre-transposed from V_t (one b128 holds two subtiles' A operands).
//   Both read their A operands from the CTA's LDS stages (qk_lds, pv_lds), filled by direct-to-LDS DMA
//   (dma_k, dma_vt); each fragment read feeds the wave's two q tiles.
//   The head dim is the reduction of QK; any permutation of it is fine if Q and K use the same one, so a
//   lane loads 16 contiguous bytes of its row (d = 32*j + 8*quad + 0..7, j < D / 32) and feeds them as two
//   k-steps: 4 b128 loads per 16-row tile instead of the 8 b64 loads of the natural k order (load_a).
//
// Local additions to the tile layer (candidates for common/include/moonmath/tile.hpp):
//   load_rows16_kpair  the k-permuted b128 operand load above (A and B forms; Q from global);
//   lds_load_k_subtile the same k-permuted rows from the XOR-swizzled LDS K stage;
//   pack_p<R>          bf16 packing without the NaN test (P = exp2(...) only makes the canonical f32 NaN,
//                      which every rounding keeps a NaN); v_perm_b32 per pair;
//   lane_col_sum       the in-lane part of col_sum (l is reduced across lanes once, at the end);
//   GatedColSoftmax    ColSoftmax with a gated max: the cross-lane max runs only when some lane saw a
//                      new max (decided in-lane, bit for bit the eager max), and O's rescale factor is
//                      handed to pv_lds, which applies it just before PV adds to O;
//   mul_cols_unpacked  mul_cols as single-rate v_mul_f32 (packed f32 ops stall beside MFMAs);
//   qk_steps / qk_tail part of a QK's k-steps, for group B's MFMAs deferred past the barrier;
//   spread_reads_among_mfmas / spread_salu_among_mfmas / spread_vmem_among_mfmas / spread_valu_among_mfmas
//                      sched_group_barrier orders that keep LDS reads, scalar work, DMA and VALU work between
//                      MFMAs (each instruction takes one of the SIMD's 4-cycle issue slots);
//   col_max_one_trip   col_max over a column's 4 lanes in one LDS round trip (the same bits);
//   pv_lds's `during`  caller's VALU work among a head-dim tile's MFMAs (group B's row sums, the lean softmax);
#pragma once
#include "gfx942/mha_config.hpp"
#include "moonmath/tile.hpp"

namespace mha {

typedef mm::Mfma16x16x16Bf16 S16;
typedef mm::FragA<S16> FragA;
typedef mm::FragB<S16> FragB;
typedef mm::FragC<S16> FragC;
typedef mm::ColVec<S16> ColVec;

constexpr uint32_t kHeadDim = moonmath::mha::config::kHeadDim;
constexpr uint32_t kRowBytes = kHeadDim * 2;
constexpr uint32_t kKvBlock = moonmath::mha::config::kKvBlock;  // kv rows per step of the main loop
constexpr uint32_t kKvSub = kKvBlock / 16;                        // 16-row kv subtiles per block
constexpr uint32_t kDTiles = kHeadDim / 16;                       // 16-wide head-dim tiles of O
constexpr uint32_t kKSteps = kHeadDim / 16;                       // k-steps of QK
constexpr uint32_t kVtBlockBytes = kKvBlock * kRowBytes;          // one V_t block: 16 chunks of 1 KB
// log2(e) / sqrt(128): scores go to the log2 domain with one fma.
constexpr float kScaleLog2e = 1.4426950408889634f * 0.088388347648318440f;

// The sizes of head dim D (128: the constants above; 64: Q, O, K rows and V_t blocks halve; 96: three quarters).
// The k-permuted loads work in 32-dim groups (one b128 per lane: d = 32 j + 8 quad + 0..7) and V_t in 16-column
// chunks. The K stage's XOR swizzle needs rows of a multiple of 8 chunks: a 192-byte row of D = 96 sits in a
// 256-byte LDS row (the 4 pad chunks take the DMA's spill-over into the next row and are never read).
template <uint32_t D>
struct HeadDim {
  static_assert(D == 64 || D == 96 || D == 128, "head dims 64, 96 and 128");
  static constexpr uint32_t kRowBytes = D * 2;
  static constexpr uint32_t kKRowBytes = D == 96 ? 256 : kRowBytes;  // one K row in an LDS stage
  static constexpr uint32_t kDTiles = D / 16;  // 16-wide head-dim tiles of O
  static constexpr uint32_t kKSteps = D / 16;  // k-steps of QK
  static constexpr uint32_t kVtBlockBytes = kKvBlock * kRowBytes;  // D / 8 chunks of 1 KB
  static constexpr uint32_t kKBlockBytes = kKvBlock * kKRowBytes;
  static constexpr uint32_t kLdsV = 2 * kKBlockBytes;  // V_t stages start after the two K stages
  static constexpr uint32_t kLdsBytes = 2 * (kKBlockBytes + kVtBlockBytes);
  static constexpr float kScaleLog2e = D == 128 ? mha::kScaleLog2e  // log2 e / sqrt(D)
                                      : 1.4426950408889634f * (D == 64 ? 0.125f : 0.10206207261596575f);
};
constexpr float kMaskedScore = -3.4028234663852886e38f;  // -FLT_MAX: exp2 of it is 0, never NaN

MM_DEVICE uint32_t quad_id() { return mm::lane_id() >> 4; }
MM_DEVICE uint32_t col_id() { return mm::lane_id() & 15u; }

// The k-permuted operand load: rows row0 + (lane & 15), 4 b128 per lane -> 8 k-steps (see the header).
// Rows beyond the buffer's num_records read as 0.
template <class Frag, uint32_t N>
MM_DEVICE void load_rows16_kpair(Frag (&f)[N], mm::buffer_rsrc r, uint32_t row0, uint32_t row_stride) {
  const uint32_t off = (row0 + col_id()) * row_stride + quad_id() * 16u;
#pragma unroll
  for (uint32_t j = 0; j < N / 2; ++j) {
    const mm::u32x4 w = mm::buffer_load_b128(r, off + 64u * j);
    f[2 * j].w = mm::u32x2{w.x, w.y};
    f[2 * j + 1].w = mm::u32x2{w.z, w.w};
  }
}

// S^T (16 kv x 16 q) = K Q^T over the full head dim: N = D / 16 MFMAs.
template <uint32_t N>
MM_DEVICE FragC qk_tile(const FragA (&k)[N], const FragB (&q)[N]) {
  FragC s = mm::zeros<S16>();
#pragma unroll
  for (uint32_t j = 0; j < N; ++j) mm::mma(s, k[j], q[j], s);
  return s;
}

// s + the k-steps [j0, j1) of qk_tile (the same MFMAs in the same order: split, the sum is bit for bit the same).
template <uint32_t j0, uint32_t j1, uint32_t N>
MM_DEVICE FragC qk_steps(FragC s, const FragA (&k)[N], const FragB (&q)[N]) {
#pragma unroll
  for (uint32_t j = j0; j < j1; ++j) mm::mma(s, k[j], q[j], s);
  return s;
}

// A point nothing moves across: an empty asm with a memory clobber (no memory access moves across it;
// sched_barrier alone does not stop LLVM's IR-level sinking of loads to their use) plus a machine-
// scheduler barrier (no instruction, MFMAs included, moves across it). Emits no instruction.
MM_DEVICE void order_point() {
  asm volatile("" ::: "memory");
  mm::sched_barrier();
}

// In the scheduling region this closes: one LDS read after every `per` MFMAs, `reads` times. The reads of
// the next-but-one K subtile reuse the registers the region's MFMAs read, so the scheduler otherwise puts them
// all after the last MFMA, and four reads in a row outlast the previous MFMA (a 4-cycle hole per subtile).
template <uint32_t reads, uint32_t per>
MM_DEVICE void spread_reads_among_mfmas() {
#pragma unroll
  for (uint32_t j = 0; j < reads; ++j) {
    __builtin_amdgcn_sched_group_barrier(0x008, per, 0);  // MFMA
    __builtin_amdgcn_sched_group_barrier(0x100, 1, 0);    // DS read
  }
}

// `per` instructions of class kMask (a sched_group_barrier mask) after each of `n` MFMAs of the scheduling region,
// one pipeline per kSync id.
template <int kMask, uint32_t n, uint32_t per, int kSync>
MM_DEVICE void interleave_with_mfmas() {
#pragma unroll
  for (uint32_t j = 0; j < n; ++j) {
    __builtin_amdgcn_sched_group_barrier(0x008, 1, kSync);    // MFMA
    __builtin_amdgcn_sched_group_barrier(kMask, per, kSync);  // the other class
  }
}

// In the scheduling region this closes: one SALU instruction after each of the last `n` MFMAs (a SIMD issues
// one instruction per 4 cycles, so scalar work left behind the last MFMA delays what follows it).
template <uint32_t n>
MM_DEVICE void spread_salu_among_mfmas() { interleave_with_mfmas<0x004, n, 1, 1>(); }

// In the scheduling region this closes: `per` VALU instructions after each of its `n` MFMAs, so that no MFMA waits
// behind a run of VALU work the partner wave's exponentials hold up (a VALU op waits for the pipe, an MFMA behind
// it in program order waits with it).
template <uint32_t n, uint32_t per>
MM_DEVICE void spread_valu_among_mfmas() { interleave_with_mfmas<0x002, n, per, 3>(); }

// In the scheduling region this opens: `per` VMEM instructions after each of the first `n` MFMAs.
template <uint32_t n, uint32_t per>
MM_DEVICE void spread_vmem_among_mfmas() { interleave_with_mfmas<0x010, n, per, 2>(); }

// ---- LDS stages (the CTA's shared copy of one kv block) --------------------------------------------
// Two stages, each one K block (64 rows x 256 B, 16-byte chunk c of row r at chunk c ^ (r % 8): the 16
// rows x one chunk of a fragment read hit 8 distinct 16-byte bank groups per 8 lanes) and one V_t block
// (16 KB, byte for byte as mha_v_transpose wrote it: chunk-major, lane-minor, read conflict-free).
typedef mm::XorLds<kRowBytes> KLayout;
template <uint32_t D>
using KLayoutOf = mm::XorLds<HeadDim<D>::kKRowBytes>;  // head dim 64: rows of 8 chunks, the same XOR
constexpr uint32_t kKBlockBytes = kKvBlock * kRowBytes;  // 16 KB
constexpr uint32_t kLdsV = 2 * kKBlockBytes;             // V_t stages start after the two K stages
constexpr uint32_t kLdsBytes = 2 * (kKBlockBytes + kVtBlockBytes);
constexpr uint32_t kDmaWaves = moonmath::mha::config::kWaves / 2;  // group B copies the blocks (mha_fwd.hip)
constexpr uint32_t kDmaRowsPerWave = kKvBlock / kDmaWaves;          // K rows each copying wave moves

// Copying wave `wave`'s share of K block kb (rows kb*64 .. of a head, `k_bytes` its byte extent from
// row 0) into stage st: kDmaRowsPerWave rows, one 256-byte row per direct-to-LDS dword load. The
// descriptor starts at the block, so rows >= Skv are out of range and read 0. Lane L of row r fetches
// the logical bytes of its physical LDS position (KLayout::byte_of): a lane offset that depends on r % 8
// only; the row offset goes in soffset (scalar), so the loop costs no vector arithmetic.
// Head dim 64: one load moves two 128-byte rows (lanes 32..63 the second, one row_stride further: a lane
// offset computed once). Head dim 96: 256 bytes per load as for 128, into the padded LDS row (lanes 48..63 read
// the next row's first bytes, or 0 past the head, into the pad).
template <uint32_t D = 128>
MM_DEVICE void dma_k(uint8_t* lds, const char* k_head, uint32_t k_bytes, uint32_t kb, uint32_t row_stride,
                     uint32_t st, uint32_t wave) {
  typedef HeadDim<D> HD;
  constexpr uint32_t kRowsPerLoad = 256 / HD::kKRowBytes;
  const uint32_t start = kb * kKvBlock * row_stride, row0 = wave * kDmaRowsPerWave;
  const mm::buffer_rsrc r = mm::make_buffer(k_head + start, k_bytes - start);
  uint8_t* dst = lds + st * HD::kKBlockBytes + row0 * HD::kKRowBytes;
  const uint32_t lane_row = kRowsPerLoad == 1 ? 0u : mm::lane_id() / 32u;
  const uint32_t lane_byte = kRowsPerLoad == 1 ? mm::lane_id() * 4u : mm::lane_id() % 32u * 4u;  // LDS bytes
  const uint32_t lane_off = lane_row * row_stride;
#pragma unroll
  for (uint32_t t = 0; t < kDmaRowsPerWave; t += kRowsPerLoad) {
    const uint32_t byte = KLayoutOf<D>::byte_of(row0 + t + lane_row, lane_byte);
    mm::buffer_load_to_lds<4>(r, dst + t * HD::kKRowBytes, kRowsPerLoad == 1 ? byte : byte + lane_off,
                              (row0 + t) * row_stride);
  }
}

// Pieces 0 .. N-1 of 256 bytes at instruction offsets 256 * piece (one M0, one lane offset).
template <uint32_t N>
MM_DEVICE void dma_linear_pieces(mm::buffer_rsrc r, uint8_t* dst, uint32_t lane_off, uint32_t soff) {
  if constexpr (N > 0) {
    dma_linear_pieces<N - 1>(r, dst, lane_off, soff);
    mm::buffer_load_to_lds_at<4, (N - 1) * 256>(r, dst, lane_off, soff);
  }
}

// Copying wave `wave`'s 4 KB of V_t block kb into stage st (linear: one lane offset, one M0, the piece
// in the instruction offset; V_t rows >= Skv are already 0).
template <uint32_t D = 128>
MM_DEVICE void dma_vt(uint8_t* lds, mm::buffer_rsrc vr, uint32_t kb, uint32_t st, uint32_t wave) {
  typedef HeadDim<D> HD;
  constexpr uint32_t kPerWave = HD::kVtBlockBytes / kDmaWaves;
  constexpr uint32_t kRange = kPerWave < 4096 ? kPerWave : 4096;  // bytes under one M0 (12-bit offsets)
  static_assert(kPerWave % kRange == 0 && kRange % 256 == 0, "whole instruction-offset ranges");
  const uint32_t lane_off = mm::lane_id() * 4u;
#pragma unroll
  for (uint32_t c = 0; c < kPerWave / kRange; ++c) {
    uint8_t* dst = lds + HD::kLdsV + st * HD::kVtBlockBytes + wave * kPerWave + c * kRange;
    const uint32_t soff = kb * HD::kVtBlockBytes + wave * kPerWave + c * kRange;
    dma_linear_pieces<kRange / 256>(vr, dst, lane_off, soff);
  }
}

// One 16-row kv subtile of K from an LDS stage as the A operands of the 8 k-steps: the k-permuted rows
// of load_rows16_kpair, 4 ds_read_b128.
template <uint32_t N>
MM_DEVICE void lds_load_k_subtile(FragA (&kf)[N], const uint8_t* kst, uint32_t t) {
#pragma unroll
  for (uint32_t j = 0; j < N / 2; ++j) {
    const mm::u32x4 w = mm::lds_read_b128(kst, KLayoutOf<16 * N>::offset(16u * t + col_id(), 64u * j + 16u * quad_id()));
    kf[2 * j].w = mm::u32x2{w.x, w.y};
    kf[2 * j + 1].w = mm::u32x2{w.z, w.w};
  }
}

// S^T of the wave's q tiles against the K block of an LDS stage, K subtile 0's operands already in
// kf[0] (read by pv_lds during PV's last tile, or by the caller): per 16-row kv subtile t, 4
// ds_read_b128 feed 8 MFMAs of every q tile; subtile t + 1 is read while subtile t's MFMAs run (two
// register sets, pinned by order_point: LLVM would otherwise sink the reads to their use).
// kTail > 0: the last K subtile's last kTail k-steps are left for qk_tail (its operands are read here all the same).
template <uint32_t T, uint32_t N, uint32_t kTail = 0>
MM_DEVICE void qk_lds(FragC (&s)[T][kKvSub], const uint8_t* kst, const FragB (&q)[T][N], FragA (&kf)[2][N]) {
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t) {
    if (t + 1 < kKvSub) lds_load_k_subtile(kf[(t + 1) & 1], kst, t + 1);
    if (t >= 1 && t + 1 < kKvSub) spread_reads_among_mfmas<N / 2, 2 * T>();  // subtile t - 1's MFMAs
    if (t + 1 < kKvSub || kTail < N) order_point();  // (none before a subtile left whole to qk_tail)
    constexpr uint32_t kSteps = N - kTail;
#pragma unroll
    for (uint32_t i = 0; i < T; ++i) {
      if (t + 1 < kKvSub || kTail == 0) s[i][t] = qk_tile(kf[t & 1], q[i]);
      else if (kTail < N) s[i][t] = qk_steps<0, kSteps>(mm::zeros<S16>(), kf[t & 1], q[i]);
    }
  }
}

// The last kTail k-steps of the last K subtile of a QK that qk_lds<T, N, kTail> began: the operands are already
// in kf, so they need no LDS (group B runs them after the barrier, while group A waits for its first reads).
template <uint32_t kTail, uint32_t T, uint32_t N>
MM_DEVICE void qk_tail(FragC (&s)[T][kKvSub], const FragB (&q)[T][N], FragA (&kf)[2][N]) {
  constexpr uint32_t t = kKvSub - 1;
#pragma unroll
  for (uint32_t i = 0; i < T; ++i)
    s[i][t] = kTail == N ? qk_tile(kf[t & 1], q[i]) : qk_steps<N - kTail, N>(s[i][t], kf[t & 1], q[i]);
}

// Scores of kv rows >= skv (in the last, partial block) become -FLT_MAX.
MM_DEVICE void mask_kv_tail(FragC (&s)[kKvSub], uint32_t kv0, uint32_t skv) {
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t) {
    const int first_dead = (int)skv - (int)(kv0 + 16u * t);
    mm::apply(s[t], [=](float x, int row, int) { return row < first_dead ? x : kMaskedScore; });
  }
}

// Sliding window / causal mask of one q tile's block (feature kernels): q row i (this lane's column) keeps
// kv j iff i + lo_shift <= j <= i + hi_shift and j < skv; every other score becomes -inf (not -FLT_MAX: a
// row with no key of its window yet must get p = 0, which the softmax's guarded max gives; see update).
MM_DEVICE void mask_window(FragC (&s)[kKvSub], int kv0, int q_row0, int lo_shift, int hi_shift, int skv) {
  const int i = q_row0 + (int)col_id();
  const int first = i + lo_shift - kv0, last = (i + hi_shift < skv - 1 ? i + hi_shift : skv - 1) - kv0;
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t) {
    const int j0 = 16 * (int)t;
    mm::apply(s[t], [=](float x, int row, int) {
      return j0 + row >= first && j0 + row <= last ? x : -__builtin_inff();
    });
  }
}

// o *= x (one factor per column, i.e. per lane) as single-rate v_mul_f32. LLVM would pair the products
// into v_pk_mul_f32, which cannot issue while the SIMD's other wave keeps the matrix pipe busy (a packed
// f32 op waits passes + 2 issue slots after an XDL MFMA; the model, after the CDNA3 co-execution rules):
// the rescale then stalls until that wave's MFMA phase ends.
MM_DEVICE void mul_cols_unpacked(FragC& c, float x) {
#pragma unroll
  for (int r = 0; r < S16::kCRegs; ++r) asm("v_mul_f32 %0, %1, %2" : "=v"(c.v[r]) : "v"(c.v[r]), "v"(x));
}

// The in-lane parts of col_max / col_sum over the 4 kv subtiles (the lane's 16 kv rows of its column).
MM_DEVICE float lane_col_max(const FragC (&s)[kKvSub]) {
  float v = s[0].v[0];
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t)
#pragma unroll
    for (int r = (t == 0); r < S16::kCRegs; ++r) v = __builtin_fmaxf(v, s[t].v[r]);
  return v;
}
MM_DEVICE float lane_col_sum(const FragC (&s)[kKvSub]) {
  float v = 0.f;
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t)
#pragma unroll
    for (int r = 0; r < S16::kCRegs; ++r) v += s[t].v[r];
  return v;
}

// The max of v over the 4 lanes of its column (lanes col, col + 16, col + 32, col + 48) in one LDS round trip: the
// three partners' values fetched together (one ds_swizzle, two ds_bpermute), where col_max's tree waits for its
// xor-16 step before its xor-32 step. The same expression, fmax(fmax(v, v^16), fmax(v^32, v^48)), as the tree
// (its xor-32 partner holds fmax(v^32, v^48)), so the same bits.
MM_DEVICE float col_max_one_trip(float v) {
  const uint32_t u = __builtin_bit_cast(uint32_t, v);
  const float x16 = __builtin_bit_cast(float, mm::swizzle_xor<16>(u));
  const float x32 = __builtin_bit_cast(float, mm::bpermute(u, mm::lane_id() ^ 32u));
  const float x48 = __builtin_bit_cast(float, mm::bpermute(u, mm::lane_id() ^ 48u));
  return __builtin_fmaxf(__builtin_fmaxf(v, x16), __builtin_fmaxf(x32, x48));
}

// Soft-cap (Gemma 2) of one block's raw scores: s -> tanh(s * scale / cap) = 1 - 2 / (1 + exp2(s * pre2)),
// pre2 = 2 * scale * log2 e / cap; the softmax then scales by cap * log2 e (exp2 of +-inf gives +-1 exactly).
MM_DEVICE void softcap_scores(FragC (&s)[kKvSub], float pre2) {
#pragma unroll
  for (uint32_t t = 0; t < kKvSub; ++t)
    mm::apply(s[t], [=](float x, int, int) { return __builtin_fmaf(-2.f, mm::rcp(1.f + mm::exp2(x * pre2)), 1.f); });
}

// Attention sink (gpt-oss) of one q tile, log2 domain: sink2 joins the row's denominator as a logit with no
// value. M = max(m, sink2), O and l rescaled by exp2(m - M), l += exp2(sink2 - M); (m, l) become M and the new l.
template <uint32_t N>
MM_DEVICE void add_sink(FragC (&o)[N], float& m, float& l, float sink2) {
  const float big_m = __builtin_fmaxf(m, sink2), f = mm::exp2(m - big_m);
  l = __builtin_fmaf(l, f, mm::exp2(sink2 - big_m));
  m = big_m;
  const ColVec fc = {f};
#pragma unroll
  for (uint32_t dt = 0; dt < N; ++dt) mm::mul_cols(o[dt], fc);
}

// bf16 bits of P in the kernel's rounding mode, no NaN test (see the header).
template <mm::Round R>
MM_DEVICE uint32_t round_bits_raw(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if constexpr (R == mm::Round::RTNE) u += 0x7FFFu + ((u >> 16) & 1u);
  else if constexpr (R == mm::Round::RTNA) u += 0x8000u;
  return u;
}
template <mm::Round R>
MM_DEVICE mm::PackedC<S16> pack_p(const FragC& c) {
  mm::PackedC<S16> p;
#pragma unroll
  for (int i = 0; i < S16::kCRegs / 2; ++i)
    p.w[i] = __builtin_amdgcn_perm(round_bits_raw<R>(c.v[2 * i + 1]), round_bits_raw<R>(c.v[2 * i]), 0x07060302u);
  return p;
}

// Online softmax of one q tile (a column of S^T per lane) in the log2 domain, with the gated max.
// l is the lane's partial sum (its 16 kv rows of each block); sum_l() reduces it across the 4 quads.
struct GatedColSoftmax {
  float m = -__builtin_inff();
  float l = 0.f;
  float r = 1.f;  // the factor O owes for the latest block (pv_lds applies it before PV adds to O)
  // s: scores of one kv block -> probabilities exp2(s * c - m) (fp32); r = the factor O owes, 1 when
  // m did not move (pv_lds multiplies O by it before adding this block's P V: the eager softmax's
  // arithmetic, moved into the MFMA phase, where the wave's own VALU slots between MFMAs are free).
  // The gate is decided in-lane, before any cross-lane step: a column's max grows iff some lane's
  // in-lane max (scaled) exceeds m, so the cross-lane max (two LDS round trips) and the exp2 of the
  // factor run only when some lane of the wave saw a new max; the result is bit for bit the eager max's.
  // scale_log2: the logit factor in the log2 domain (kScaleLog2e; cap * log2 e under a soft-cap).
  // kEmptyRows (window / causal): a column may have seen only -inf scores (m = -inf, l = 0, O = 0); it then
  // subtracts 0 instead of m, so its p are exp2(-inf) = 0, not NaN, and its factor is 0.
  // kSum = false: l += the block's sum is left to the caller (add_subtile_sum per subtile, then add_block_sum), so
  // that the adds can sit in the VALU slots of the wave's MFMA phase; the same adds in the same order.
  // kOneTrip: the cross-lane max by col_max_one_trip (one more VGPR: the xor-48 lane address), else col_max's tree.
  template <bool kEmptyRows = false, bool kSum = true, bool kOneTrip = false>
  MM_DEVICE void update(FragC (&s)[kKvSub], bool first, float scale_log2 = kScaleLog2e) {
    const float lane_max = lane_col_max(s);
    r = 1.f;
    if (first || __builtin_amdgcn_ballot_w64(lane_max * scale_log2 > m) != 0) {
      const float m_new = __builtin_fmaxf(m, (kOneTrip ? col_max_one_trip(lane_max)
                                                        : mm::col_max(mm::filled<S16>(lane_max)).v) * scale_log2);
      if (!first) {  // (kEmptyRows: a still-empty column, m = m_new = -inf, owes 0, not exp2(NaN))
        const float f = kEmptyRows && m == -__builtin_inff() ? 0.f : mm::exp2(m - m_new);
        l *= f;
        r = f;
      }
      m = m_new;
    }
    const float m_use = kEmptyRows && m == -__builtin_inff() ? 0.f : m;
#pragma unroll
    for (uint32_t t = 0; t < kKvSub; ++t) {
      mm::apply(s[t], [=](float x, int, int) { return __builtin_fmaf(x, scale_log2, -m_use); });
      mm::exp2(s[t]);
    }
    if constexpr (kSum) l += lane_col_sum(s);
  }
  // lane_col_sum split by subtile: acc = 0, then subtile t = 0 .. kKvSub - 1 added in turn, then l += acc.
  // (Single-rate v_add_f32, as mul_cols_unpacked: beside the other q tile's chain LLVM pairs them into v_pk_add_f32,
  // which waits out the partner wave's MFMAs.)
  MM_DEVICE static void add_subtile_sum(float& acc, const FragC& st) {
#pragma unroll
    for (int r = 0; r < S16::kCRegs; ++r) asm("v_add_f32 %0, %1, %2" : "=v"(acc) : "v"(acc), "v"(st.v[r]));
  }
  MM_DEVICE void add_block_sum(float acc) { asm("v_add_f32 %0, %1, %2" : "=v"(l) : "v"(l), "v"(acc)); }
  // The row sum: the lane partials of the 4 quads added (col_sum of a fragment holding l once; once per
  // kernel, so its three adds of zero cost nothing).
  MM_DEVICE float sum_l() const {
    FragC c = mm::zeros<S16>();
    c.v[0] = l;
    return mm::col_sum(c).v;
  }
};

// The A operands V^T of head-dim tile dt for the 4 kv subtiles from an LDS V_t stage: 2 ds_read_b128.
// Chunk c = 2*dt + pair of a V_t block holds, for lane (quad, col), V[kv = 16*(2*pair + h) + 4*quad + e]
// [hd = 16*dt + col] at element 4*h + e (mha_v_transpose writes it).
MM_DEVICE void lds_load_vt_dtile(FragA (&v)[kKvSub], const uint8_t* vst, uint32_t dt) {
#pragma unroll
  for (uint32_t h = 0; h < 2; ++h) {
    const mm::u32x4 w = mm::lds_read_b128(vst, (2u * dt + h) * 1024u + mm::lane_id() * 16u);
    v[2 * h].w = mm::u32x2{w.x, w.y};
    v[2 * h + 1].w = mm::u32x2{w.z, w.w};
  }
}

// O^T += V^T P^T for the wave's q tiles over the V_t block of an LDS stage, P^T already packed (the
// B operands): per head-dim tile, 2 ds_read_b128 (4 A operands) feed 4 MFMAs of every q tile. Tile
// dt + 1 is read while tile dt's MFMAs run, and during the last tile the first K subtile of the next
// QK (stage kst) is read into k0: no MFMA of the phase waits for an LDS read it could have issued earlier.
// O's softmax rescale r (one factor per q tile, 1 when its max did not move) is applied here, one
// head-dim tile ahead of its MFMAs, in the VALU slots between this wave's own MFMAs: the rescale then
// costs every wave the same 64 v_mul_f32 per block instead of a burst in the softmax of some waves,
// which delayed the barrier for all (modeled, RTNE: 75.0 -> 70.4 cycles per key).
// kRaise: the caller entered at a lower priority; the wave goes to 3 once its first tile's MFMAs are issued.
// during(dt): VALU work of the caller placed among tile dt's MFMAs (group B's deferred row sums).
struct NoWork {
  MM_DEVICE void operator()(uint32_t) const {}
};
template <bool kRaise = false, uint32_t T, uint32_t kDTiles, uint32_t N, class During = NoWork>
MM_DEVICE void pv_lds(FragC (&o)[T][kDTiles], const uint8_t* vst, const FragB (&pb)[T][kKvSub],
                      const uint8_t* kst, FragA (&k0)[N], const float (&r)[T], During during = {}) {
  FragA v[2][kKvSub];
  lds_load_vt_dtile(v[0], vst, 0);
#pragma unroll
  for (uint32_t i = 0; i < T; ++i) mul_cols_unpacked(o[i][0], r[i]);
#pragma unroll
  for (uint32_t dt = 0; dt < kDTiles; ++dt) {
    if (dt + 1 < kDTiles) {
      lds_load_vt_dtile(v[(dt + 1) & 1], vst, dt + 1);
#pragma unroll
      for (uint32_t i = 0; i < T; ++i) mul_cols_unpacked(o[i][dt + 1], r[i]);
    } else {
      lds_load_k_subtile(k0, kst, 0);
    }
    order_point();
    if (kRaise && dt == 1) mm::set_priority<3>();  // (here, not after tile 0: the scheduler keeps the
                                                   // rescale of tile 1 among tile 0's MFMAs)
    during(dt);
#pragma unroll
    for (uint32_t i = 0; i < T; ++i)
#pragma unroll
      for (uint32_t t = 0; t < kKvSub; ++t) mm::mma(o[i][dt], v[dt & 1][t], pb[i][t], o[i][dt]);
    if constexpr (!__is_same(During, NoWork)) spread_valu_among_mfmas<T * kKvSub, 2>();
  }
}

// Output pair packing: RTNE/RTNA with NaN -> 0x7FFF (numerics.hpp), RTZ plain truncation like AITER's
// RTZ kernel (NaN stays a NaN with its truncated payload and sign).
template <mm::Round R>
MM_DEVICE uint32_t pack_o(float lo, float hi) {
  if constexpr (R == mm::Round::RTZ) return __builtin_amdgcn_perm(__builtin_bit_cast(uint32_t, hi),
                                                                  __builtin_bit_cast(uint32_t, lo), 0x07060302u);
  else return mm::pack_bf16x2<R>(lo, hi);
}

// Normalise and store one q tile's O rows (bf16 packed by pack_o, one b64 per lane and d-tile). Rows
// beyond the buffer are dropped by the descriptor. inv = 0 for an all-zero row sum.
template <mm::Round R, uint32_t kDTiles>
MM_DEVICE void store_o_tile(FragC (&o)[kDTiles], float l, mm::buffer_rsrc r, uint32_t row0, uint32_t row_stride) {
  const ColVec inv = {l == 0.f ? 0.f : mm::rcp(l)};
#pragma unroll
  for (uint32_t dt = 0; dt < kDTiles; ++dt) {
    mm::mul_cols(o[dt], inv);
    if constexpr (R == mm::Round::RTZ) {
      const mm::PackedC<S16> p = pack_p<R>(o[dt]);  // truncation: the raw pack is the output rule
      mm::buffer_store_b64(mm::u32x2{p.w[0], p.w[1]}, r, (row0 + col_id()) * row_stride + dt * 32u + quad_id() * 8u);
    } else {
      mm::store_ct_bf16<R>(o[dt], r, row0 * row_stride + dt * 32u, row_stride);
    }
  }
}

// The unnormalised fp32 O^T of one q tile into a [rows][D] partial (rows of the CTA; D = 16 kDTiles).
template <uint32_t kDTiles>
MM_DEVICE void store_o_partial(const FragC (&o)[kDTiles], mm::buffer_rsrc r, uint32_t cta_row0) {
#pragma unroll
  for (uint32_t dt = 0; dt < kDTiles; ++dt)
    mm::buffer_store_b128(__builtin_bit_cast(mm::u32x4, o[dt].v), r,
                          ((cta_row0 + col_id()) * 16u * kDTiles + 16u * dt + 4u * quad_id()) * 4u);
}

using moonmath::mha::config::xcd_contiguous;  // the chiplet swizzle (mha_config.hpp, shared with the host's dense_order)

}  // namespace mha
