// MLA absorbed decode, bf16 Q against MXFP4 KV, gfx950 only (built from csrc/device/gfx950/). The pool row
// is 576 E2M1 codes packed two per byte (288 bytes; element 2b in the low nibble of byte b) with one E8M0
// scale per 32 elements (18 per row, in a separate byte matrix of row stride `scale_stride`, rows >= slots:
// the GPU MODE amd-mixed-mla layout, padding allowed).
//
// The body is the LDS-tile kernel of mla_decode_lds_tile.hpp (tiling, waves, LDS layout, pipeline, the
// threads' TileRoles: read that header). This file is the MXFP4 stage: dequantise in registers, then the
// bf16 tile store. Each E2M1 code times its 2^(e-127) is a bf16 value, so the dequantisation is exact
// (scales below 2^-126 give fp32 subnormals, which the MFMA may flush); the MFMAs are the bf16 ones, the
// rounding points are a16w16's (P to bf16, o to bf16 RTNE).
//   latent role: tokens 4 vtg + e, columns 8 vcg .. +7 = 4 bytes (one dword) of each token's row and the
//                scale byte of block vcg / 4;
//   rope role:   token rtok, columns 512 + 8 rcg .. +7 = bytes 256 + 4 rcg .. +3, scale block 16 + rcg / 4.
// So a tile is 1152 dword loads + 1152 scale-byte loads over 256 threads (the scale bytes of 4 threads
// coincide and come from L1/TA). Dequantisation: gfx950's v_cvt_scalef32_pk_bf16_fp4, two codes times
// their E8M0 scale to two bf16 per instruction (0.5 VALU per element).
// Why dequantise and not v_mfma_scale_f32_16x16x128_f8f6f4: that MFMA would need Q as fp4/fp6/fp8 with E8M0
// scales (this op keeps bf16 Q) and P quantised to an MX format for PV; see docs/numerics.md.
#include "../mla_decode_lds_tile.hpp"

namespace {

using namespace mla;
constexpr uint32_t kRowBytes = kRow / 2;  // 288
constexpr uint32_t kBlocks = kRow / 32;   // 18

// 8 E2M1 codes (a dword, element 2b in the low nibble of byte b) times 2^(e - 127) -> 8 bf16, exact (a
// subnormal product stays subnormal; e = 0xFF gives NaN): one v_cvt_scalef32_pk_bf16_fp4 per byte, its scale
// operand an f32 whose biased exponent is e.
MM_DEVICE mm::u32x4 dequant8(uint32_t w, uint32_t e) {
  const float s = mm::bit_cast<float>(e << 23);
  return mm::u32x4{mm::bit_cast<uint32_t>(__builtin_amdgcn_cvt_scalef32_pk_bf16_fp4(w, s, 0)),
                   mm::bit_cast<uint32_t>(__builtin_amdgcn_cvt_scalef32_pk_bf16_fp4(w, s, 1)),
                   mm::bit_cast<uint32_t>(__builtin_amdgcn_cvt_scalef32_pk_bf16_fp4(w, s, 2)),
                   mm::bit_cast<uint32_t>(__builtin_amdgcn_cvt_scalef32_pk_bf16_fp4(w, s, 3))};
}

struct Mxfp4Kv : TileRoles {
  static constexpr bool kFp8Qk = false;  // bf16 QK, bf16 P
  // decode_lds_tile's kPeelFirst: not in the _kv4 kernel, whose tiles then waited on their loads (interleaved
  // s_waitcnt vmcnt in the prefetch; cause not found): 84.8k -> 98.7k cycles a workgroup at 1024-token parts
  static constexpr bool kPeelInKvSplit = false;
  struct Raw {
    uint32_t lat[4], lat_s[4];  // token 4 vtg + e: codes of columns 8 vcg .. +7, their block's scale
    uint32_t rope, rope_s;      // token rtok: codes of columns 512 + 8 rcg .. +7, scale (rope role)
  };
  uint32_t scale_stride, scale_bytes;
  MM_DEVICE Mxfp4Kv(uint32_t tid, uint32_t stride, uint32_t bytes)
      : TileRoles(tid), scale_stride(stride), scale_bytes(bytes) {}

  MM_DEVICE void fetch(Raw& raw, const void* pool, const void* scales, uint32_t slots, const FetchSlots& fs) const {
    const mm::buffer_rsrc pb = make_pool_rows(pool, kRowBytes, slots);
    const mm::buffer_rsrc sb = mm::make_buffer(scales, scale_bytes);
    // A slot past the pool reads zero codes; its scale offset is pushed past the buffer (zero, not a wrap).
    auto soff = [&](uint32_t s, uint32_t blk) { return s < slots ? s * scale_stride + blk : 0xFFFFFFFFu; };
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const uint32_t s = fs.lat[e];
      raw.lat[e] = struct_load_b32(pb, s, 4u * vcg);
      raw.lat_s[e] = mm::buffer_load_u8(sb, soff(s, vcg >> 2));
    }
    const uint32_t s = fs.rope;
    raw.rope = 0u;
    raw.rope_s = 127u;  // a unit scale for the threads without the rope role (their result is not stored)
    if (rope_role) {
      raw.rope = struct_load_b32(pb, s, kLat / 2u + 4u * rcg);
      raw.rope_s = mm::buffer_load_u8(sb, soff(s, 16u + (rcg >> 2)));
    }
  }

  MM_DEVICE void store(const Raw& raw, uint8_t* ks, uint8_t* vs) const {
    mm::u32x4 lat[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) lat[e] = dequant8(raw.lat[e], raw.lat_s[e]);
    const mm::u32x4 rope = dequant8(raw.rope, raw.rope_s);  // rope role only (stored by it alone)
    TileRoles::store(lat, rope, ks, vs);
  }
};

}  // namespace

#define MLA_DECODE_MXFP4_FWD_PARAMS \
    const uint16_t* __restrict__ q_lat, \
    const uint16_t* __restrict__ q_pe, \
    const uint8_t* __restrict__ pool, \
    const uint8_t* __restrict__ scales, \
    uint16_t* __restrict__ o_lat, \
    const int32_t* __restrict__ seq_lens, \
    const int32_t* __restrict__ kv_indices, \
    const int32_t* __restrict__ kv_indptr, \
    const int32_t* __restrict__ glen, \
    float* __restrict__ lse, \
    float* __restrict__ ws_o, \
    float* __restrict__ ws_ml, \
    uint32_t B, \
    uint32_t H, \
    uint32_t q_len, \
    uint32_t nparts, \
    uint32_t pool_slots, \
    uint32_t n_idx, \
    uint32_t cp_rank, \
    uint32_t cp_world, \
    uint32_t flags, \
    uint32_t c_qk_bits, \
    uint32_t o_scale_bits, \
    uint32_t scale_stride, \
    uint32_t scale_bytes

// The body for Waves = 4 (the 256-thread kernel) or 1 (the one-wave kernel, gfx950, for H * q_len <= 16);
// KvSplit: four one-wave decoders per workgroup over quarters of the part, merged in LDS (the _kv4 kernel).
template <uint32_t Waves, bool KvSplit = false>
MM_DEVICE void mla_decode_mxfp4_fwd_body(MLA_DECODE_MXFP4_FWD_PARAMS) {
  MM_LDS __attribute__((aligned(16))) uint8_t lds[KvSplit ? kSplitLdsBytes : kKBytes + kVBytes];
  const TileArgs a{q_lat, q_pe, pool, scales, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o, ws_ml,
                   B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags,
                   mm::bit_cast<float>(c_qk_bits), mm::bit_cast<float>(o_scale_bits)};
  decode_lds_tile<Waves, KvSplit>(a, lds, [&](uint32_t t) { return Mxfp4Kv(t, scale_stride, scale_bytes); });
}

MM_KERNEL MM_LAUNCH_BOUNDS(256) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_mxfp4_fwd(MLA_DECODE_MXFP4_FWD_PARAMS) {
  mla_decode_mxfp4_fwd_body<4>(q_lat, q_pe, pool, scales, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o,
                               ws_ml, B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags, c_qk_bits,
                               o_scale_bits, scale_stride, scale_bytes);
}

#if defined(__gfx950__)
// One wave per workgroup, four fetch roles per lane: every wave computes (no helper waves).
MM_KERNEL MM_LAUNCH_BOUNDS(64) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_mxfp4_fwd_w1(MLA_DECODE_MXFP4_FWD_PARAMS) {
  mla_decode_mxfp4_fwd_body<1>(q_lat, q_pe, pool, scales, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o,
                               ws_ml, B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags, c_qk_bits,
                               o_scale_bits, scale_stride, scale_bytes);
}

// Four one-wave decoders per (request, part), each over a quarter of the part's tiles, merged in LDS (132 KiB:
// one workgroup per CU, a wave per SIMD): one part per request fills the CU without partials or a merge.
MM_KERNEL MM_LAUNCH_BOUNDS(256) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_mxfp4_fwd_kv4(MLA_DECODE_MXFP4_FWD_PARAMS) {
  mla_decode_mxfp4_fwd_body<1, true>(q_lat, q_pe, pool, scales, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse,
                                     ws_o, ws_ml, B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags,
                                     c_qk_bits, o_scale_bits, scale_stride, scale_bytes);
}
#endif
