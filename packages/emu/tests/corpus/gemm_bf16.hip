// LDS-tiled bf16 GEMM on MFMA with workgroup barriers: C[M][N] (f32) = A[M][K] (bf16) * B[K][N] (bf16).
// A workgroup of 4 waves computes a 32x32 tile of C; wave w owns the 16x16 sub-tile
// (w / 2, w % 2). Each K step stages a 32 x BK slice of A and a BK x 32 slice of B in LDS.
//   gfx942: v_mfma_f32_16x16x16_bf16, BK = 16, 4 bf16 per lane (k = 4*(lane/16) + 0..3)
//   gfx950: v_mfma_f32_16x16x32_bf16, BK = 32, 8 bf16 per lane (k = 8*(lane/16) + 0..7)
// M, N multiples of 32 and K a multiple of BK. grid = (N/32, M/32), block = 256.
#include "common.h"

#if defined(__gfx950__)
#define BK 32
#define KPL 8
typedef __bf16 bfvec __attribute__((ext_vector_type(8)));
#else
#define BK 16
#define KPL 4
typedef short bfvec __attribute__((ext_vector_type(4)));
#endif
typedef float f32x4 __attribute__((ext_vector_type(4)));

KERNEL void gemm_bf16(const u16* A, const u16* B, float* C, int M, int N, int K) {
  LDS static u16 As[32 * BK];  // [row][k]
  LDS static u16 Bs[BK * 32];  // [k][col]
  const u32 t = tid();
  const u32 wave = t / 64, lane = t % 64;
  const u32 wm = wave / 2, wn = wave % 2;
  const u32 row0 = bid_y() * 32, col0 = bid() * 32;
  const u32 i = lane % 16, g = lane / 16;
  f32x4 acc = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = 0; k0 < K; k0 += BK) {
    // stage: 32*BK elements of A and of B, (32*BK)/256 per thread
    for (u32 e = t; e < 32 * BK; e += 256) {
      const u32 r = e / BK, kk = e % BK;
      As[e] = A[(row0 + r) * (u32)K + (u32)k0 + kk];
      const u32 kb = e / 32, c = e % 32;
      Bs[e] = B[((u32)k0 + kb) * (u32)N + col0 + c];
    }
    sync_workgroup();
    bfvec a, b;
    for (int e = 0; e < KPL; ++e) {
      const u32 kk = g * KPL + (u32)e;
      u16 av = As[(wm * 16 + i) * BK + kk];
      u16 bv = Bs[kk * 32 + wn * 16 + i];
#if defined(__gfx950__)
      a[e] = __builtin_bit_cast(__bf16, av);
      b[e] = __builtin_bit_cast(__bf16, bv);
#else
      a[e] = (short)av;
      b[e] = (short)bv;
#endif
    }
#if defined(__gfx950__)
    acc = __builtin_amdgcn_mfma_f32_16x16x32_bf16(a, b, acc, 0, 0, 0);
#else
    acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, acc, 0, 0, 0);
#endif
    sync_workgroup();
  }
  // D[i][j]: register r of lane 16*(i/4) + j holds row 4*(lane/16) + r
  for (int r = 0; r < 4; ++r) {
    const u32 row = row0 + wm * 16 + g * 4 + (u32)r;
    const u32 col = col0 + wn * 16 + i;
    C[row * (u32)N + col] = acc[r];
  }
}
