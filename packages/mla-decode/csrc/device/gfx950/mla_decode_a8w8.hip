// MLA absorbed decode, fp8 Q against fp8 KV (a8w8), gfx950 only (OCP e4m3fn; built from csrc/device/gfx950/):
// the numerics of the GPU MODE amd-mixed-mla reference (AITER's a8w8 kernel): Q quantised per tensor, fp8
// QK and PV MFMAs, P rounded to fp8.
//
// Two launches, no host sync: mla_q_amax (mla_q_amax.hip) writes per-workgroup maxima of |q| (q_lat and
// q_pe); every workgroup of this kernel reduces them (amax = max |q|, q_scale = amax / 448 into the score
// factor; a NaN |q| is ignored by the max), loads its bf16 Q tile (18 x 16 bytes per lane) and quantises it in
// registers, q8 = e4m3fn_RTNE(clamp(q * (448 / amax), +-448)) (quantize_q). The reduction's loads are issued
// beside the Q and slot loads, so the quantisation adds VALU work per part but no launch and no round trip
// (a separate quantising launch cost the call a launch's dependent HBM round trips, 8.7 us modeled).
//
// The body is the LDS-tile kernel of mla_decode_lds_tile.hpp (waves, pipeline) on 32-token tiles -- the 4-wave
// kernel, the one-wave _w1 and the _kv4 (four one-wave decoders per part merged in LDS) -- with these stages:
//   fetch   each KV byte of a tile once, 16 bytes a load: latent 4 loads per thread, rope 1 for threads 0..127.
//   store   K stays fp8 in LDS (32 rows of 592 bytes, 18944 bytes): the QK operand, and the PV operand read
//           transposed (ds_read_b64_tr_b8), so V needs no copy and no conversion.
//   QK      v_mfma_f32_16x16x32_fp8_fp8 (A = K, B = Q, 8 fp8 per lane: the bf16 kernels' column order),
//           2 x 18 per tile per row tile; s = q8 . c8 times scale * kv_scale * q_scale.
//   P       p' = 2^(x - m + 8) against the row's running max m (over whole tiles), rounded to e4m3fn
//           (docs/numerics.md); lse from the unrounded p.
//   PV      v_mfma_f32_16x16x32_fp8_fp8 over the 32 tokens: 32 per tile per row tile.
//   o       kv_scale * sum(p~ v) / sum(p~), bf16 RTNE.
#include "../mla_decode_lds_tile.hpp"

namespace {

using namespace mla;

constexpr float kFp8Max = 448.f;          // e4m3fn's largest finite value
constexpr uint32_t kMaxAmaxParts = 256;  // mla_q_amax's workgroups at most (formats.py's AMAX_MAX_BLOCKS)

// Four f32 -> four fp8 (RTNE, v_cvt_pk_fp8_f32), one dword.
MM_DEVICE uint32_t to_fp8x4(float a, float b, float c, float d) {
  const int lo = __builtin_amdgcn_cvt_pk_fp8_f32(a, b, 0, false);
  return (uint32_t)__builtin_amdgcn_cvt_pk_fp8_f32(c, d, lo, true);
}

// The fetch roles of a 32-token fp8 tile (each byte of the tile by one of the 256 threads, 16 bytes a load):
//   latent (all threads): tokens 4 vtg + e (e = 0..3), bytes 16 vcg .. +15 (vtg = tid / 32, vcg = tid % 32);
//   rope   (threads 0..127): token rtok = tid / 4, bytes 512 + 16 rcg .. +15.
// K stays fp8 in LDS (rows of kKStride8 bytes): the QK and, read transposed, the PV operand.
// amax_bits: a lane's max over its mla_q_amax partials (f32 bits), reduced over the wave by q_scale.
struct Fp8Kv {
  static constexpr bool kFp8Qk = true;
  static constexpr bool kPeelInKvSplit = true;  // (decode_lds_tile's kPeelFirst)
  struct Raw {
    mm::u32x4 lat[4];  // token 4 vtg + e, bytes 16 vcg .. +15
    mm::u32x4 rope;    // token rtok, bytes 512 + 16 rcg .. +15 (rope role)
  };
  uint32_t vtg, vcg, rtok, rcg;
  bool rope_role;
  uint32_t amax_bits;  // this lane's max over its mla_q_amax partials, as f32 bits
  MM_DEVICE Fp8Kv(uint32_t tid, uint32_t amax_bits)
      : vtg(tid >> 5), vcg(tid & 31u), rtok((tid >> 2) & 31u), rcg(tid & 3u), rope_role(tid < 128u),
        amax_bits(amax_bits) {}

  // Q's per-tensor scale, taken where the body quantises Q (after the first tile's loads are issued): the
  // wave's max is reduced here, not at the kernel's start, where it waited for the partials' HBM round trip
  // before the split's and the request's loads were issued (the one-wave kernel: 10916 -> 10258 cycles a part
  // at (4, 1024); the _kv4 kernel since session 9, with the integer max: 15494 -> 15428 cycles a part at
  // (32, 1024), 23000 -> 22940 at (64, 1024), 60996 -> 60890 at (256, 1024); session 7's fmax form was 2 %
  // slower so). inv = 448 / amax, qs = amax / 448 (1, 1 for amax 0).
  MM_DEVICE QScale q_scale() const {
    const float amax = mm::bit_cast<float>(mm::wave_max_u32_uniform(amax_bits));
    return amax > 0.f ? QScale{kFp8Max / amax, amax / kFp8Max} : QScale{1.f, 1.f};
  }

  // 8 bf16 of Q -> 8 e4m3fn bytes, e4m3fn_RTNE(clamp(q * q_inv, +-448)) (q_inv = q_scale().inv;
  // reference.quantize_q_a8w8), in 4
  // packed multiplies and 4 conversions. No clamp instruction: |q| <= amax, so |fp32(q * fp32(448 / amax))| <=
  // 448 (1 + 2^-24)^2 < 464, which RTNE takes to at most 448 (the non-saturating conversion overflows only
  // past 464); a NaN q stays NaN, as the reference's clamp leaves it. (448 / amax overflowing fp32, amax <
  // 2^-119, gives NaN here, and in the reference wherever q = 0.)
  MM_DEVICE mm::u32x2 quantize_q(const mm::u32x4& v, float q_inv) const {
    const mm::f32x2 inv = {q_inv, q_inv};
    mm::f32x2 f[4];
#pragma unroll
    for (int d = 0; d < 4; ++d) f[d] = mm::f32x2{mm::bf16_lo(v[d]), mm::bf16_hi(v[d])} * inv;
    return mm::u32x2{to_fp8x4(f[0].x, f[0].y, f[1].x, f[1].y), to_fp8x4(f[2].x, f[2].y, f[3].x, f[3].y)};
  }

  MM_DEVICE void fetch(Raw& raw, const void* pool, const void*, uint32_t slots, const FetchSlots& s) const {
    const mm::buffer_rsrc pb = make_pool_rows(pool, kRow, slots);
#pragma unroll
    for (int e = 0; e < 4; ++e) raw.lat[e] = pool_load_b128(pb, s.lat[e], 16u * vcg);
    if (rope_role) raw.rope = pool_load_b128(pb, s.rope, kLat + 16u * rcg);
  }

  MM_DEVICE void store(const Raw& raw, uint8_t* ks, uint8_t*) const {
#pragma unroll
    for (int e = 0; e < 4; ++e) mm::lds_write_b128(ks, (4u * vtg + e) * kKStride8 + 16u * vcg, raw.lat[e]);
    if (rope_role) mm::lds_write_b128(ks, rtok * kKStride8 + kLat + 16u * rcg, raw.rope);
  }

  // p' (in [0, 256]) -> the PV operand's 8 e4m3fn bytes (RTNE) and the sum of their values.
  MM_DEVICE mm::u32x2 round_p8(const float pr[8], float& sum) const {
    const mm::u32x2 w = {to_fp8x4(pr[0], pr[1], pr[2], pr[3]), to_fp8x4(pr[4], pr[5], pr[6], pr[7])};
    float t[4];
#pragma unroll
    for (int d = 0; d < 2; ++d) {
      const mm::f32x2 lo = mm::cvt_pk_f32_fp8<false>(w[d]), hi = mm::cvt_pk_f32_fp8<true>(w[d]);
      t[2 * d] = lo.x + lo.y;
      t[2 * d + 1] = hi.x + hi.y;
    }
    sum = (t[0] + t[1]) + (t[2] + t[3]);
    return w;
  }
};

}  // namespace

#define MLA_DECODE_A8W8_FWD_PARAMS \
    const uint16_t* __restrict__ q_lat, \
    const uint16_t* __restrict__ q_pe, \
    const float* __restrict__ amax_parts, \
    uint32_t n_amax_parts, \
    const uint8_t* __restrict__ pool, \
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
    uint32_t o_scale_bits

// The body for Waves = 4 (the 256-thread kernel) or 1 (the one-wave kernel, gfx950, for H * q_len <= 16);
// KvSplit: four one-wave decoders per workgroup over quarters of the part, merged in LDS (the _kv4 kernel).
template <uint32_t Waves, bool KvSplit = false>
MM_DEVICE void mla_decode_a8w8_fwd_body(MLA_DECODE_A8W8_FWD_PARAMS) {
  MM_LDS __attribute__((aligned(16))) uint8_t lds[KvSplit ? kSplitLdsBytes : kKStride8 * kTokens8];
  // amax over mla_q_amax's partial maxima (n_amax_parts <= kMaxAmaxParts, formats.py's AMAX_MAX_BLOCKS): 4
  // loads per lane, no loop, issued here (zeros past n_amax_parts); the wave's max in Fp8Kv::q_scale. c_qk
  // here lacks Q's factor qs (the body multiplies it in).
  const mm::buffer_rsrc pb = mm::make_buffer(amax_parts, n_amax_parts * 4u);
  // The partials are non-negative and never NaN (mla_q_amax's maxima of magnitudes, zeros past the end), so
  // their bit patterns order as the floats: an integer max, without fmax's NaN quieting.
  uint32_t amax_bits = 0;
#pragma unroll
  for (uint32_t u = 0; u < kMaxAmaxParts / 64u; ++u)
    amax_bits = __builtin_elementwise_max(amax_bits, mm::buffer_load_b32(pb, 4u * (64u * u + mm::lane_id())));
  const TileArgs a{q_lat, q_pe, pool, nullptr, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o, ws_ml,
                   B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags,
                   mm::bit_cast<float>(c_qk_bits), mm::bit_cast<float>(o_scale_bits)};
  decode_lds_tile<Waves, KvSplit>(a, lds, [amax_bits](uint32_t t) { return Fp8Kv(t, amax_bits); });
}

MM_KERNEL MM_LAUNCH_BOUNDS(256) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_a8w8_fwd(MLA_DECODE_A8W8_FWD_PARAMS) {
  mla_decode_a8w8_fwd_body<4>(q_lat, q_pe, amax_parts, n_amax_parts, pool, o_lat, seq_lens, kv_indices, kv_indptr,
                              glen, lse, ws_o, ws_ml, B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world,
                              flags, c_qk_bits, o_scale_bits);
}

#if defined(__gfx950__)
// One wave per workgroup, four fetch roles per lane: every wave computes (no helper waves).
MM_KERNEL MM_LAUNCH_BOUNDS(64) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_a8w8_fwd_w1(MLA_DECODE_A8W8_FWD_PARAMS) {
  mla_decode_a8w8_fwd_body<1>(q_lat, q_pe, amax_parts, n_amax_parts, pool, o_lat, seq_lens, kv_indices, kv_indptr,
                              glen, lse, ws_o, ws_ml, B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world,
                              flags, c_qk_bits, o_scale_bits);
}

// Four one-wave decoders per (request, part), each over a quarter of the part's tiles, merged in LDS (132 KiB:
// one workgroup per CU, a wave per SIMD): one part per request fills the CU without partials or a merge.
MM_KERNEL MM_LAUNCH_BOUNDS(256) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_a8w8_fwd_kv4(MLA_DECODE_A8W8_FWD_PARAMS) {
  mla_decode_a8w8_fwd_body<1, true>(q_lat, q_pe, amax_parts, n_amax_parts, pool, o_lat, seq_lens, kv_indices,
                                    kv_indptr, glen, lse, ws_o, ws_ml, B, H, q_len, nparts, pool_slots, n_idx, cp_rank,
                                    cp_world, flags, c_qk_bits, o_scale_bits);
}
#endif
