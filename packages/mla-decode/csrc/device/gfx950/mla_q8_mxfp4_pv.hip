// The PV stage of the planned fp8-Q x MXFP4-KV MLA decode (docs/kernels/mla_decode_formats.md, "fp8-Q x MXFP4
// on the scaled MFMA"; its numerics: reference.mla_decode_q8_mxfp4 / mxfp4_v_as_fp8), gfx950, alone: not an op,
// no public entry point; tested against float64 (tests/test_q8_mxfp4_pv_stage.py). Its LDS traffic (byte-wise
// transposed writes) is the test vehicle's, not the planned kernel's.
//
// Why a re-expression of V: MXFP4's E8M0 scales run along V's columns (one per token and 32 columns) while the
// scaled MFMA's B scale is one per 32 k = tokens and column. So per group of 32 tokens x 32 columns,
// F = the largest of the group's 32 block exponents and v' = e4m3fn_RTNE(code * 2^(e - F)), multiplied with the
// B scale 2^(F - 127): exact while e - F >= -8 (E2M1 codes times 2^-8 are e4m3fn numbers).
//
// Work: one wave per workgroup; workgroup w takes tokens 128 w .. +127 of one request (slots kv_indices[t]) and
// writes its partial o [16, 512] fp32 = sum_t P[i][t] 2^(sP[i][t/32] - 127) v'[t][c] 2^(F - 127) to out[w].
// Inputs: P fp8 e4m3fn [16, n_pad] and its E8M0 bytes [16, n_pad / 32] (n_pad = 128 x tiles; zero P past n).
//  1. Re-expression: lane l owns the group (token block tb = l / 16, column block cb = l % 16): F = max of its
//     32 tokens' scale bytes of block cb; each token's 16 code bytes -> 32 fp8 (v_cvt_scalef32_pk_f32_fp4 with
//     scale 2^(e - F), then v_cvt_pk_fp8_f32) stored transposed into LDS vt[column][token] (64 KiB), F into
//     LDS f[tb][cb].
//  2. 32 MFMAs v_mfma_scale_f32_16x16x128_f8f6f4 (A = P fp8, B = v' fp8), one per 16 output columns, the
//     reduction the 128 tokens. A (two passes of 16 k): lane 16 g + i holds P[i][16 g + e] and P[i][64 + 16 g + e];
//     its scale lane 16 kb + i the byte sP[i][kb]. B: lane 16 g + j holds vt[16 ct + j][16 g + e] and
//     vt[16 ct + j][64 + 16 g + e]; its scale lane 16 kb + j the byte f[kb][(16 ct + j) / 32].
#include "moonmath/all.hpp"

namespace {

constexpr uint32_t kLat = 512, kCodesBytes = 288, kTile = 128, kGroupTokens = 32, kColBlocks = kLat / 32;
constexpr uint32_t kColTiles = kLat / 16;  // 32 MFMAs per tile
using Pv = mm::MfmaScaled16x16x128<mm::MxFormat::E4M3, mm::MxFormat::E4M3>;

// 4 f32 -> 4 fp8 e4m3fn (RTNE), one dword
MM_DEVICE uint32_t pack_fp8x4(float a, float b, float c, float d) {
  const int lo = __builtin_amdgcn_cvt_pk_fp8_f32(a, b, 0, false);
  return static_cast<uint32_t>(__builtin_amdgcn_cvt_pk_fp8_f32(c, d, lo, true));
}

}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(64) void mla_q8_mxfp4_pv(const uint8_t* __restrict__ p, const uint8_t* __restrict__ p_scales,
                                                     const uint8_t* __restrict__ pool, const uint8_t* __restrict__ scales,
                                                     const int32_t* __restrict__ kv_indices, float* __restrict__ out,
                                                     uint32_t n, uint32_t n_pad, uint32_t slots, uint32_t scale_stride,
                                                     uint32_t scale_bytes) {
  MM_LDS uint8_t vt[kLat * kTile];
  MM_LDS uint8_t f_lds[(kTile / kGroupTokens) * kColBlocks];
  const uint32_t lane = mm::lane_id(), g = lane / 16u, x = lane % 16u;
  const uint32_t t0 = kTile * mm::block_id_x();
  const mm::buffer_rsrc pb = mm::make_buffer(pool, slots * kCodesBytes);
  const mm::buffer_rsrc sb = mm::make_buffer(scales, scale_bytes);

  // ---- 1. the group's F, then its 32 tokens x 32 columns re-expressed in fp8, transposed into LDS
  const uint32_t tb = g, cb = x;
  uint32_t slot[kGroupTokens];
  uint32_t e[kGroupTokens];
  uint32_t F = 0u;
#pragma unroll
  for (uint32_t u = 0; u < kGroupTokens; ++u) {
    const uint32_t t = t0 + kGroupTokens * tb + u;
    slot[u] = t < n ? static_cast<uint32_t>(kv_indices[t]) : 0xFFFFFFFFu;
    e[u] = slot[u] < slots ? mm::buffer_load_u8(sb, slot[u] * scale_stride + cb) : 0u;
    F = e[u] > F ? e[u] : F;
  }
  f_lds[tb * kColBlocks + cb] = static_cast<uint8_t>(F);
#pragma unroll 4
  for (uint32_t u = 0; u < kGroupTokens; ++u) {
    const mm::u32x4 codes = slot[u] < slots ? mm::buffer_load_b128(pb, slot[u] * kCodesBytes + 16u * cb)
                                            : mm::u32x4{0u, 0u, 0u, 0u};
    const int shift = static_cast<int>(e[u]) - static_cast<int>(F) + 127;  // biased exponent of 2^(e - F)
    const float sc = shift >= 1 ? mm::bit_cast<float>(static_cast<uint32_t>(shift) << 23) : 0.f;
    const uint32_t token = kGroupTokens * tb + u;
#pragma unroll
    for (uint32_t d = 0; d < 4; ++d) {
      // 8 codes (the 4 bytes of dword d; byte select must be an immediate) -> 8 fp8 in two dwords
      const mm::f32x2 v0 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(codes[d], sc, 0);
      const mm::f32x2 v1 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(codes[d], sc, 1);
      const mm::f32x2 v2 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(codes[d], sc, 2);
      const mm::f32x2 v3 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(codes[d], sc, 3);
      const uint32_t w[2] = {pack_fp8x4(v0[0], v0[1], v1[0], v1[1]), pack_fp8x4(v2[0], v2[1], v3[0], v3[1])};
      const uint32_t col = 32u * cb + 8u * d;
#pragma unroll
      for (uint32_t b = 0; b < 8; ++b) vt[(col + b) * kTile + token] = static_cast<uint8_t>(w[b / 4] >> (8u * (b % 4)));
    }
  }
  mm::block_sync();

  // ---- 2. P (A) and its scales once; 32 MFMAs over the output columns
  const mm::buffer_rsrc ab = mm::make_buffer(p, 16u * n_pad);
  const mm::buffer_rsrc asb = mm::make_buffer(p_scales, 16u * (n_pad / kGroupTokens));
  const mm::u32x4 a0 = mm::buffer_load_b128(ab, x * n_pad + t0 + 16u * g);
  const mm::u32x4 a1 = mm::buffer_load_b128(ab, x * n_pad + t0 + 64u + 16u * g);
  const mm::u32x8 a = __builtin_shufflevector(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7);
  const uint32_t sa = mm::buffer_load_u8(asb, x * (n_pad / kGroupTokens) + t0 / kGroupTokens + g);
  const mm::buffer_rsrc ob = mm::make_buffer(out + 16u * kLat * mm::block_id_x(), 16u * kLat * 4u);
#pragma unroll 4
  for (uint32_t ct = 0; ct < kColTiles; ++ct) {
    const uint32_t col = 16u * ct + x;
    const mm::u32x4 b0 = mm::lds_read_b128(vt, col * kTile + 16u * g);
    const mm::u32x4 b1 = mm::lds_read_b128(vt, col * kTile + 64u + 16u * g);
    const mm::u32x8 b = __builtin_shufflevector(b0, b1, 0, 1, 2, 3, 4, 5, 6, 7);
    const uint32_t sbv = f_lds[g * kColBlocks + col / 32u];
    const mm::f32x4 o = Pv::run<0, 0>(a, b, mm::f32x4{0.f, 0.f, 0.f, 0.f}, sa, sbv);
#pragma unroll
    for (uint32_t r = 0; r < 4; ++r) mm::buffer_store_f32(o[r], ob, 4u * ((4u * g + r) * kLat + col));
  }
}
