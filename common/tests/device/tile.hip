// Device-side tests of moonmath/tile.hpp: each kernel drives one part of the tile layer for one MFMA
// shape and writes what it saw; common/tests/test_device_tile.py checks it against the MFMA layout
// facts and torch. One wave (64 lanes) per launch.
#include "moonmath/tile.hpp"

using namespace mm;

// Per lane: a_row, b_col, c_col, then ab_k(lane, e) for every element, then c_row(lane, r).
template <class S> MM_DEVICE void layout_of(int32_t* out) {
  const int lane = (int)lane_id();
  constexpr int kW = 3 + S::kAbElems + S::kCRegs;
  int32_t* o = out + lane * kW;
  o[0] = S::a_row(lane);
  o[1] = S::b_col(lane);
  o[2] = S::c_col(lane);
  for (int e = 0; e < S::kAbElems; ++e) o[3 + e] = S::ab_k(lane, e);
  for (int r = 0; r < S::kCRegs; ++r) o[3 + S::kAbElems + r] = S::c_row(lane, r);
}

// load_a / load_b from row-major code tiles (A: M x K, B^T: N x K); the raw words of each lane.
template <class S> MM_DEVICE void load_words(const uint8_t* a, const uint8_t* bt, uint32_t* out_a, uint32_t* out_b) {
  constexpr uint32_t kRow = S::K * S::kElemBits / 8;
  FragA<S> fa;
  FragB<S> fb;
  load_a(fa, make_buffer(a, S::M * kRow), 0, kRow);
  load_b(fb, make_buffer(bt, S::N * kRow), 0, kRow);
  const uint32_t lane = lane_id();
  for (int w = 0; w < S::kAbWords; ++w) {
    out_a[lane * S::kAbWords + w] = fa.w[w];
    out_b[lane * S::kAbWords + w] = fb.w[w];
  }
}

// D = A * B + C through load_a / load_b / load_c / mma / store_c (fp32 C/D row-major M x N).
template <class S> MM_DEVICE void mma_tile(const uint8_t* a, const uint8_t* bt, const float* c, float* d) {
  constexpr uint32_t kRow = S::K * S::kElemBits / 8, kCRow = S::N * 4;
  FragA<S> fa;
  FragB<S> fb;
  FragC<S> acc;
  load_a(fa, make_buffer(a, S::M * kRow), 0, kRow);
  load_b(fb, make_buffer(bt, S::N * kRow), 0, kRow);
  load_c(acc, make_buffer(c, S::M * kCRow), 0, kCRow);
  mma(acc, fa, fb, acc);
  store_c(acc, make_buffer(d, S::M * kCRow), 0, kCRow);
}

// Row/column reductions of one C fragment (x) and of two side by side / stacked (x, y).
template <class S> MM_DEVICE void reductions(const float* x, const float* y, float* rows, float* cols) {
  constexpr uint32_t kCRow = S::N * 4;
  FragC<S> c[2];
  load_c(c[0], make_buffer(x, S::M * kCRow), 0, kCRow);
  load_c(c[1], make_buffer(y, S::M * kCRow), 0, kCRow);
  const RowVec<S> rv[4] = {row_max(c[0]), row_sum(c[0]), reduce_rows<S, 2>(c, MaxOp{}), reduce_rows<S, 2>(c, SumOp{})};
  const ColVec<S> cv[4] = {col_max(c[0]), col_sum(c[0]), reduce_cols<S, 2>(c, MaxOp{}), reduce_cols<S, 2>(c, SumOp{})};
  const uint32_t lane = lane_id();
  for (int q = 0; q < 4; ++q) {
    for (int r = 0; r < S::kCRegs; ++r) rows[(q * 64 + lane) * S::kCRegs + r] = rv[q].v[r];
    cols[q * 64 + lane] = cv[q].v;
  }
}

// Broadcasts and maps: out[0..5] = x*row, x-row, x*col, x-col, exp2(x), x*0.75; row/col vectors
// are gathered by the layout helpers (rowv[c_row], colv[c_col]).
template <class S> MM_DEVICE void maps(const float* x, const float* rowv, const float* colv, float* out) {
  constexpr uint32_t kCRow = S::N * 4, kTile = S::M * S::N * 4;
  const int lane = (int)lane_id();
  FragC<S> c;
  const buffer_rsrc rx = make_buffer(x, kTile), ro = make_buffer(out, 6 * kTile);
  load_c(c, rx, 0, kCRow);
  RowVec<S> rv;
  for (int r = 0; r < S::kCRegs; ++r) rv.v[r] = rowv[S::c_row(lane, r)];
  const ColVec<S> cv{colv[S::c_col(lane)]};
  FragC<S> t[6] = {c, c, c, c, c, c};
  mul_rows(t[0], rv);
  sub_rows(t[1], rv);
  mul_cols(t[2], cv);
  sub_cols(t[3], cv);
  exp2(t[4]);
  scale(t[5], 0.75f);
  for (int q = 0; q < 6; ++q) store_c(t[q], ro, q * kTile, kCRow);
}

// pack_bf16 in the three modes (raw words per lane) and store_ct_bf16 (RTNE) of the transpose.
template <class S> MM_DEVICE void packs(const float* x, uint32_t* words, uint16_t* ct) {
  constexpr uint32_t kCRow = S::N * 4;
  constexpr int kW = S::kCRegs / 2;
  FragC<S> c;
  load_c(c, make_buffer(x, S::M * kCRow), 0, kCRow);
  const PackedC<S> p[3] = {pack_bf16<Round::RTNE>(c), pack_bf16<Round::RTNA>(c), pack_bf16<Round::RTZ>(c)};
  const uint32_t lane = lane_id();
  for (int q = 0; q < 3; ++q)
    for (int w = 0; w < kW; ++w) words[(q * 64 + lane) * kW + w] = p[q].w[w];
  store_ct_bf16<Round::RTNE>(c, make_buffer(ct, S::M * S::N * 2), 0, S::M * 2);
}

// apply(): c[i][j] = v + 1000 i + j (checks the (row, col) apply() hands to the functor).
template <class S> MM_DEVICE void apply_ids(float* out) {
  FragC<S> c = zeros<S>();
  apply(c, [](float v, int i, int j) { return v + 1000.f * i + j; });
  store_c(c, make_buffer(out, S::M * S::N * 4), 0, S::N * 4);
}

#define SHAPE_KERNELS(NAME, S)                                                                                  \
  MM_KERNEL void t_layout_##NAME(int32_t* out) { layout_of<S>(out); }                                           \
  MM_KERNEL void t_load_##NAME(const uint8_t* a, const uint8_t* bt, uint32_t* oa, uint32_t* ob) {              \
    load_words<S>(a, bt, oa, ob);                                                                               \
  }                                                                                                             \
  MM_KERNEL void t_mma_##NAME(const uint8_t* a, const uint8_t* bt, const float* c, float* d) { mma_tile<S>(a, bt, c, d); }

#define C_KERNELS(NAME, S)                                                                                      \
  MM_KERNEL void t_reduce_##NAME(const float* x, const float* y, float* rows, float* cols) {                   \
    reductions<S>(x, y, rows, cols);                                                                            \
  }                                                                                                             \
  MM_KERNEL void t_maps_##NAME(const float* x, const float* rv, const float* cv, float* out) { maps<S>(x, rv, cv, out); } \
  MM_KERNEL void t_pack_##NAME(const float* x, uint32_t* words, uint16_t* ct) { packs<S>(x, words, ct); }       \
  MM_KERNEL void t_apply_##NAME(float* out) { apply_ids<S>(out); }

SHAPE_KERNELS(bf16_16x16x16, Mfma16x16x16Bf16)
SHAPE_KERNELS(bf16_32x32x8, Mfma32x32x8Bf16)
SHAPE_KERNELS(fp8_16x16x32, Mfma16x16x32Fp8)
SHAPE_KERNELS(fp8_32x32x16, Mfma32x32x16Fp8)
C_KERNELS(c16, Mfma16x16x16Bf16)
C_KERNELS(c32, Mfma32x32x8Bf16)
#if defined(__gfx950__)
SHAPE_KERNELS(bf16_16x16x32, Mfma16x16x32Bf16)
SHAPE_KERNELS(bf16_32x32x16, Mfma32x32x16Bf16)
#endif

// as_b_operand: D = A * bf16(X) with X an fp32 C fragment packed in place (16x16x16; and 32x32x8
// over the four k slices of a 32x32 X). a: M x M bf16 row-major, x: M x M fp32.
MM_KERNEL void t_c_as_b16(const uint16_t* a, const float* x, float* d) {
  typedef Mfma16x16x16Bf16 S;
  FragC<S> cx, acc = zeros<S>();
  load_c(cx, make_buffer(x, 16 * 64), 0, 64);
  FragA<S> fa;
  load_a(fa, make_buffer(a, 16 * 32), 0, 32);
  mma(acc, fa, as_b_operand(pack_bf16<Round::RTNE>(cx)), acc);
  store_c(acc, make_buffer(d, 16 * 64), 0, 64);
}
template <int Q> MM_DEVICE void mma_slice32(FragC<Mfma32x32x8Bf16>& acc, buffer_rsrc ra, const PackedC<Mfma32x32x8Bf16>& p) {
  FragA<Mfma32x32x8Bf16> fa;
  load_a(fa, ra, 16 * Q, 64);  // k slice Q: columns 8Q..8Q+7 of A
  mma(acc, fa, as_b_operand<Q>(p), acc);
}
MM_KERNEL void t_c_as_b32(const uint16_t* a, const float* x, float* d) {
  typedef Mfma32x32x8Bf16 S;
  FragC<S> cx, acc = zeros<S>();
  load_c(cx, make_buffer(x, 32 * 128), 0, 128);
  const PackedC<S> p = pack_bf16<Round::RTNE>(cx);
  const buffer_rsrc ra = make_buffer(a, 32 * 64);
  mma_slice32<0>(acc, ra, p);
  mma_slice32<1>(acc, ra, p);
  mma_slice32<2>(acc, ra, p);
  mma_slice32<3>(acc, ra, p);
  store_c(acc, make_buffer(d, 32 * 128), 0, 128);
}

// LDS: A (M x 64 bf16) and B^T (N x 64 bf16) staged direct-to-LDS in the XorLds layout (LaneBytes
// per lane), read back as fragments with lds_load_a/b, D = A * B over K = 64; also the raw LDS image.
template <class S, int LaneBytes, class Swz>
MM_DEVICE void lds_mma(const uint16_t* a, const uint16_t* bt, float* d, uint32_t* lds_a_image, int a_rows_valid) {
  constexpr int kRowBytes = 128;
  MM_LDS uint8_t ta[S::M * kRowBytes];
  MM_LDS uint8_t tb[S::N * kRowBytes];
  // Rows past a_rows_valid are out of range of the buffer: they stage as zeros.
  stage_tile_to_lds<Swz, S::M, LaneBytes>(ta, make_buffer(a, a_rows_valid * kRowBytes), 0, kRowBytes);
  stage_tile_to_lds<Swz, S::N, LaneBytes>(tb, make_buffer(bt, S::N * kRowBytes), 0, kRowBytes);
  wait_vmcnt<0>();
  block_sync();
  FragC<S> acc = zeros<S>();
#pragma unroll
  for (int k0 = 0; k0 < 64; k0 += S::K) {
    FragA<S> fa;
    FragB<S> fb;
    lds_load_a<Swz>(fa, ta, 0, k0);
    lds_load_b<Swz>(fb, tb, 0, k0);
    mma(acc, fa, fb, acc);
  }
  store_c(acc, make_buffer(d, S::M * S::N * 4), 0, S::N * 4);
  const uint32_t lane = lane_id();
  for (int i = lane; i < S::M * kRowBytes / 4; i += 64) lds_a_image[i] = ((const uint32_t*)ta)[i];
}
MM_KERNEL void t_lds_bf16_16x16x16(const uint16_t* a, const uint16_t* bt, float* d, uint32_t* img, int rows) {
  lds_mma<Mfma16x16x16Bf16, 4, XorLds<128>>(a, bt, d, img, rows);
}
MM_KERNEL void t_lds_bf16_32x32x8(const uint16_t* a, const uint16_t* bt, float* d, uint32_t* img, int rows) {
  lds_mma<Mfma32x32x8Bf16, 4, XorLds<128>>(a, bt, d, img, rows);
}
MM_KERNEL void t_lds_linear_16x16x16(const uint16_t* a, const uint16_t* bt, float* d, uint32_t* img, int rows) {
  lds_mma<Mfma16x16x16Bf16, 4, LinearLds<128>>(a, bt, d, img, rows);
}
#if defined(__gfx950__)
MM_KERNEL void t_lds_bf16_16x16x32(const uint16_t* a, const uint16_t* bt, float* d, uint32_t* img, int rows) {
  lds_mma<Mfma16x16x32Bf16, 16, XorLds<128>>(a, bt, d, img, rows);
}
#endif

// Online softmax over fragments. ColSoftmax: s holds n_blocks blocks of two stacked 16x16 S^T
// fragments (32 keys x 16 queries, fp32 row-major [key][query]); per query (lane % 16) the lse,
// the last block's p and every block's rescale factor. RowSoftmax: the same scores transposed
// (s_t: [query][key] per block, two fragments side by side).
MM_KERNEL void t_col_softmax(const float* s, int n_blocks, float scale_log2, float* lse, float* p_last, float* alphas) {
  typedef Mfma16x16x16Bf16 S;
  const buffer_rsrc rs = make_buffer(s, n_blocks * 32 * 64);
  ColSoftmax<S> sm;
  FragC<S> blk[2];
  const uint32_t lane = lane_id();
  for (int b = 0; b < n_blocks; ++b) {
    load_c(blk[0], rs, b * 32 * 64, 64);
    load_c(blk[1], rs, b * 32 * 64 + 16 * 64, 64);
    alphas[b * 64 + lane] = sm.update(blk, scale_log2).v;
  }
  lse[lane] = sm.lse().v;
  store_c(blk[0], make_buffer(p_last, 32 * 64), 0, 64);
  store_c(blk[1], make_buffer(p_last, 32 * 64), 16 * 64, 64);
}
MM_KERNEL void t_row_softmax(const float* s_t, int n_blocks, float scale_log2, float* lse, float* p_last) {
  typedef Mfma16x16x16Bf16 S;
  const buffer_rsrc rs = make_buffer(s_t, n_blocks * 16 * 128);
  RowSoftmax<S> sm;
  FragC<S> blk[2];
  for (int b = 0; b < n_blocks; ++b) {
    load_c(blk[0], rs, b * 16 * 128, 128);
    load_c(blk[1], rs, b * 16 * 128 + 64, 128);
    sm.update(blk, scale_log2);
  }
  const RowVec<S> l = sm.lse();
  const uint32_t lane = lane_id();
  for (int r = 0; r < 4; ++r) lse[lane * 4 + r] = l.v[r];
  store_c(blk[0], make_buffer(p_last, 16 * 128), 0, 128);
  store_c(blk[1], make_buffer(p_last, 16 * 128), 64, 128);
}

// k-major LDS fragment loads: tile [32 k][64 x] of u16 codes k*64 + x in the XorLds<128> layout;
// raw words of lds_load_a_kmajor (KNatural, KOfPackedC) and lds_load_b_kmajor, at x0 = 64 - M.
template <class S> MM_DEVICE void kmajor_words(const uint16_t* tile, uint32_t* out) {
  typedef XorLds<128> Swz;
  MM_LDS uint8_t t[32 * 128];
  const uint32_t lane = lane_id();
  for (int i = lane; i < 32 * 64; i += 64) *(uint16_t*)(t + Swz::offset(i / 64, (i % 64) * 2)) = tile[i];
  block_sync();
  FragA<S> a_nat, a_pc;
  FragB<S> b_nat;
  lds_load_a_kmajor<Swz, KNatural>(a_nat, t, 64 - S::M, 0);
  lds_load_a_kmajor<Swz, KOfPackedC>(a_pc, t, 64 - S::M, 0);
  lds_load_b_kmajor<Swz>(b_nat, t, 64 - S::N, 0);
  for (int w = 0; w < S::kAbWords; ++w) {
    out[(0 * 64 + lane) * S::kAbWords + w] = a_nat.w[w];
    out[(1 * 64 + lane) * S::kAbWords + w] = a_pc.w[w];
    out[(2 * 64 + lane) * S::kAbWords + w] = b_nat.w[w];
  }
}
MM_KERNEL void t_kmajor_bf16_16x16x16(const uint16_t* tile, uint32_t* out) { kmajor_words<Mfma16x16x16Bf16>(tile, out); }
MM_KERNEL void t_kmajor_bf16_32x32x8(const uint16_t* tile, uint32_t* out) { kmajor_words<Mfma32x32x8Bf16>(tile, out); }
#if defined(__gfx950__)
MM_KERNEL void t_kmajor_bf16_16x16x32(const uint16_t* tile, uint32_t* out) { kmajor_words<Mfma16x16x32Bf16>(tile, out); }
MM_KERNEL void t_kmajor_bf16_32x32x16(const uint16_t* tile, uint32_t* out) { kmajor_words<Mfma32x32x16Bf16>(tile, out); }
#endif

// ---------------------------------------------------------------------------------------------
// The docs/dev/tiles.md example: one 16-query tile of attention, O = softmax(Q K^T * scale) V with
// head dim D = 64, keys in blocks of 32. S^T = K Q^T puts one query in each lane (a column of C):
// the softmax state is one float per lane, and the packed P^T is already the B operand of
// O^T = V^T P^T. V blocks go to LDS by direct-to-LDS loads and come back transposed as A operands.
constexpr int kD = 64, kRowB = kD * 2;  // head dim, bytes per row of Q, K, V, O
typedef XorLds<kRowB> VLayout;

MM_DEVICE void pv(FragC<Mfma16x16x16Bf16>& ot, const void* vs, int f, const FragC<Mfma16x16x16Bf16> (&p)[2]) {
  for (int t = 0; t < 2; ++t) {  // two 16-key MFMAs
    FragA<Mfma16x16x16Bf16> vt;
    lds_load_a_kmajor<VLayout>(vt, vs, 16 * f, 16 * t);
    mma(ot, vt, as_b_operand(pack_bf16<Round::RTNE>(p[t])), ot);
  }
}
#if defined(__gfx950__)
MM_DEVICE void pv(FragC<Mfma16x16x32Bf16>& ot, const void* vs, int f, const FragC<Mfma16x16x32Bf16> (&p)[2]) {
  FragA<Mfma16x16x32Bf16> vt;  // one 32-key MFMA; V^T in the k order of the packed P^T pair
  lds_load_a_kmajor<VLayout, KOfPackedC>(vt, vs, 16 * f, 0);
  mma(ot, vt, as_b_operand(pack_bf16<Round::RTNE>(p[0]), pack_bf16<Round::RTNE>(p[1])), ot);
}
#endif

template <class S>
MM_DEVICE void attention_tile(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, int n_keys,
                              float scale_log2) {
  MM_LDS uint8_t vs[32 * kRowB];
  const buffer_rsrc rq = make_buffer(q, 16 * kRowB), rk = make_buffer(k, n_keys * kRowB);
  const buffer_rsrc rv = make_buffer(v, n_keys * kRowB), ro = make_buffer(o, 16 * kRowB);
  FragB<S> qt[kD / S::K];  // Q^T as B operands: k = d, column = query
  for (int s = 0; s < kD / S::K; ++s) load_b(qt[s], rq, s * S::K * 2, kRowB);
  FragC<S> ot[kD / 16];    // O^T: rows = d (four 16-row fragments), columns = queries
  for (auto& f : ot) f = zeros<S>();
  ColSoftmax<S> sm;
  for (int kb = 0; kb < n_keys; kb += 32) {
    stage_tile_to_lds<VLayout, 32>(vs, rv, kb * kRowB, kRowB);  // V[kb..kb+31][:] -> LDS, async
    FragC<S> st[2];                                               // S^T of keys kb + 16t + row
    for (int t = 0; t < 2; ++t) {
      st[t] = zeros<S>();
      for (int s = 0; s < kD / S::K; ++s) {
        FragA<S> kr;
        load_a(kr, rk, (kb + 16 * t) * kRowB + s * S::K * 2, kRowB);
        mma(st[t], kr, qt[s], st[t]);
      }
      const int key0 = kb + 16 * t;
      apply(st[t], [=](float x, int key, int) { return key0 + key < n_keys ? x : -__builtin_inff(); });
    }
    const ColVec<S> alpha = sm.update(st, scale_log2);  // st now holds P^T
    wait_vmcnt<0>();
    block_sync();
    for (int f = 0; f < kD / 16; ++f) {
      mul_cols(ot[f], alpha);
      pv(ot[f], vs, f, st);
    }
    block_sync();  // every wave is done with vs before the next block overwrites it
  }
  for (int f = 0; f < kD / 16; ++f) {
    mul_cols(ot[f], sm.inv_l());
    store_ct_bf16<Round::RTNE>(ot[f], ro, 16 * f * 2, kRowB);  // O[query][16f + d]
  }
}
MM_KERNEL void t_attention_16x16x16(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, int n,
                                    float scale_log2) {
  attention_tile<Mfma16x16x16Bf16>(q, k, v, o, n, scale_log2);
}
#if defined(__gfx950__)
MM_KERNEL void t_attention_16x16x32(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, int n,
                                    float scale_log2) {
  attention_tile<Mfma16x16x32Bf16>(q, k, v, o, n, scale_log2);
}
#endif

// k-blocked LDS operands: a 16 x 128 bf16 tile (rows of 256 bytes, XorLds<256, 16, 16>: the MoE
// activation slab layout) read as the 8 blocked B operands of a 128-k product; raw words, and
// D = A * B^T over the 8 MFMAs with A blocked the same way from a second tile.
MM_KERNEL void t_blocked_16x16x16(const uint16_t* a, const uint16_t* bt, uint32_t* words, float* d) {
  typedef Mfma16x16x16Bf16 S;
  typedef XorLds<256, 16, 16> Swz;
  MM_LDS uint8_t ta[16 * 256], tb[16 * 256];
  const uint32_t lane = lane_id();
  for (int i = lane; i < 16 * 128; i += 64) {
    *(uint16_t*)(ta + Swz::offset(i / 128, (i % 128) * 2)) = a[i];
    *(uint16_t*)(tb + Swz::offset(i / 128, (i % 128) * 2)) = bt[i];
  }
  block_sync();
  FragA<S> fa[8];
  FragB<S> fb[8];
  lds_load_a_blocked<Swz, 8>(fa, ta);
  lds_load_b_blocked<Swz, 8>(fb, tb);
  FragC<S> acc = zeros<S>();
  for (int m = 0; m < 8; ++m) {
    mma(acc, fa[m], fb[m], acc);
    words[(m * 64 + lane) * 2] = fb[m].w[0];
    words[(m * 64 + lane) * 2 + 1] = fb[m].w[1];
  }
  store_c(acc, make_buffer(d, 16 * 64), 0, 64);
}

#if defined(__gfx950__)
// Scaled f8f6f4 shapes: layout helpers per lane (a_row, b_col, scale_x, scale_kblock, a_k(e),
// b_k(e) for e < 32, c_row(r)); raw operand words of load_a / load_b; D = scaled A * B + C with
// operands from buffers (A: M x K row-major, B^T: N x K row-major, K/2 bytes per row for fp4)
// and scales from [M][K/32] / [N][K/32] byte matrices.
template <class S> MM_DEVICE void scaled_layout(int32_t* out) {
  const int lane = (int)lane_id();
  constexpr int kW = 4 + 64 + S::kCRegs;
  int32_t* o = out + lane * kW;
  o[0] = S::a_row(lane);
  o[1] = S::b_col(lane);
  o[2] = S::scale_x(lane);
  o[3] = S::scale_kblock(lane);
  for (int e = 0; e < 32; ++e) o[4 + e] = S::a_k(lane, e);
  for (int e = 0; e < 32; ++e) o[36 + e] = S::b_k(lane, e);
  for (int r = 0; r < S::kCRegs; ++r) o[68 + r] = S::c_row(lane, r);
}
template <class S>
MM_DEVICE void scaled_mma(const uint8_t* a, const uint8_t* bt, const uint8_t* sa, const uint8_t* sb, const float* c,
                          float* d, uint32_t* words) {
  constexpr uint32_t kRowA = S::K * S::OpA::kBits / 8, kRowB = S::K * S::OpB::kBits / 8, kCRow = S::N * 4;
  FragA<S> fa;
  FragB<S> fb;
  FragC<S> acc;
  load_a(fa, make_buffer(a, S::M * kRowA), 0, kRowA);
  load_b(fb, make_buffer(bt, S::N * kRowB), 0, kRowB);
  const Scales<S> xa = load_scales<S>(make_buffer(sa, S::M * S::K / 32), 0, S::K / 32);
  const Scales<S> xb = load_scales<S>(make_buffer(sb, S::N * S::K / 32), 0, S::K / 32);
  load_c(acc, make_buffer(c, S::M * kCRow), 0, kCRow);
  mma(acc, fa, xa, fb, xb, acc);
  store_c(acc, make_buffer(d, S::M * kCRow), 0, kCRow);
  const uint32_t lane = lane_id();
  for (int w = 0; w < S::OpA::kWords; ++w) words[lane * 16 + w] = fa.w[w];
  for (int w = 0; w < S::OpB::kWords; ++w) words[lane * 16 + 8 + w] = fb.w[w];
}
#define SCALED_KERNELS(NAME, M, FA, FB)                                                                          \
  MM_KERNEL void t_slayout_##NAME(int32_t* out) { scaled_layout<MfmaScaledF8f6f4<M, MxFormat::FA, MxFormat::FB>>(out); } \
  MM_KERNEL void t_smma_##NAME(const uint8_t* a, const uint8_t* bt, const uint8_t* sa, const uint8_t* sb,        \
                               const float* c, float* d, uint32_t* words) {                                     \
    scaled_mma<MfmaScaledF8f6f4<M, MxFormat::FA, MxFormat::FB>>(a, bt, sa, sb, c, d, words);                   \
  }
SCALED_KERNELS(16_e4m3_e4m3, 16, E4M3, E4M3)
SCALED_KERNELS(16_e2m1_e2m1, 16, E2M1, E2M1)
SCALED_KERNELS(16_e4m3_e2m1, 16, E4M3, E2M1)
SCALED_KERNELS(16_e5m2_e4m3, 16, E5M2, E4M3)
SCALED_KERNELS(32_e4m3_e4m3, 32, E4M3, E4M3)
SCALED_KERNELS(32_e2m1_e2m1, 32, E2M1, E2M1)
SCALED_KERNELS(32_e2m1_e4m3, 32, E2M1, E4M3)
#endif

#if defined(__gfx950__)
// gfx950 KOfPackedC products: D = A * bf16(X), X an fp32 C fragment used in place as B operand(s),
// A read k-major (A^T row-major in LDS) in the KOfPackedC order. a: M x M bf16, x: M x M fp32.
MM_KERNEL void t_c_as_b950_16(const uint16_t* a, const float* x, float* d) {
  typedef Mfma16x16x32Bf16 S;
  typedef LinearLds<64> Swz;  // A^T: 32 k rows of 16 bf16 (padded to 64 bytes)
  MM_LDS uint8_t at[32 * 64];
  const uint32_t lane = lane_id();
  for (int i = lane; i < 16 * 32; i += 64) *(uint16_t*)(at + Swz::offset(i % 32, (i / 32) * 2)) = a[i];
  block_sync();
  FragC<S> x0, x1, acc = zeros<S>();
  load_c(x0, make_buffer(x, 32 * 64), 0, 64);
  load_c(x1, make_buffer(x, 32 * 64), 16 * 64, 64);
  FragA<S> fa;
  lds_load_a_kmajor<Swz, KOfPackedC>(fa, at, 0, 0);
  mma(acc, fa, as_b_operand(pack_bf16<Round::RTNE>(x0), pack_bf16<Round::RTNE>(x1)), acc);
  store_c(acc, make_buffer(d, 16 * 64), 0, 64);
}
template <int P> MM_DEVICE void mma_slice950(FragC<Mfma32x32x16Bf16>& acc, const void* at, const PackedC<Mfma32x32x16Bf16>& p) {
  FragA<Mfma32x32x16Bf16> fa;
  lds_load_a_kmajor<LinearLds<64>, KOfPackedC>(fa, at, 0, 16 * P);
  mma(acc, fa, as_b_operand<P>(p), acc);
}
MM_KERNEL void t_c_as_b950_32(const uint16_t* a, const float* x, float* d) {
  typedef Mfma32x32x16Bf16 S;
  typedef LinearLds<64> Swz;  // A^T: 32 k rows of 32 bf16
  MM_LDS uint8_t at[32 * 64];
  const uint32_t lane = lane_id();
  for (int i = lane; i < 32 * 32; i += 64) *(uint16_t*)(at + Swz::offset(i % 32, (i / 32) * 2)) = a[i];
  block_sync();
  FragC<S> cx, acc = zeros<S>();
  load_c(cx, make_buffer(x, 32 * 128), 0, 128);
  const PackedC<S> p = pack_bf16<Round::RTNE>(cx);
  mma_slice950<0>(acc, at, p);
  mma_slice950<1>(acc, at, p);
  store_c(acc, make_buffer(d, 32 * 128), 0, 128);
}
#endif
