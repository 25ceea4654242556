// MFMA layout probes: one kernel per MFMA form. Lane l loads register r of operand X from
// X[r*64 + l] (uint32 register images), runs one MFMA and stores D the same way. The test packs the
// images with the documented layouts and checks D against numpy. block = 64 (one wave).
#include "common.h"

typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef float f32x32 __attribute__((ext_vector_type(32)));
typedef int i32x4 __attribute__((ext_vector_type(4)));
typedef int i32x8 __attribute__((ext_vector_type(8)));
typedef int i32x16 __attribute__((ext_vector_type(16)));
typedef int i32x32 __attribute__((ext_vector_type(32)));
typedef double f64x4 __attribute__((ext_vector_type(4)));
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));
typedef _Float16 f16x8 __attribute__((ext_vector_type(8)));
typedef short i16x4 __attribute__((ext_vector_type(4)));
typedef __bf16 bf16x8 __attribute__((ext_vector_type(8)));
typedef long i64;

template <typename T>
DEVICE T load_regs(const u32* p, u32 lane) {
  constexpr int R = sizeof(T) / 4;
  struct { u32 r[R]; } tmp;
  for (int r = 0; r < R; ++r) tmp.r[r] = p[r * 64 + lane];
  return __builtin_bit_cast(T, tmp);
}
template <typename T>
DEVICE void store_regs(u32* p, u32 lane, T v) {
  constexpr int R = sizeof(T) / 4;
  struct { u32 r[R]; } tmp = __builtin_bit_cast(decltype(tmp), v);
  for (int r = 0; r < R; ++r) p[r * 64 + lane] = tmp.r[r];
}

#define PROBE(NAME, AT, BT, CT, CALL)                                                      \
  KERNEL void probe_##NAME(const u32* a, const u32* b, const u32* c, u32* d) {             \
    const u32 lane = tid();                                                                \
    AT av = load_regs<AT>(a, lane);                                                        \
    BT bv = load_regs<BT>(b, lane);                                                        \
    CT cv = load_regs<CT>(c, lane);                                                        \
    CT dv = CALL;                                                                          \
    store_regs<CT>(d, lane, dv);                                                           \
  }

// f32
PROBE(f32_32x32x1_2b_f32, float, float, f32x32, __builtin_amdgcn_mfma_f32_32x32x1f32(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x1_4b_f32, float, float, f32x16, __builtin_amdgcn_mfma_f32_16x16x1f32(av, bv, cv, 0, 0, 0))
PROBE(f32_4x4x1_16b_f32, float, float, f32x4, __builtin_amdgcn_mfma_f32_4x4x1f32(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x2_f32, float, float, f32x16, __builtin_amdgcn_mfma_f32_32x32x2f32(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x4_f32, float, float, f32x4, __builtin_amdgcn_mfma_f32_16x16x4f32(av, bv, cv, 0, 0, 0))
// f16
PROBE(f32_32x32x4_2b_f16, f16x4, f16x4, f32x32, __builtin_amdgcn_mfma_f32_32x32x4f16(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x4_4b_f16, f16x4, f16x4, f32x16, __builtin_amdgcn_mfma_f32_16x16x4f16(av, bv, cv, 0, 0, 0))
PROBE(f32_4x4x4_16b_f16, f16x4, f16x4, f32x4, __builtin_amdgcn_mfma_f32_4x4x4f16(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x8_f16, f16x4, f16x4, f32x16, __builtin_amdgcn_mfma_f32_32x32x8f16(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x16_f16, f16x4, f16x4, f32x4, __builtin_amdgcn_mfma_f32_16x16x16f16(av, bv, cv, 0, 0, 0))
// bf16 (the *_1k builtins; printed without the suffix)
PROBE(f32_32x32x4_2b_bf16, i16x4, i16x4, f32x32, __builtin_amdgcn_mfma_f32_32x32x4bf16_1k(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x4_4b_bf16, i16x4, i16x4, f32x16, __builtin_amdgcn_mfma_f32_16x16x4bf16_1k(av, bv, cv, 0, 0, 0))
PROBE(f32_4x4x4_16b_bf16, i16x4, i16x4, f32x4, __builtin_amdgcn_mfma_f32_4x4x4bf16_1k(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x8_bf16, i16x4, i16x4, f32x16, __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x16_bf16, i16x4, i16x4, f32x4, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(av, bv, cv, 0, 0, 0))
// i8
PROBE(i32_32x32x4_2b_i8, int, int, i32x32, __builtin_amdgcn_mfma_i32_32x32x4i8(av, bv, cv, 0, 0, 0))
PROBE(i32_16x16x4_4b_i8, int, int, i32x16, __builtin_amdgcn_mfma_i32_16x16x4i8(av, bv, cv, 0, 0, 0))
PROBE(i32_4x4x4_16b_i8, int, int, i32x4, __builtin_amdgcn_mfma_i32_4x4x4i8(av, bv, cv, 0, 0, 0))
PROBE(i32_32x32x16_i8, i64, i64, i32x16, __builtin_amdgcn_mfma_i32_32x32x16_i8(av, bv, cv, 0, 0, 0))
PROBE(i32_16x16x32_i8, i64, i64, i32x4, __builtin_amdgcn_mfma_i32_16x16x32_i8(av, bv, cv, 0, 0, 0))
// f64
PROBE(f64_16x16x4_f64, double, double, f64x4, __builtin_amdgcn_mfma_f64_16x16x4f64(av, bv, cv, 0, 0, 0))
PROBE(f64_4x4x4_4b_f64, double, double, double, __builtin_amdgcn_mfma_f64_4x4x4f64(av, bv, cv, 0, 0, 0))
// fp8 / bf8 (gfx942: fnuz, gfx950: OCP)
PROBE(f32_16x16x32_fp8_fp8, i64, i64, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x32_fp8_bf8, i64, i64, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_fp8_bf8(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x32_bf8_fp8, i64, i64, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x32_bf8_bf8, i64, i64, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x16_fp8_fp8, i64, i64, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x16_fp8_bf8, i64, i64, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x16_bf8_fp8, i64, i64, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x16_bf8_bf8, i64, i64, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8(av, bv, cv, 0, 0, 0))

// modifiers: CBSZ=1 ABID=1 BLGP=3 on a 4-block form; f64 with BLGP (= NEG on CDNA3) = 5 (negate A and C)
PROBE(mod_16x16x4_4b_f16_c1a1b3, f16x4, f16x4, f32x16, __builtin_amdgcn_mfma_f32_16x16x4f16(av, bv, cv, 1, 1, 3))
PROBE(mod_4x4x4_16b_f16_c2a3b6, f16x4, f16x4, f32x4, __builtin_amdgcn_mfma_f32_4x4x4f16(av, bv, cv, 2, 3, 6))
PROBE(mod_f64_16x16x4_neg5, double, double, f64x4, __builtin_amdgcn_mfma_f64_16x16x4f64(av, bv, cv, 0, 0, 5))

#if defined(__gfx950__)
PROBE(f32_16x16x32_bf16, bf16x8, bf16x8, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_bf16(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x16_bf16, bf16x8, bf16x8, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_bf16(av, bv, cv, 0, 0, 0))
PROBE(f32_16x16x32_f16, f16x8, f16x8, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_f16(av, bv, cv, 0, 0, 0))
PROBE(f32_32x32x16_f16, f16x8, f16x8, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_f16(av, bv, cv, 0, 0, 0))
PROBE(i32_16x16x64_i8, i32x4, i32x4, i32x4, __builtin_amdgcn_mfma_i32_16x16x64_i8(av, bv, cv, 0, 0, 0))
PROBE(i32_32x32x32_i8, i32x4, i32x4, i32x16, __builtin_amdgcn_mfma_i32_32x32x32_i8(av, bv, cv, 0, 0, 0))

// scaled f8f6f4: formats (A via CBSZ, B via BLGP) 0 fp8, 1 bf8, 2 fp6, 3 bf6, 4 fp4. Scales are
// per-lane uint32 (sa / sb); op_sel picks the byte. Constant-zero scales make LLVM emit the
// unscaled v_mfma_f32_*_f8f6f4 form (the "unscaled_" probes).
#define SCALED(SHAPE, CT, FA, FB, OA, OB)                                                           \
  KERNEL void probe_scale_##SHAPE##_f##FA##_f##FB##_o##OA##OB(const u32* a, const u32* b, const u32* c, \
                                                              const u32* sa, const u32* sb, u32* d) { \
    const u32 lane = tid();                                                                         \
    i32x8 av = load_regs<i32x8>(a, lane);                                                           \
    i32x8 bv = load_regs<i32x8>(b, lane);                                                           \
    CT cv = load_regs<CT>(c, lane);                                                                 \
    CT dv = __builtin_amdgcn_mfma_scale_f32_##SHAPE##_f8f6f4(av, bv, cv, FA, FB, OA, (int)sa[lane], OB, (int)sb[lane]); \
    store_regs<CT>(d, lane, dv);                                                                    \
  }
#define UNSCALED(SHAPE, CT, FA, FB)                                                                 \
  KERNEL void probe_unscaled_##SHAPE##_f##FA##_f##FB(const u32* a, const u32* b, const u32* c, u32* d) { \
    const u32 lane = tid();                                                                         \
    i32x8 av = load_regs<i32x8>(a, lane);                                                           \
    i32x8 bv = load_regs<i32x8>(b, lane);                                                           \
    CT cv = load_regs<CT>(c, lane);                                                                 \
    CT dv = __builtin_amdgcn_mfma_scale_f32_##SHAPE##_f8f6f4(av, bv, cv, FA, FB, 0, 0, 0, 0);      \
    store_regs<CT>(d, lane, dv);                                                                    \
  }
SCALED(16x16x128, f32x4, 0, 0, 0, 0)
SCALED(16x16x128, f32x4, 1, 0, 1, 2)
SCALED(16x16x128, f32x4, 2, 3, 3, 1)
SCALED(16x16x128, f32x4, 4, 4, 0, 3)
SCALED(16x16x128, f32x4, 4, 1, 2, 0)
SCALED(16x16x128, f32x4, 3, 2, 0, 0)
SCALED(16x16x128, f32x4, 0, 4, 0, 0)
SCALED(16x16x128, f32x4, 0, 4, 1, 2)
SCALED(16x16x128, f32x4, 4, 0, 3, 1)
SCALED(32x32x64, f32x16, 0, 0, 0, 0)
SCALED(32x32x64, f32x16, 0, 1, 3, 2)
SCALED(32x32x64, f32x16, 2, 2, 1, 1)
SCALED(32x32x64, f32x16, 4, 4, 0, 0)
SCALED(32x32x64, f32x16, 3, 4, 2, 3)
UNSCALED(16x16x128, f32x4, 0, 1)
UNSCALED(32x32x64, f32x16, 4, 2)
#endif
