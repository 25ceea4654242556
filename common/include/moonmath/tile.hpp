// The tile layer: MFMA register fragments that carry their lane layout, and the operations kernels
// are written in (mma, row/column reductions, broadcasts, exp2, bf16 packing, buffer/LDS loads and
// stores, direct-to-LDS staging, an online softmax over fragments). Everything is inline and
// indexes registers only with compile-time constants, so a stage written here compiles to the same
// instructions as the hand-indexed version. docs/dev/tiles.md has a worked attention example.
//
// SHAPES (one struct each; all fields constexpr):
//   both archs : Mfma16x16x16Bf16, Mfma32x32x8Bf16  (v_mfma_f32_*bf16_1k)
//                Mfma16x16x32Fp8, Mfma32x32x16Fp8    (v_mfma_f32_*_fp8_fp8: the arch's native fp8,
//                                                     e4m3fnuz on gfx942, OCP e4m3fn on gfx950)
//   gfx950 only: Mfma16x16x32Bf16, Mfma32x32x16Bf16
//                MfmaScaled16x16x128<FA, FB>, MfmaScaled32x32x64<FA, FB>  (v_mfma_scale_f32_*_f8f6f4,
//                MxFormat E4M3 / E5M2 / E2M1 per operand, E8M0 Scales<S>; see MfmaScaledF8f6f4)
// A shape S is an M x N x K product D = A * B + C for one wave64 (M == N for all of them).
//
// LAYOUT (the MFMA register layouts of AMD's matrix instruction calculator; G = 64 / M lane groups):
//   A (M x K):  lane holds row  S::a_row(lane) = lane % M;   element e holds k = S::ab_k(lane, e)
//   B (K x N):  lane holds col  S::b_col(lane) = lane % N;   element e holds k = S::ab_k(lane, e)
//               ab_k(lane, e) = kAbElems * (lane / M) + e    (each lane: kAbElems consecutive k)
//   C/D (M x N): lane holds col S::c_col(lane) = lane % N;   register r holds row S::c_row(lane, r)
//               c_row(lane, r) = 4G * (r / 4) + 4 * (lane / N) + r % 4
// So a row of C lives in one register of the N lanes of a lane group (a "row" reduction crosses
// lanes), and a column of C lives in one lane, spread over registers and the G lane groups.
//
// (S::OpA / S::OpB carry each operand's layout; the scaled fp8 forms hold two runs of k per lane.)
//
// TYPES: FragA<S>, FragB<S> (packed operand words .w), FragC<S> (fp32 accumulators .v),
//   RowVec<S> (one value per C register = per row the lane holds; .v), ColVec<S> (one value per
//   lane = the lane's column; .v), PackedC<S> (C as bf16 pairs: word i = rows of registers 2i, 2i+1),
//   Scales<S> (scaled shapes: the lane's E8M0 scale byte).
//
// FUNCTIONS (each documented where it is defined):
//   mma(d, a, b, c), mma(d, a, sa, b, sb, c); zeros<S>(), filled<S>(x)
//   row_max, row_sum, col_max, col_sum, reduce_rows(c[T], op), reduce_cols(c[T], op)
//   mul_rows, sub_rows, mul_cols, sub_cols, scale, exp2, apply(c, f(v, row, col))
//   pack_bf16<Round>(c), as_b_operand(packed...), as_a_operand_of_transpose(packed)
//   load_a, load_b, load_c, store_c, store_ct_bf16<Round>, load_scales          (buffers)
//   lds_load_a/b<Swz>, lds_load_a/b_kmajor<Swz, KOrder>, lds_load_a/b_blocked<Swz, Steps>  (LDS)
//   stage_tile_to_lds<Swz, Rows, LaneBytes>                                        (direct-to-LDS)
//   ColSoftmax<S>, RowSoftmax<S>: update(s[T], scale_log2) -> factor; lse(); inv_l()
//
// Operand orientation for attention: with S^T = K * Q^T (K rows as A, Q rows as B) a query is a
// column of C, i.e. one lane: the softmax state is one float per lane (ColSoftmax), and the packed
// P^T of a 16x16 (32x32) C fragment *is* the B operand of a 16x16x16 (four 32x32x8) MFMA with
// k = key, so O^T = V^T * P^T needs no data movement (as_b_operand). See docs/dev/tiles.md.
#pragma once
#include "moonmath/buffer.hpp"
#include "moonmath/lds.hpp"
#include "moonmath/numerics.hpp"
#include "moonmath/softmax.hpp"
#include "moonmath/sync.hpp"
#include "moonmath/xlane.hpp"

namespace mm {

namespace detail {
template <int N> struct u32vec;
template <> struct u32vec<2> { typedef u32x2 type; };
template <> struct u32vec<4> { typedef u32x4 type; };
template <> struct u32vec<8> { typedef u32x8 type; };
template <int N> struct f32vec;
template <> struct f32vec<4> { typedef f32x4 type; };
template <> struct f32vec<16> { typedef f32x16 type; };
}  // namespace detail
template <int N> using u32v = typename detail::u32vec<N>::type;
template <int N> using f32v = typename detail::f32vec<N>::type;

// Where one operand's elements sit in a lane: kElems elements of kBits in kWords dwords, in
// kPasses runs of kChunk consecutive k: element e holds k = kChunk*G*(e / kChunk) + kChunk*(lane / M)
// + e % kChunk (one run, kPasses == 1, for every shape except the scaled fp8 ones).
template <int M, int Bits, int Words, int Chunk>
struct OperandLayout {
  static constexpr int kBits = Bits, kWords = Words, kElems = Words * 32 / Bits, kChunk = Chunk;
  static constexpr int kGroups = 64 / M, kPasses = kElems / Chunk, kChunkBytes = Chunk * Bits / 8;
  static constexpr int k(int lane, int e) { return Chunk * kGroups * (e / Chunk) + Chunk * (lane / M) + e % Chunk; }
};

// The layout facts of one single-block MFMA shape (see LAYOUT above). ElemBits: width of an A/B
// element; AbWords: dwords of A (= of B) per lane.
template <int M_, int N_, int K_, int ElemBits, int AbWords>
struct MfmaLayout {
  static_assert(M_ == N_, "square output blocks only");
  static constexpr int M = M_, N = N_, K = K_;
  typedef OperandLayout<M_, ElemBits, AbWords, AbWords * 32 / ElemBits> OpA, OpB;
  static constexpr int kElemBits = ElemBits;
  static constexpr int kAbWords = AbWords;
  static constexpr int kAbElems = AbWords * 32 / ElemBits;   // A/B elements per lane
  static constexpr int kAbBytes = AbWords * 4;               // one contiguous run of k per lane
  static constexpr int kGroups = 64 / M;
  static constexpr int kCRegs = M * N / 64;
  static_assert(kGroups * kAbElems == K, "lane groups x elements per lane cover K");
  static constexpr int a_row(int lane) { return lane % M; }
  static constexpr int b_col(int lane) { return lane % N; }
  static constexpr int ab_k(int lane, int e) { return kAbElems * (lane / M) + e; }
  static constexpr int c_row(int lane, int r) { return 4 * kGroups * (r / 4) + 4 * (lane / N) + r % 4; }
  static constexpr int c_col(int lane) { return lane % N; }
};

#if defined(__gfx942__) || defined(__gfx950__)
struct Mfma16x16x16Bf16 : MfmaLayout<16, 16, 16, 16, 2> {
  MM_DEVICE static f32x4 run(u32x2 a, u32x2 b, f32x4 c) {
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(bit_cast<i16x4>(a), bit_cast<i16x4>(b), c, 0, 0, 0);
  }
};
struct Mfma32x32x8Bf16 : MfmaLayout<32, 32, 8, 16, 2> {
  MM_DEVICE static f32x16 run(u32x2 a, u32x2 b, f32x16 c) {
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(bit_cast<i16x4>(a), bit_cast<i16x4>(b), c, 0, 0, 0);
  }
};
struct Mfma16x16x32Fp8 : MfmaLayout<16, 16, 32, 8, 2> {
  MM_DEVICE static f32x4 run(u32x2 a, u32x2 b, f32x4 c) {
    return __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(bit_cast<long>(a), bit_cast<long>(b), c, 0, 0, 0);
  }
};
struct Mfma32x32x16Fp8 : MfmaLayout<32, 32, 16, 8, 2> {
  MM_DEVICE static f32x16 run(u32x2 a, u32x2 b, f32x16 c) {
    return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(bit_cast<long>(a), bit_cast<long>(b), c, 0, 0, 0);
  }
};
#endif
#if defined(__gfx950__)
struct Mfma16x16x32Bf16 : MfmaLayout<16, 16, 32, 16, 4> {
  MM_DEVICE static f32x4 run(u32x4 a, u32x4 b, f32x4 c) {
    return __builtin_amdgcn_mfma_f32_16x16x32_bf16(bit_cast<bf16x8>(a), bit_cast<bf16x8>(b), c, 0, 0, 0);
  }
};
struct Mfma32x32x16Bf16 : MfmaLayout<32, 32, 16, 16, 4> {
  MM_DEVICE static f32x16 run(u32x4 a, u32x4 b, f32x16 c) {
    return __builtin_amdgcn_mfma_f32_32x32x16_bf16(bit_cast<bf16x8>(a), bit_cast<bf16x8>(b), c, 0, 0, 0);
  }
};

// Scaled MX products v_mfma_scale_f32_{16x16x128,32x32x64}_f8f6f4: A and B formats chosen
// independently (OCP e4m3 / e5m2 / e2m1; fp6 is not offered: its register layout is unverified),
// 32 elements per lane, one E8M0 scale per 32 consecutive k of a row of A (a column of B).
// Operand layout (OpA / OpB): fp8 in two 16-element passes, k = 16G*(e/16) + 16*(lane/M) + e%16
// (ROCm blog figure for 32x32x64; 16x16x128 by the same rule); fp4 in one pass, k = 32*(lane/M) + e.
// Scales (Scales<S>, one dword per lane, byte OpSel used): lane holds the scale of row/column
// scale_x(lane) = lane % M, k block scale_kblock(lane) = lane / M (k = 32*kblock .. +31).
// C/D: as every other shape.
enum class MxFormat : int { E4M3 = 0, E5M2 = 1, E2M1 = 4 };
constexpr int mx_bits(MxFormat f) { return f == MxFormat::E2M1 ? 4 : 8; }

template <int M_, MxFormat FA, MxFormat FB>
struct MfmaScaledF8f6f4 {
  static constexpr int M = M_, N = M_, K = 32 * (64 / M_);
  static constexpr int kGroups = 64 / M, kCRegs = M * N / 64;
  static constexpr MxFormat kFormatA = FA, kFormatB = FB;
  typedef OperandLayout<M_, mx_bits(FA), mx_bits(FA), mx_bits(FA) == 8 ? 16 : 32> OpA;
  typedef OperandLayout<M_, mx_bits(FB), mx_bits(FB), mx_bits(FB) == 8 ? 16 : 32> OpB;
  static constexpr int a_row(int lane) { return lane % M; }
  static constexpr int b_col(int lane) { return lane % N; }
  static constexpr int a_k(int lane, int e) { return OpA::k(lane, e); }
  static constexpr int b_k(int lane, int e) { return OpB::k(lane, e); }
  static constexpr int c_row(int lane, int r) { return 4 * kGroups * (r / 4) + 4 * (lane / N) + r % 4; }
  static constexpr int c_col(int lane) { return lane % N; }
  static constexpr int scale_x(int lane) { return lane % M; }
  static constexpr int scale_kblock(int lane) { return lane / M; }
  template <int OpSelA, int OpSelB>
  MM_DEVICE static f32v<kCRegs> run(u32v<OpA::kWords> a, u32v<OpB::kWords> b, f32v<kCRegs> c, uint32_t sa, uint32_t sb) {
    const i32x8 a8 = widen8(a), b8 = widen8(b);
    if constexpr (M == 16)
      return __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a8, b8, c, (int)FA, (int)FB, OpSelA, (int)sa, OpSelB, (int)sb);
    else
      return __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(a8, b8, c, (int)FA, (int)FB, OpSelA, (int)sa, OpSelB, (int)sb);
  }

 private:
  // The builtin takes 8 dwords; for fp4 only the first 4 are read (the rest are undefined).
  MM_DEVICE static i32x8 widen8(u32x8 w) { return bit_cast<i32x8>(w); }
  MM_DEVICE static i32x8 widen8(u32x4 w) {
    return bit_cast<i32x8>(__builtin_shufflevector(w, w, 0, 1, 2, 3, -1, -1, -1, -1));
  }
};
template <MxFormat FA, MxFormat FB> using MfmaScaled16x16x128 = MfmaScaledF8f6f4<16, FA, FB>;
template <MxFormat FA, MxFormat FB> using MfmaScaled32x32x64 = MfmaScaledF8f6f4<32, FA, FB>;
#endif

template <class S> struct FragA { u32v<S::OpA::kWords> w; };
template <class S> struct FragB { u32v<S::OpB::kWords> w; };
template <class S> struct FragC { f32v<S::kCRegs> v; };
template <class S> struct RowVec { f32v<S::kCRegs> v; };
template <class S> struct ColVec { float v; };
template <class S> struct PackedC { u32v<S::kCRegs / 2> w; };
template <class S> MM_DEVICE RowVec<S> rowvec_filled(float x) { RowVec<S> r; r.v = x; return r; }

// ---------------------------------------------------------------------------------------- mma
// d = a * b + c (d may alias c).
template <class S>
MM_DEVICE void mma(FragC<S>& d, const FragA<S>& a, const FragB<S>& b, const FragC<S>& c) {
  d.v = S::run(a.w, b.w, c.v);
}

// E8M0 scales of a scaled shape for this lane (see MfmaScaledF8f6f4): byte OpSel of .v is used.
template <class S> struct Scales { uint32_t v; };

// d = (a * 2^(scale_a - 127)) * (b * 2^(scale_b - 127)) + c, per 32-k block (scaled shapes).
template <int OpSelA = 0, int OpSelB = 0, class S>
MM_DEVICE void mma(FragC<S>& d, const FragA<S>& a, const Scales<S>& sa, const FragB<S>& b, const Scales<S>& sb,
                   const FragC<S>& c) {
  d.v = S::template run<OpSelA, OpSelB>(a.w, b.w, c.v, sa.v, sb.v);
}
// The scales from a row-major byte matrix [rows][K/32] (A: rows of A; B: columns of B), k block 0
// at off: one buffer_load_ubyte per lane.
template <class S> MM_DEVICE Scales<S> load_scales(buffer_rsrc r, uint32_t off, uint32_t row_stride, uint32_t soff = 0) {
  const int lane = (int)lane_id();
  return {buffer_load_u8(r, off + S::scale_x(lane) * row_stride + S::scale_kblock(lane), soff)};
}

template <class S> MM_DEVICE FragC<S> zeros() { FragC<S> c; c.v = 0.f; return c; }
template <class S> MM_DEVICE FragC<S> filled(float x) { FragC<S> c; c.v = x; return c; }

// ---------------------------------------------------------------------------- cross-lane reductions
struct MaxOp { MM_DEVICE float operator()(float a, float b) const { return __builtin_fmaxf(a, b); } };
struct SumOp { MM_DEVICE float operator()(float a, float b) const { return a + b; } };

namespace detail {
// Every lane of a full-row pattern has a source, so no `old` value is needed (lets the compiler fuse
// the move into the consuming v_add_f32_dpp).
template <int Ctrl> MM_DEVICE float dpp(float v) {
  return bit_cast<float>(__builtin_amdgcn_mov_dpp(bit_cast<int>(v), Ctrl, 0xF, 0xF, true));
}
// All-reduce over the 16 lanes of a DPP row; every lane ends with the same bits (each step combines
// a lane with its mirror partner, and fmax / + are commutative).
template <class Op> MM_DEVICE float reduce_row16(float v, Op op) {
  v = op(v, dpp<dpp_quad_perm(1, 0, 3, 2)>(v));
  v = op(v, dpp<dpp_quad_perm(2, 3, 0, 1)>(v));
  v = op(v, dpp<kDppRowHalfMirror>(v));
  return op(v, dpp<kDppRowMirror>(v));
}
// op(v, v of lane ^ 16) and op(v, v of lane ^ 32), same bits in both partner lanes.
template <class Op> MM_DEVICE float combine_xor16(float v, Op op) {
#if defined(__gfx950__)
  auto p = __builtin_amdgcn_permlane16_swap(bit_cast<uint32_t>(v), bit_cast<uint32_t>(v), false, false);
  return op(bit_cast<float>(p[0]), bit_cast<float>(p[1]));
#else
  return op(v, bit_cast<float>(swizzle_xor<16>(bit_cast<uint32_t>(v))));
#endif
}
template <class Op> MM_DEVICE float combine_xor32(float v, Op op) {
#if defined(__gfx950__)
  auto p = __builtin_amdgcn_permlane32_swap(bit_cast<uint32_t>(v), bit_cast<uint32_t>(v), false, false);
  return op(bit_cast<float>(p[0]), bit_cast<float>(p[1]));
#else
  return op(v, bit_cast<float>(bpermute(bit_cast<uint32_t>(v), lane_id() ^ 32u)));
#endif
}
template <class S, class Op> MM_DEVICE float reduce_row_lanes(float v, Op op) {
  v = reduce_row16(v, op);
  if constexpr (S::N == 32) v = combine_xor16(v, op);
  return v;
}
template <class S, class Op> MM_DEVICE float reduce_col_lanes(float v, Op op) {
  if constexpr (S::kGroups == 4) v = combine_xor16(v, op);
  return combine_xor32(v, op);
}
}  // namespace detail

// Reduce each row of C across its N lanes: result register r = op over the row c_row(lane, r).
// The T-fragment forms reduce over T fragments side by side along N (a row of T*N columns).
template <class S, int T, class Op>
MM_DEVICE RowVec<S> reduce_rows(const FragC<S> (&c)[T], Op op) {
  RowVec<S> out;
#pragma unroll
  for (int r = 0; r < S::kCRegs; ++r) {
    float v = c[0].v[r];
#pragma unroll
    for (int t = 1; t < T; ++t) v = op(v, c[t].v[r]);
    out.v[r] = detail::reduce_row_lanes<S>(v, op);
  }
  return out;
}
// Reduce each column of C (in-lane over registers, then across the G lane groups); T fragments
// stacked along M (a column of T*M rows).
template <class S, int T, class Op>
MM_DEVICE ColVec<S> reduce_cols(const FragC<S> (&c)[T], Op op) {
  float v = c[0].v[0];
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int r = (t == 0); r < S::kCRegs; ++r) v = op(v, c[t].v[r]);
  return {detail::reduce_col_lanes<S>(v, op)};
}
template <class S> MM_DEVICE RowVec<S> row_max(const FragC<S>& c) { return reduce_rows<S, 1>({c}, MaxOp{}); }
template <class S> MM_DEVICE RowVec<S> row_sum(const FragC<S>& c) { return reduce_rows<S, 1>({c}, SumOp{}); }
template <class S> MM_DEVICE ColVec<S> col_max(const FragC<S>& c) { return reduce_cols<S, 1>({c}, MaxOp{}); }
template <class S> MM_DEVICE ColVec<S> col_sum(const FragC<S>& c) { return reduce_cols<S, 1>({c}, SumOp{}); }

// ------------------------------------------------------------------------- element-wise maps
template <class S> MM_DEVICE void mul_rows(FragC<S>& c, const RowVec<S>& r) { c.v *= r.v; }
template <class S> MM_DEVICE void sub_rows(FragC<S>& c, const RowVec<S>& r) { c.v -= r.v; }
template <class S> MM_DEVICE void mul_cols(FragC<S>& c, const ColVec<S>& x) { c.v *= x.v; }
template <class S> MM_DEVICE void sub_cols(FragC<S>& c, const ColVec<S>& x) { c.v -= x.v; }
template <class S> MM_DEVICE void scale(FragC<S>& c, float s) { c.v *= s; }
// v_exp_f32 on every element (base 2; exp2(-inf) = 0).
template <class S> MM_DEVICE void exp2(FragC<S>& c) {
#pragma unroll
  for (int r = 0; r < S::kCRegs; ++r) c.v[r] = __builtin_amdgcn_exp2f(c.v[r]);
}
// c[row][col] = f(c[row][col], row, col) for every element the lane holds (masks, biases).
template <class S, class F> MM_DEVICE void apply(FragC<S>& c, F f) {
  const int lane = (int)lane_id();
#pragma unroll
  for (int r = 0; r < S::kCRegs; ++r) c.v[r] = f(c.v[r], S::c_row(lane, r), S::c_col(lane));
}

// ------------------------------------------------------------------------------- bf16 packing
// fp32 C -> bf16 pairs in rounding mode R (RTNE / RTNA / RTZ); any NaN becomes 0x7FFF.
template <Round R, class S> MM_DEVICE PackedC<S> pack_bf16(const FragC<S>& c) {
  PackedC<S> p;
#pragma unroll
  for (int i = 0; i < S::kCRegs / 2; ++i) p.w[i] = pack_bf16x2<R>(c.v[2 * i], c.v[2 * i + 1]);
  return p;
}
#if defined(__gfx942__) || defined(__gfx950__)
// A packed 16x16 C of X is, element for element, the B operand of X (k = row of X) of the 16x16x16
// MFMA: c_row(lane, r) == ab_k(lane, r). For 32x32, registers 4q..4q+3 are the B operand of the
// 32x32x8 MFMA over rows 8q..8q+7 of X. (Transposed, the same words are the A operand of X^T.)
MM_DEVICE FragB<Mfma16x16x16Bf16> as_b_operand(const PackedC<Mfma16x16x16Bf16>& p) { return {p.w}; }
MM_DEVICE FragA<Mfma16x16x16Bf16> as_a_operand_of_transpose(const PackedC<Mfma16x16x16Bf16>& p) { return {p.w}; }
template <int Q> MM_DEVICE FragB<Mfma32x32x8Bf16> as_b_operand(const PackedC<Mfma32x32x8Bf16>& p) {
  static_assert(Q >= 0 && Q < 4, "a 32x32 C holds four 8-row k slices");
  return {u32x2{p.w[2 * Q], p.w[2 * Q + 1]}};
}
#endif
#if defined(__gfx950__)
// gfx950: two packed 16x16 C fragments (rows 0..15 and 16..31 of X) are one 16x16x32 B operand of
// X in KOfPackedC order; registers 8P..8P+7 of a packed 32x32 C are the 32x32x16 B operand of rows
// 16P..16P+15 of X in KOfPackedC order. Load the other operand with KOfPackedC (lds_load_a_kmajor).
MM_DEVICE FragB<Mfma16x16x32Bf16> as_b_operand(const PackedC<Mfma16x16x32Bf16>& rows0_15,
                                               const PackedC<Mfma16x16x32Bf16>& rows16_31) {
  return {u32x4{rows0_15.w[0], rows0_15.w[1], rows16_31.w[0], rows16_31.w[1]}};
}
template <int P> MM_DEVICE FragB<Mfma32x32x16Bf16> as_b_operand(const PackedC<Mfma32x32x16Bf16>& p) {
  static_assert(P >= 0 && P < 2, "a 32x32 C holds two 16-row k slices");
  return {u32x4{p.w[4 * P], p.w[4 * P + 1], p.w[4 * P + 2], p.w[4 * P + 3]}};
}
#endif

// -------------------------------------------------------------------------- buffer loads/stores
// Tiles live in buffers made by make_buffer (buffer.hpp): out-of-range loads read 0 and
// out-of-range stores are dropped, so partial tiles need no branches. Offsets and strides in bytes.
namespace detail {
template <int Bytes> MM_DEVICE u32v<Bytes / 4> buffer_load(buffer_rsrc r, uint32_t voff, uint32_t soff) {
  if constexpr (Bytes == 8) return buffer_load_b64(r, voff, soff);
  else return buffer_load_b128(r, voff, soff);
}
template <int Bytes> MM_DEVICE u32v<Bytes / 4> lds_load(const void* lds, uint32_t off) {
  if constexpr (Bytes == 8) return lds_read_b64(lds, off);
  else return lds_read_b128(lds, off);
}
MM_DEVICE u32x8 concat(u32x4 lo, u32x4 hi) { return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7); }
// One operand of a lane whose k = 0 is at byte `base` of its row, through `read(byte offset)`:
// one read per pass (two 16-byte passes for the scaled fp8 forms).
template <class Op, class Read> MM_DEVICE u32v<Op::kWords> read_operand(int lane, Read read) {
  static_assert(Op::kPasses <= 2, "one or two runs per lane");
  if constexpr (Op::kPasses == 1) return read(Op::k(lane, 0) * Op::kBits / 8);
  else return concat(read(Op::k(lane, 0) * Op::kBits / 8), read(Op::k(lane, Op::kChunk) * Op::kBits / 8));
}
}  // namespace detail

// A from a row-major M x K tile (k contiguous): A[i][k] at off + i*row_stride + k*elem_bytes.
template <class S>
MM_DEVICE void load_a(FragA<S>& a, buffer_rsrc r, uint32_t off, uint32_t row_stride, uint32_t soff = 0) {
  typedef typename S::OpA Op;
  const int lane = (int)lane_id();
  const uint32_t base = off + S::a_row(lane) * row_stride;
  a.w = detail::read_operand<Op>(lane, [&](uint32_t byte) { return detail::buffer_load<Op::kChunkBytes>(r, base + byte, soff); });
}
// B from an N x K row-major tile (B^T stored k contiguous, e.g. the K matrix in S = Q K^T):
// B[k][j] at off + j*col_stride + k*elem_bytes.
template <class S>
MM_DEVICE void load_b(FragB<S>& b, buffer_rsrc r, uint32_t off, uint32_t col_stride, uint32_t soff = 0) {
  typedef typename S::OpB Op;
  const int lane = (int)lane_id();
  const uint32_t base = off + S::b_col(lane) * col_stride;
  b.w = detail::read_operand<Op>(lane, [&](uint32_t byte) { return detail::buffer_load<Op::kChunkBytes>(r, base + byte, soff); });
}
// C[i][j] (fp32) at off + i*row_stride + j*col_stride; one dword per register.
template <class S>
MM_DEVICE void store_c(const FragC<S>& c, buffer_rsrc r, uint32_t off, uint32_t row_stride, uint32_t col_stride = 4) {
  const int lane = (int)lane_id();
#pragma unroll
  for (int i = 0; i < S::kCRegs; ++i)
    buffer_store_f32(c.v[i], r, off + S::c_row(lane, i) * row_stride + S::c_col(lane) * col_stride);
}
template <class S>
MM_DEVICE void load_c(FragC<S>& c, buffer_rsrc r, uint32_t off, uint32_t row_stride, uint32_t col_stride = 4) {
  const int lane = (int)lane_id();
#pragma unroll
  for (int i = 0; i < S::kCRegs; ++i)
    c.v[i] = buffer_load_f32(r, off + S::c_row(lane, i) * row_stride + S::c_col(lane) * col_stride);
}
// The transpose of C as bf16, C[i][j] at off + j*stride + i*2: the four rows a lane holds per
// register quad are adjacent, so each quad is one b64 store (the O^T -> O output of attention).
template <Round R, class S>
MM_DEVICE void store_ct_bf16(const FragC<S>& c, buffer_rsrc r, uint32_t off, uint32_t stride) {
  const int lane = (int)lane_id();
  const PackedC<S> p = pack_bf16<R>(c);
#pragma unroll
  for (int q = 0; q < S::kCRegs / 4; ++q)
    buffer_store_b64(u32x2{p.w[2 * q], p.w[2 * q + 1]}, r, off + S::c_col(lane) * stride + S::c_row(lane, 4 * q) * 2);
}

// ------------------------------------------------------------------------------- LDS fragments
// A from a row-major tile in LDS laid out by the swizzle policy Swz (lds.hpp): A[i][k] is at
// Swz::offset(row0 + i, (k0 + k) * elem_bytes) of `lds`. One ds_read_b64/b128 per lane.
template <class Swz, class S>
MM_DEVICE void lds_load_a(FragA<S>& a, const void* lds, uint32_t row0 = 0, uint32_t k0 = 0) {
  typedef typename S::OpA Op;
  const int lane = (int)lane_id();
  const uint32_t row = row0 + S::a_row(lane), kb = k0 * Op::kBits / 8;
  a.w = detail::read_operand<Op>(lane, [&](uint32_t byte) { return detail::lds_load<Op::kChunkBytes>(lds, Swz::offset(row, kb + byte)); });
}
// B from an N x K row-major tile in LDS (B[k][j] at Swz::offset(col0 + j, (k0 + k) * elem_bytes)).
template <class Swz, class S>
MM_DEVICE void lds_load_b(FragB<S>& b, const void* lds, uint32_t col0 = 0, uint32_t k0 = 0) {
  typedef typename S::OpB Op;
  const int lane = (int)lane_id();
  const uint32_t col = col0 + S::b_col(lane), kb = k0 * Op::kBits / 8;
  b.w = detail::read_operand<Op>(lane, [&](uint32_t byte) { return detail::lds_load<Op::kChunkBytes>(lds, Swz::offset(col, kb + byte)); });
}

// k-blocked operands for Steps consecutive MFMAs over Steps*K: in MFMA m, lane group g holds
// k = Steps*kAbElems*g + kAbElems*m + e, so each lane reads one contiguous run of Steps*kAbBytes
// bytes with b128 reads (the other operand must be blocked the same way: a contraction over the
// Steps MFMAs only needs both to agree). Tile layout as lds_load_a / lds_load_b.
namespace detail {
template <class Swz, int Steps, class S>
MM_DEVICE void lds_load_blocked(u32v<S::kAbWords> (&w)[Steps], const void* lds, uint32_t x, uint32_t k0) {
  constexpr int kRun = Steps * S::kAbBytes, kPerRead = 16 / S::kAbBytes;
  static_assert(kRun % 16 == 0 && S::kAbBytes <= 16, "whole b128 reads");
  const uint32_t byte0 = k0 * S::kElemBits / 8 + (lane_id() / S::M) * kRun;
#pragma unroll
  for (int p = 0; p < kRun / 16; ++p) {
    const u32x4 v = lds_read_b128(lds, Swz::offset(x, byte0 + 16 * p));
#pragma unroll
    for (int f = 0; f < kPerRead; ++f) {
      if constexpr (S::kAbWords == 2) w[kPerRead * p + f] = u32x2{v[2 * f], v[2 * f + 1]};
      else w[p] = v;
    }
  }
}
}  // namespace detail
template <class Swz, int Steps, class S>
MM_DEVICE void lds_load_a_blocked(FragA<S> (&a)[Steps], const void* lds, uint32_t row0 = 0, uint32_t k0 = 0) {
  u32v<S::kAbWords> w[Steps];
  detail::lds_load_blocked<Swz, Steps, S>(w, lds, row0 + S::a_row((int)lane_id()), k0);
#pragma unroll
  for (int m = 0; m < Steps; ++m) a[m].w = w[m];
}
template <class Swz, int Steps, class S>
MM_DEVICE void lds_load_b_blocked(FragB<S> (&b)[Steps], const void* lds, uint32_t col0 = 0, uint32_t k0 = 0) {
  u32v<S::kAbWords> w[Steps];
  detail::lds_load_blocked<Swz, Steps, S>(w, lds, col0 + S::b_col((int)lane_id()), k0);
#pragma unroll
  for (int m = 0; m < Steps; ++m) b[m].w = w[m];
}

// k orders of an operand: which k element e of a lane holds. KNatural is the MFMA's own
// (S::ab_k); KOfPackedC is the order in which packed C fragments arrive as a B operand
// (as_b_operand): k = 4G*(e/4) + 4*(lane/M) + e%4, i.e. the C rows of registers e. The two agree
// for the 4-element shapes (16x16x16, 32x32x8); on gfx950's 8-element bf16 shapes the other operand
// of such a product must be loaded in KOfPackedC order too (a contraction only needs both operands
// to agree on the k order).
struct KNatural {
  template <class S> static constexpr int k(int lane, int e) { return S::ab_k(lane, e); }
};
struct KOfPackedC {
  template <class S> static constexpr int k(int lane, int e) { return 4 * S::kGroups * (e / 4) + 4 * (lane / S::M) + e % 4; }
};

namespace detail {
// A 16-bit operand from a k-major LDS tile: element e of the lane (row/col x, k = KO::k) is at
// Swz::offset(k0 + k, (x0 + x) * 2). gfx950: one ds_read_b64_tr_b16 per 4 elements (the 16 lanes of
// a row group each supply one 8-byte row segment: lane s the segment of k = k(4 * (s / 4) .. ),
// columns 4 * (s % 4) ..; lane t receives column t of the four rows). gfx942: one ds_read_u16 each.
template <class Swz, class KO, class S>
MM_DEVICE u32v<S::kAbWords> lds_load_kmajor16(const void* lds, uint32_t x0, uint32_t k0) {
  static_assert(S::kElemBits == 16, "k-major fragment loads are for 16-bit elements");
  const int lane = (int)lane_id();
  u32v<S::kAbWords> w;
#if defined(__gfx950__)
  const int t = lane % 16, x_seg = (lane % S::M) - t + 4 * (t % 4);
#pragma unroll
  for (int h = 0; h < S::kAbElems / 4; ++h) {
    // lane t of a 16-lane row group supplies the segment of element 4h + t/4 for the lanes
    // 4*(t%4).. of its group; k depends on the lane only through lane / M, the same in the group.
    const int k = KO::template k<S>(lane, 4 * h + t / 4);
    auto* p = (__attribute__((address_space(3))) i16x4*)((uint8_t*)lds + Swz::offset(k0 + k, (x0 + x_seg) * 2));
    const u32x2 v = bit_cast<u32x2>(__builtin_amdgcn_ds_read_tr16_b64_v4i16(p));
    w[2 * h] = v[0];
    w[2 * h + 1] = v[1];
  }
#else
  const int x = lane % S::M;
#pragma unroll
  for (int i = 0; i < S::kAbWords; ++i) {
    const uint8_t* b = (const uint8_t*)lds;
    const uint32_t lo = *(const uint16_t*)(b + Swz::offset(k0 + KO::template k<S>(lane, 2 * i), (x0 + x) * 2));
    const uint32_t hi = *(const uint16_t*)(b + Swz::offset(k0 + KO::template k<S>(lane, 2 * i + 1), (x0 + x) * 2));
    w[i] = lo | (hi << 16);
  }
#endif
  return w;
}
}  // namespace detail

// A from a k-major tile in LDS (A^T row-major: A[i][k] at Swz::offset(k0 + k, (row0 + i) * 2)),
// e.g. V^T for O^T = V^T P^T with V stored [key][d]. B likewise from a K x N row-major tile
// (B[k][j] at Swz::offset(k0 + k, (col0 + j) * 2)), e.g. V for O = P V. 16-bit elements; gfx950
// uses the transposing ds_read_b64_tr_b16, gfx942 one ds_read_u16 per element.
template <class Swz, class KO = KNatural, class S>
MM_DEVICE void lds_load_a_kmajor(FragA<S>& a, const void* lds, uint32_t row0 = 0, uint32_t k0 = 0) {
  a.w = detail::lds_load_kmajor16<Swz, KO, S>(lds, row0, k0);
}
template <class Swz, class KO = KNatural, class S>
MM_DEVICE void lds_load_b_kmajor(FragB<S>& b, const void* lds, uint32_t col0 = 0, uint32_t k0 = 0) {
  b.w = detail::lds_load_kmajor16<Swz, KO, S>(lds, col0, k0);
}

// Direct-to-LDS staging (buffer_load ... lds): one wave copies a Rows x Swz::kRowBytes tile, row r
// read from off + r*row_stride of the buffer, into `lds` in the Swz layout, LaneBytes per lane and
// instruction (4 on both archs; 16 on gfx950). The hardware writes consecutive LDS bytes per lane,
// so each lane fetches the logical bytes that belong at its physical position. It counts against
// vmcnt: wait_vmcnt<0>() (and block_sync() if other waves read) before the LDS reads.
template <class Swz, int Rows, int LaneBytes = 4>
MM_DEVICE void stage_tile_to_lds(void* lds, buffer_rsrc r, uint32_t off, uint32_t row_stride, uint32_t soff = 0) {
  constexpr int kStep = 64 * LaneBytes, kBytes = Rows * Swz::kRowBytes;
  static_assert(kBytes % kStep == 0, "the tile must be a whole number of wave-wide copies");
  const uint32_t lane = lane_id();
#pragma unroll
  for (int t = 0; t < kBytes / kStep; ++t) {
    const uint32_t phys = t * kStep + lane * LaneBytes, row = phys / Swz::kRowBytes;
    const uint32_t byte = Swz::byte_of(row, phys % Swz::kRowBytes);
    buffer_load_to_lds<LaneBytes>(r, (uint8_t*)lds + t * kStep, off + row * row_stride + byte, soff);
  }
}

// ------------------------------------------------------------------------ online softmax on tiles
// Scores s are raw (unscaled); scale_log2 = softmax_scale * log2(e) must be > 0. After update() the
// scores hold p = exp2(s * scale_log2 - m) and the return value is the factor by which the earlier
// output accumulators must be multiplied (mul_cols / mul_rows). m is in scaled log2 units, l is the
// running sum of p. A row (column) that has seen only -inf keeps m = -inf, p = 0, l = 0, factor 0.

// Softmax along the columns of C: the S^T = K Q^T form, queries are columns (one per lane), keys are
// rows; T fragments are stacked along the keys.
template <class S> struct ColSoftmax {
  ColVec<S> m{-__builtin_inff()}, l{0.f};
  template <int T> MM_DEVICE ColVec<S> update(FragC<S> (&s)[T], float scale_log2) {
    const float m_new = __builtin_fmaxf(m.v, reduce_cols<S, T>(s, MaxOp{}).v * scale_log2);
    const float m_use = m_new == -__builtin_inff() ? 0.f : m_new;  // keeps -inf - -inf out
    const float alpha = __builtin_amdgcn_exp2f(m.v - m_use);
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
      for (int r = 0; r < S::kCRegs; ++r) s[t].v[r] = __builtin_amdgcn_exp2f(__builtin_fmaf(s[t].v[r], scale_log2, -m_use));
    l.v = l.v * alpha + reduce_cols<S, T>(s, SumOp{}).v;
    m.v = m_new;
    return {alpha};
  }
  MM_DEVICE ColVec<S> update(FragC<S>& s, float scale_log2) {
    FragC<S> one[1] = {s};
    ColVec<S> a = update<1>(one, scale_log2);
    s = one[0];
    return a;
  }
  MM_DEVICE ColVec<S> inv_l() const { return {l.v > 0.f ? __builtin_amdgcn_rcpf(l.v) : 0.f}; }
  MM_DEVICE ColVec<S> lse() const { return {l.v > 0.f ? m.v + __builtin_amdgcn_logf(l.v) : -__builtin_inff()}; }
};

// Softmax along the rows of C: the S = Q K^T form, queries are rows (one per register), keys are
// columns across lanes; T fragments side by side along the keys.
template <class S> struct RowSoftmax {
  RowVec<S> m = rowvec_filled<S>(-__builtin_inff()), l = rowvec_filled<S>(0.f);
  template <int T> MM_DEVICE RowVec<S> update(FragC<S> (&s)[T], float scale_log2) {
    const RowVec<S> mx = reduce_rows<S, T>(s, MaxOp{});
    RowVec<S> alpha, m_use;
#pragma unroll
    for (int r = 0; r < S::kCRegs; ++r) {
      const float m_new = __builtin_fmaxf(m.v[r], mx.v[r] * scale_log2);
      m_use.v[r] = m_new == -__builtin_inff() ? 0.f : m_new;
      alpha.v[r] = __builtin_amdgcn_exp2f(m.v[r] - m_use.v[r]);
      m.v[r] = m_new;
    }
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
      for (int r = 0; r < S::kCRegs; ++r) s[t].v[r] = __builtin_amdgcn_exp2f(__builtin_fmaf(s[t].v[r], scale_log2, -m_use.v[r]));
    l.v = l.v * alpha.v + reduce_rows<S, T>(s, SumOp{}).v;
    return alpha;
  }
  MM_DEVICE RowVec<S> update(FragC<S>& s, float scale_log2) {
    FragC<S> one[1] = {s};
    RowVec<S> a = update<1>(one, scale_log2);
    s = one[0];
    return a;
  }
  MM_DEVICE RowVec<S> inv_l() const {
    RowVec<S> o;
#pragma unroll
    for (int r = 0; r < S::kCRegs; ++r) o.v[r] = l.v[r] > 0.f ? __builtin_amdgcn_rcpf(l.v[r]) : 0.f;
    return o;
  }
  MM_DEVICE RowVec<S> lse() const {
    RowVec<S> o;
#pragma unroll
    for (int r = 0; r < S::kCRegs; ++r) o.v[r] = l.v[r] > 0.f ? m.v[r] + __builtin_amdgcn_logf(l.v[r]) : -__builtin_inff();
    return o;
  }
};

}  // namespace mm
