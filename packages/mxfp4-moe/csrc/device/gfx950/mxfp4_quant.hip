// MXFP4 quantisation of bf16 activations for the a4w4 MoE GEMMs (gfx950): AITER's per-1x32 rule, bit
// for bit (docs/numerics.md, "MXFP4 activations").
//
//   X   bf16 [rows, K], rows x_stride elements apart, contiguous k, K % 32 == 0
//   Q   E2M1 [rows, K/2] bytes, the standard (OCP / AITER fp4x2) order: byte b holds k = 2b in its low
//       nibble and k = 2b + 1 in its high nibble
//   S   E8M0 [rows, K/32] bytes, one per 32 k
//
// One lane owns one group of 32 k: four 16-byte loads, amax in fp32 (starting at 1e-10, so an all-zero
// group gets a finite scale), the scale byte from amax (quant_scale_byte below), sixteen
// v_cvt_scalef32_pk_fp4_bf16 (x / 2^(scale - 127), round to nearest even, saturating at 6), one 16-byte
// store and one byte store. Groups are numbered row-major (row * K/32 + group) with 32 bits (the host
// checks rows * K/32 < 2^32); any workgroup size up to 256 (the host launches 64: a batch's groups then spread
// over more CUs, each one's share of HBM being what bounds this kernel), grid ceil(rows * K/32 / size). Q and
// S are contiguous, so their offsets are the group number's; X's row is divided out only when x_stride != K.
// No LDS, no barriers.
#include "gfx950/mxfp4_quant.hpp"

using namespace mm;

// Group `gid` (32 bf16, groups_per_row to a row) of X into 16 dwords.
MM_DEVICE void load_group32(const uint16_t* X, uint32_t gid, uint32_t groups_per_row, uint32_t K, uint32_t x_stride,
                            uint32_t (&w)[16]) {
  uint64_t e = (uint64_t)gid * 32u;  // element offset when rows are contiguous
  if (x_stride != K) {                // uniform
    const uint32_t row = gid / groups_per_row;
    e = (uint64_t)row * x_stride + (gid - row * groups_per_row) * 32u;
  }
  const u32x4* x = (const u32x4*)(X + e);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const u32x4 v = x[i];
    w[4 * i] = v.x;
    w[4 * i + 1] = v.y;
    w[4 * i + 2] = v.z;
    w[4 * i + 3] = v.w;
  }
}

MM_KERNEL MM_LAUNCH_BOUNDS(256) void mxfp4_quant_bf16(const uint16_t* X, uint8_t* Q, uint8_t* S, uint32_t rows,
                                                     uint32_t K, uint32_t x_stride) {
  const uint32_t groups_per_row = K / 32u;
  const uint32_t gid = block_id_x() * block_dim_x() + thread_id_x();
  if (gid >= rows * groups_per_row) return;
  uint32_t w[16];
  load_group32(X, gid, groups_per_row, K, x_stride, w);
  const moe::Mxfp4Group q = moe::quantize_group32(w);
  *(u32x4*)(Q + (uint64_t)gid * 16u) = q.codes;
  S[gid] = (uint8_t)q.scale;
}

// MXFP8 (a8w4 activations): Q e4m3 [rows, K] bytes (byte k = k), S E8M0 [rows, K/32]; one lane per group of
// 32 k as above, sixteen v_cvt_scalef32_pk_fp8_bf16 and two 16-byte stores.
MM_KERNEL MM_LAUNCH_BOUNDS(256) void mxfp8_quant_bf16(const uint16_t* X, uint8_t* Q, uint8_t* S, uint32_t rows,
                                                     uint32_t K, uint32_t x_stride) {
  const uint32_t groups_per_row = K / 32u;
  const uint32_t gid = block_id_x() * block_dim_x() + thread_id_x();
  if (gid >= rows * groups_per_row) return;
  uint32_t w[16];
  load_group32(X, gid, groups_per_row, K, x_stride, w);
  const moe::Mxfp8Group q = moe::quantize_group32_fp8(w);
  u32x4* out = (u32x4*)(Q + (uint64_t)gid * 32u);
  out[0] = q.codes[0];
  out[1] = q.codes[1];
  S[gid] = (uint8_t)q.scale;
}
