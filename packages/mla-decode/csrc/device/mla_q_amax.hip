// Per-workgroup maxima of |q| over q_lat and q_pe (bf16), the first step of mla_decode_a8w8's per-tensor Q
// quantisation (the decode kernel reduces the partials: no atomics, no zeroed buffer, no host sync, and
// the result is independent of the order). Workgroup w, thread t: 16-byte chunks c = 256 w + t, stepping
// by 256 * n_blocks, first over q_lat's chunks then q_pe's; a wave max, then the 4 waves through LDS.
#include "moonmath/all.hpp"

MM_KERNEL MM_LAUNCH_BOUNDS(256) void mla_q_amax(const uint16_t* __restrict__ q_lat, const uint16_t* __restrict__ q_pe,
                                                 float* __restrict__ parts, uint32_t lat_chunks, uint32_t pe_chunks,
                                                 uint32_t n_blocks) {
  MM_LDS float wave_max[4];
  const mm::buffer_rsrc lat = mm::make_buffer(q_lat, lat_chunks * 16u);
  const mm::buffer_rsrc pe = mm::make_buffer(q_pe, pe_chunks * 16u);
  const uint32_t tid = mm::thread_id_x();
  float m = 0.f;
  for (uint32_t c = mm::block_id_x() * 256u + tid; c < lat_chunks + pe_chunks; c += 256u * n_blocks) {
    const mm::u32x4 v =
        c < lat_chunks ? mm::buffer_load_b128(lat, 16u * c) : mm::buffer_load_b128(pe, 16u * (c - lat_chunks));
#pragma unroll
    for (int d = 0; d < 4; ++d) {
      m = __builtin_fmaxf(m, __builtin_fabsf(mm::bf16_lo(v[d])));
      m = __builtin_fmaxf(m, __builtin_fabsf(mm::bf16_hi(v[d])));
    }
  }
  m = mm::wave_max(m);
  if (mm::lane_id() == 0) wave_max[mm::wave_id()] = m;
  mm::block_sync();
  if (tid == 0) {
    const float r =
        __builtin_fmaxf(__builtin_fmaxf(wave_max[0], wave_max[1]), __builtin_fmaxf(wave_max[2], wave_max[3]));
    mm::buffer_store_f32(r, mm::make_buffer(parts, n_blocks * 4u), 4u * mm::block_id_x());
  }
}

// The second step: every workgroup reduces the partial maxima (amax = max |q|, q_scale = amax / 448; a NaN |q|
// is ignored there and still makes its own rows NaN), then its threads quantise 8 values each,
// q8 = e4m3fn_RTNE(clamp(q * (448 / amax), +-448)), into fused rows q8 [rows, 576] (q_lat's 512 columns, then
// q_pe's 64): the decode kernel's fp8 Q operand, loaded once per part as 9 x 16 bytes per lane. Chunk
// c = 256 w + t (stepping by 256 * n_blocks) is row c / 72, columns 8 (c % 72) .. +7. Block 0 writes q_scale.
// v_cvt_pk_fp8_f32 writes the arch's fp8: OCP e4m3fn on gfx950, the only arch with an a8w8 decode kernel.
MM_KERNEL MM_LAUNCH_BOUNDS(256) void mla_q_quant(const uint16_t* __restrict__ q_lat, const uint16_t* __restrict__ q_pe,
                                                  const float* __restrict__ parts, uint32_t n_parts,
                                                  uint8_t* __restrict__ q8, float* __restrict__ q_scale,
                                                  uint32_t rows, uint32_t n_blocks) {
  constexpr float kFp8Max = 448.f;
  constexpr uint32_t kChunks = 72, kLatChunks = 64;  // 8-value chunks of a row, of its latent part
  const mm::buffer_rsrc pb = mm::make_buffer(parts, n_parts * 4u);
  float amax = 0.f;
  for (uint32_t j = mm::lane_id(); j < n_parts; j += 64u) amax = __builtin_fmaxf(amax, mm::buffer_load_f32(pb, 4u * j));
  amax = mm::uniform(mm::wave_max(amax));
  const float inv = amax > 0.f ? kFp8Max / amax : 1.f;
  if (mm::block_id_x() == 0 && mm::thread_id_x() == 0)
    mm::buffer_store_f32(amax > 0.f ? amax / kFp8Max : 1.f, mm::make_buffer(q_scale, 4u), 0u);
  const mm::buffer_rsrc lat = mm::make_buffer(q_lat, rows * kLatChunks * 16u);
  const mm::buffer_rsrc pe = mm::make_buffer(q_pe, rows * (kChunks - kLatChunks) * 16u);
  const mm::buffer_rsrc out = mm::make_buffer(q8, rows * kChunks * 8u);
  for (uint32_t c = mm::block_id_x() * 256u + mm::thread_id_x(); c < rows * kChunks; c += 256u * n_blocks) {
    const uint32_t r = c / kChunks, k = c % kChunks;
    const mm::u32x4 v = k < kLatChunks ? mm::buffer_load_b128(lat, 16u * (r * kLatChunks + k))
                                       : mm::buffer_load_b128(pe, 16u * (r * (kChunks - kLatChunks) + k - kLatChunks));
    float f[8];
#pragma unroll
    for (int d = 0; d < 4; ++d) {
      f[2 * d] = __builtin_fminf(__builtin_fmaxf(mm::bf16_lo(v[d]) * inv, -kFp8Max), kFp8Max);
      f[2 * d + 1] = __builtin_fminf(__builtin_fmaxf(mm::bf16_hi(v[d]) * inv, -kFp8Max), kFp8Max);
    }
    mm::u32x2 w;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int lo = __builtin_amdgcn_cvt_pk_fp8_f32(f[4 * h], f[4 * h + 1], 0, false);
      w[h] = (uint32_t)__builtin_amdgcn_cvt_pk_fp8_f32(f[4 * h + 2], f[4 * h + 3], lo, true);
    }
    mm::buffer_store_b64(w, out, 8u * c);
  }
}
