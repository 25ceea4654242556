// Cross-lane data movement within a wave64: ds_swizzle, ds_bpermute, DPP, ballots.
#pragma once
#include "moonmath/prelude.hpp"

namespace mm {

// ds_swizzle bit-mask mode: offset = 0x001F-style (and_mask | or_mask<<5 | xor_mask<<10), operates
// within groups of 32 lanes.
template <int XorMask>
MM_DEVICE uint32_t swizzle_xor(uint32_t v) {
  static_assert(XorMask > 0 && XorMask < 32, "ds_swizzle xor reaches within 32 lanes");
  return (uint32_t)__builtin_amdgcn_ds_swizzle((int)v, (XorMask << 10) | 0x1F);
}

// Read v from lane `src_lane` (0..63) of the same wave.
MM_DEVICE uint32_t bpermute(uint32_t v, uint32_t src_lane) {
  return (uint32_t)__builtin_amdgcn_ds_bpermute((int)(src_lane << 2), (int)v);
}

MM_DEVICE float xor_lane(float v, uint32_t mask) {
  return __builtin_bit_cast(float, bpermute(__builtin_bit_cast(uint32_t, v), lane_id() ^ mask));
}

// DPP row operations (rows of 16 lanes). Control codes from the gfx9 DPP_CTRL encoding.
enum DppCtrl : int {
  kDppRowShr1 = 0x111,
  kDppRowRor8 = 0x128,
  kDppRowMirror = 0x140,
  kDppRowHalfMirror = 0x141,
  kDppRowBcast15 = 0x142,
  kDppRowBcast31 = 0x143,
};
constexpr int dpp_quad_perm(int a, int b, int c, int d) { return a | (b << 2) | (c << 4) | (d << 6); }

template <int Ctrl>
MM_DEVICE uint32_t dpp_mov(uint32_t v) {
  return (uint32_t)__builtin_amdgcn_mov_dpp((int)v, Ctrl, 0xF, 0xF, true);
}

// The active lanes whose pred is true, one bit per lane (v_cmp into an SGPR pair).
MM_DEVICE uint64_t ballot(bool pred) { return __builtin_amdgcn_ballot_w64(pred); }

// How many lanes below this one have their bit set in mask (v_mbcnt).
MM_DEVICE uint32_t lanes_below(uint64_t mask) {
  return __builtin_amdgcn_mbcnt_hi((uint32_t)(mask >> 32), __builtin_amdgcn_mbcnt_lo((uint32_t)mask, 0u));
}

// Butterfly max / sum across all 64 lanes; every lane gets the result.
MM_DEVICE float wave_max(float v) {
  for (uint32_t m = 1; m < 64; m <<= 1) v = __builtin_fmaxf(v, xor_lane(v, m));
  return v;
}
MM_DEVICE float wave_sum(float v) {
  for (uint32_t m = 1; m < 64; m <<= 1) v += xor_lane(v, m);
  return v;
}

// Reductions across all 64 lanes (every lane active), as a wave-uniform value: DPP within each row of 16 lanes
// (quad swaps, half mirror, mirror: one op with a DPP operand each), then the 4 rows' results by v_readlane, as
// op(op(r0, r1), op(r2, r3)). VALU latencies only, where a ds_bpermute butterfly's 6 steps each wait an LDS round
// trip. The pairings are the butterfly's (xor 1 and 2 by the quad swaps; xor 4 and 8 by the mirrors, whose partner
// holds the same value as the xor partner once the steps before have run; xor 16 and 32 by the rows), so for a
// commutative op the result is wave_sum's / wave_max's bit for bit.
// Rows = 1: lanes 0..15 only (the other lanes must hold op's identity, so the result is the 64-lane one bit for
// bit), their row's result read from lane 0: four instructions fewer.
template <int Rows = 4, class T, class Op> MM_DEVICE T wave_reduce_uniform(T v, Op op) {
  static_assert(Rows == 1 || Rows == 4, "a reduction over row 0 or over all four rows");
  auto dpp = [](T x, auto shuffle) __attribute__((always_inline)) {
    return __builtin_bit_cast(T, shuffle(__builtin_bit_cast(uint32_t, x)));
  };
  v = op(v, dpp(v, [](uint32_t x) __attribute__((always_inline)) { return dpp_mov<dpp_quad_perm(1, 0, 3, 2)>(x); }));
  v = op(v, dpp(v, [](uint32_t x) __attribute__((always_inline)) { return dpp_mov<dpp_quad_perm(2, 3, 0, 1)>(x); }));
  v = op(v, dpp(v, [](uint32_t x) __attribute__((always_inline)) { return dpp_mov<kDppRowHalfMirror>(x); }));
  v = op(v, dpp(v, [](uint32_t x) __attribute__((always_inline)) { return dpp_mov<kDppRowMirror>(x); }));
  const uint32_t u = __builtin_bit_cast(uint32_t, v);
  const T r0 = __builtin_bit_cast(T, __builtin_amdgcn_readlane(u, 0));
  if constexpr (Rows == 1) return r0;
  const T r1 = __builtin_bit_cast(T, __builtin_amdgcn_readlane(u, 16));
  const T r2 = __builtin_bit_cast(T, __builtin_amdgcn_readlane(u, 32));
  const T r3 = __builtin_bit_cast(T, __builtin_amdgcn_readlane(u, 48));
  return op(op(r0, r1), op(r2, r3));
}
// Max of uint32_t values. On the bit patterns of non-negative, non-NaN floats it is their float max (the |q| maxima
// of the a8w8 Q scale).
MM_DEVICE uint32_t wave_max_u32_uniform(uint32_t v) {
  return wave_reduce_uniform(v, [](uint32_t a, uint32_t b) __attribute__((always_inline)) {
    return __builtin_elementwise_max(a, b);
  });
}
template <int Rows = 4> MM_DEVICE float wave_sum_uniform(float v) {
  // no contraction: a product feeding the first add stays rounded, as it is before wave_sum's ds_bpermute
  return wave_reduce_uniform<Rows>(v, [](float a, float b) __attribute__((always_inline)) {
#pragma clang fp contract(off)
    return a + b;
  });
}
template <int Rows = 4> MM_DEVICE float wave_max_uniform(float v) {
  return wave_reduce_uniform<Rows>(v, [](float a, float b) __attribute__((always_inline)) {
    return __builtin_fmaxf(a, b);
  });
}

}  // namespace mm
