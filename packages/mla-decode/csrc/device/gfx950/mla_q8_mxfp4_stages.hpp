// Stages of the fp8-Q x MXFP4-KV MLA decode on v_mfma_scale_f32_16x16x128_f8f6f4 (gfx950), shared by the stage
// kernels (mla_q8_mxfp4_qk.hip, mla_q8_mxfp4_pv.hip) and the one-part decode (mla_q8_mxfp4_fwd.hip); numerics:
// reference.mla_decode_q8_mxfp4, design: docs/kernels/mla_decode_formats.md ("fp8-Q x MXFP4 on the scaled MFMA").
// One wave; lane = 16 g + x (g the lane group, x the row of A / the column of B / the token of a QK tile).
//
// QK (qk16): 16 tokens x 16 rows per call, 5 MFMAs over the 576 columns = 4.5 x 128 (the fifth over 512..575,
//   its upper 64 k zero in both operands). A = fp8 Q (two passes of 16 k per lane: lane 16 g + i holds
//   q8[i][128 c + 16 g + e] in registers 0-3 and q8[i][128 c + 64 + 16 g + e] in 4-7), unit scales; B = the pool
//   row's E2M1 codes (one pass of 32: lane 16 g + j holds token j's bytes 64 c + 16 g .. +15) with the pool's
//   E8M0 byte of block 4 c + g as its scale. D[i][j]: lane 16 (i / 4) + j, register i % 4.
// V re-expression (reexpress_v): MXFP4's scales run along V's columns (per token and 32 columns), the MFMA's B
//   scale along k = tokens (per 32 tokens and column); so lane l owns the group (32 tokens of block l / 16, 32
//   columns of block l % 16): F = the largest of its 32 scale bytes, v' = e4m3fn_RTNE(code * 2^(e - F))
//   (v_cvt_scalef32_pk_f32_fp4, v_cvt_pk_fp8_f32), written token-major into LDS vt[token][column] (two
//   16-byte writes per token), F into f_lds[token block][column block].
// PV (pv_tile): 32 MFMAs, one per 16 of the 512 output columns, reduction over 128 tokens; A = P fp8 (two
//   passes of 16) with its E8M0 byte per row and 32 tokens, B = v' (lane 16 g + j: column 16 ct + j of tokens
//   16 g + e and 64 + 16 g + e, read transposed by ds_read_b64_tr_b8) with the byte F of (token block g, column
//   block (16 ct + j) / 32).
#pragma once
#include "moonmath/all.hpp"

namespace q8mx {

constexpr uint32_t kRow = 576, kLat = 512, kCodesBytes = kRow / 2;  // 288 bytes of E2M1 codes per pool row
constexpr uint32_t kQkChunks = 5;                                    // 4 x 128 columns and the 64-column tail
constexpr uint32_t kTile = 128, kGroupTokens = 32, kColBlocks = kLat / 32, kColTiles = kLat / 16;
constexpr uint32_t kUnitScale = 127u;                                // E8M0 2^0
using Qk = mm::MfmaScaled16x16x128<mm::MxFormat::E4M3, mm::MxFormat::E2M1>;
using Pv = mm::MfmaScaled16x16x128<mm::MxFormat::E4M3, mm::MxFormat::E4M3>;

struct QOperand {
  mm::u32x8 a[kQkChunks];
};

// Row x of q8 (fused fp8 rows of 576 bytes at q_row_bytes = x * 576 in qb), lane group g.
MM_DEVICE QOperand load_q(mm::buffer_rsrc qb, uint32_t q_row_bytes, uint32_t g) {
  QOperand q;
#pragma unroll
  for (uint32_t c = 0; c < kQkChunks; ++c) {
    const mm::u32x4 a0 = mm::buffer_load_b128(qb, q_row_bytes + 128u * c + 16u * g);
    const mm::u32x4 a1 = c == kQkChunks - 1 ? mm::u32x4{0u, 0u, 0u, 0u}
                                            : mm::buffer_load_b128(qb, q_row_bytes + 128u * c + 64u + 16u * g);
    q.a[c] = __builtin_shufflevector(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7);
  }
  return q;
}

// Keep x's producers (an MFMA and its operand preparation) in the uniform block: clang sinks an MFMA whose result
// is used only under a lane-divergent `if` into it, where the operand lanes it reads of inactive lanes are
// stale or never written (docs/kernels/mxfp4_moe_gfx950.md, "Compiler pitfall").
template <class T> MM_DEVICE void pin(T& x) { asm volatile("" : "+v"(x)); }

// s[16 rows x this lane group's token] for the token in pool slot `slot` (>= slots: zero codes, unit scale).
MM_DEVICE mm::f32x4 qk16(const QOperand& q, mm::buffer_rsrc pb, mm::buffer_rsrc sb, uint32_t slot, uint32_t slots,
                         uint32_t scale_stride, uint32_t g) {
  mm::f32x4 acc = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (uint32_t c = 0; c < kQkChunks; ++c) {
    const bool has_b = slot < slots && !(c == kQkChunks - 1 && g >= 2u);
    const mm::u32x4 b = has_b ? mm::buffer_load_b128(pb, slot * kCodesBytes + 64u * c + 16u * g) : mm::u32x4{0u, 0u, 0u, 0u};
    const uint32_t sc = has_b ? mm::buffer_load_u8(sb, slot * scale_stride + 4u * c + g) : kUnitScale;
    acc = Qk::run<0, 0>(q.a[c], b, acc, kUnitScale, sc);
  }
  return acc;
}

// 4 f32 -> 4 fp8 e4m3fn (RTNE), one dword
MM_DEVICE uint32_t pack_fp8x4(float a, float b, float c, float d) {
  const int lo = __builtin_amdgcn_cvt_pk_fp8_f32(a, b, 0, false);
  return static_cast<uint32_t>(__builtin_amdgcn_cvt_pk_fp8_f32(c, d, lo, true));
}

// The lane's group of the 128-token tile whose local token u of block tb sits in slot_of(32 tb + u) (>= slots:
// zero codes): v' into vt, F into f_lds.
template <class SlotOf>
MM_DEVICE void reexpress_v(uint8_t* vt, uint8_t* f_lds, mm::buffer_rsrc pb, mm::buffer_rsrc sb,
                           uint32_t slots, uint32_t scale_stride, uint32_t lane, SlotOf slot_of) {
  const uint32_t tb = lane / 16u, cb = lane % 16u;
  uint32_t slot[kGroupTokens], e[kGroupTokens];
  uint32_t F = 0u;
#pragma unroll
  for (uint32_t u = 0; u < kGroupTokens; ++u) {
    slot[u] = slot_of(kGroupTokens * tb + u);
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
    uint32_t w[8];  // the token's 32 columns of block cb in fp8
#pragma unroll
    for (uint32_t d = 0; d < 4; ++d) {
      // 8 codes (the 4 bytes of dword d; the byte select must be an immediate) -> 8 fp8 in two dwords
      const mm::f32x2 v0 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(codes[d], sc, 0);
      const mm::f32x2 v1 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(codes[d], sc, 1);
      const mm::f32x2 v2 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(codes[d], sc, 2);
      const mm::f32x2 v3 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(codes[d], sc, 3);
      w[2 * d] = pack_fp8x4(v0[0], v0[1], v1[0], v1[1]);
      w[2 * d + 1] = pack_fp8x4(v2[0], v2[1], v3[0], v3[1]);
    }
    const uint32_t off = (kGroupTokens * tb + u) * kLat + 32u * cb;
    mm::lds_write_b128(vt, off, mm::u32x4{w[0], w[1], w[2], w[3]});
    mm::lds_write_b128(vt, off + 16u, mm::u32x4{w[4], w[5], w[6], w[7]});
  }
}

// o[ct] += P . v' over the tile for the 32 column tiles; a = P's A operand, sa its scale byte (lane 16 kb + i).
MM_DEVICE void pv_tile(mm::f32x4 (&o)[kColTiles], mm::u32x8 a, uint32_t sa, const uint8_t* vt,
                       const uint8_t* f_lds, uint32_t g, uint32_t x) {
  // B by ds_read_b64_tr_b8 from the token-major v' rows: lane x of the group supplies the 8-byte segment of token
  // T0 + x / 2 at columns 16 ct + 8 (x % 2), and receives column 16 ct + x of tokens T0 .. T0 + 7, for
  // T0 = 16 g, 16 g + 8 (registers 0-3) and 64 + 16 g, 64 + 16 g + 8 (registers 4-7).
  const uint32_t seg = (x / 2u) * kLat + 8u * (x % 2u);
#pragma unroll
  for (uint32_t ct = 0; ct < kColTiles; ++ct) {
    const uint32_t base = seg + 16u * ct;
    const mm::u32x2 b0 = mm::lds_read_tr8_b64(vt, base + (16u * g) * kLat);
    const mm::u32x2 b1 = mm::lds_read_tr8_b64(vt, base + (16u * g + 8u) * kLat);
    const mm::u32x2 b2 = mm::lds_read_tr8_b64(vt, base + (64u + 16u * g) * kLat);
    const mm::u32x2 b3 = mm::lds_read_tr8_b64(vt, base + (64u + 16u * g + 8u) * kLat);
    const mm::u32x8 b = {b0[0], b0[1], b1[0], b1[1], b2[0], b2[1], b3[0], b3[1]};
    o[ct] = Pv::run<0, 0>(a, b, o[ct], sa, f_lds[g * kColBlocks + (16u * ct + x) / 32u]);
  }
}

}  // namespace q8mx
