// MLA absorbed decode, bf16 Q against bf16 KV (a16w16): gfx942 and gfx950 (one source; the arch's QK
// step in <arch>/mla_decode_stages.hpp). The pool row is 576 bf16 (1152 bytes: 512 latent + 64 rope),
// key and value at once, no scale: nothing is quantised but P (bf16, as in a16w8) and o (bf16 RTNE).
//
// The body is the LDS-tile kernel of mla_decode_lds_tile.hpp (tiling, waves, LDS layout, pipeline, the
// threads' TileRoles: read that header). This file is the bf16 KV stage: each KV byte of a tile is read
// from the pool once, a role's 8-column piece being one 16-byte load (latent: 4 per thread, rope: 1 for
// threads 0..127), stored as is. So a tile is 1152 16-byte loads over 256 threads and no conversion VALU.
#include "mla_decode_lds_tile.hpp"

namespace {

using namespace mla;
constexpr uint32_t kRowBytes = 2u * kRow;  // 1152

struct Bf16Kv : TileRoles {
  static constexpr bool kFp8Qk = false;  // bf16 QK, bf16 P
  static constexpr bool kPeelInKvSplit = true;  // (decode_lds_tile's kPeelFirst)
  struct Raw {
    mm::u32x4 lat[4];  // token 4 vtg + e, columns 8 vcg .. +7
    mm::u32x4 rope;    // token rtok, columns 512 + 8 rcg .. +7 (rope role)
  };
  MM_DEVICE explicit Bf16Kv(uint32_t tid) : TileRoles(tid) {}

  MM_DEVICE void fetch(Raw& raw, const void* pool, const void*, uint32_t slots, const FetchSlots& s) const {
    const mm::buffer_rsrc pb = make_pool_rows(pool, kRowBytes, slots);
#pragma unroll
    for (int e = 0; e < 4; ++e) raw.lat[e] = pool_load_b128(pb, s.lat[e], 16u * vcg);
    if (rope_role) raw.rope = pool_load_b128(pb, s.rope, 2u * kLat + 16u * rcg);
  }

  MM_DEVICE void store(const Raw& raw, uint8_t* ks, uint8_t* vs) const { TileRoles::store(raw.lat, raw.rope, ks, vs); }
};

}  // namespace

#define MLA_DECODE_A16W16_FWD_PARAMS \
    const uint16_t* __restrict__ q_lat, \
    const uint16_t* __restrict__ q_pe, \
    const uint16_t* __restrict__ pool, \
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
MM_DEVICE void mla_decode_a16w16_fwd_body(MLA_DECODE_A16W16_FWD_PARAMS) {
  MM_LDS __attribute__((aligned(16))) uint8_t lds[KvSplit ? kSplitLdsBytes : kKBytes + kVBytes];
  const TileArgs a{q_lat, q_pe, pool, nullptr, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o, ws_ml,
                   B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags,
                   mm::bit_cast<float>(c_qk_bits), mm::bit_cast<float>(o_scale_bits)};
  decode_lds_tile<Waves, KvSplit>(a, lds, [](uint32_t t) { return Bf16Kv(t); });
}

MM_KERNEL MM_LAUNCH_BOUNDS(256) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_a16w16_fwd(MLA_DECODE_A16W16_FWD_PARAMS) {
  mla_decode_a16w16_fwd_body<4>(q_lat, q_pe, pool, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o, ws_ml,
                                B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags, c_qk_bits,
                                o_scale_bits);
}

#if defined(__gfx950__)
// One wave per workgroup, four fetch roles per lane: every wave computes (no helper waves).
MM_KERNEL MM_LAUNCH_BOUNDS(64) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_a16w16_fwd_w1(MLA_DECODE_A16W16_FWD_PARAMS) {
  mla_decode_a16w16_fwd_body<1>(q_lat, q_pe, pool, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o, ws_ml,
                                B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags, c_qk_bits,
                                o_scale_bits);
}

// Four one-wave decoders per (request, part), each over a quarter of the part's tiles, merged in LDS (132 KiB:
// one workgroup per CU, a wave per SIMD): one part per request fills the CU without partials or a merge.
MM_KERNEL MM_LAUNCH_BOUNDS(256) __attribute__((amdgpu_waves_per_eu(1, 1)))
void mla_decode_a16w16_fwd_kv4(MLA_DECODE_A16W16_FWD_PARAMS) {
  mla_decode_a16w16_fwd_body<1, true>(q_lat, q_pe, pool, o_lat, seq_lens, kv_indices, kv_indptr, glen, lse, ws_o,
                                      ws_ml, B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags,
                                      c_qk_bits, o_scale_bits);
}
#endif
