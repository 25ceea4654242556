// Per-workgroup maxima of |q| over q_lat and q_pe (bf16), the first step of mla_decode_a8w8's per-tensor Q
// quantisation (every decode workgroup reduces the partials and quantises its own Q tile: no atomics, no
// zeroed buffer, no host sync, and the result is independent of the order). Workgroup w, thread t: 16-byte
// chunks c = 256 w + t, stepping by 256 * n_blocks, first over q_lat's chunks then q_pe's; a wave max, then
// the 4 waves through LDS.
// A thread issues kBatch chunk loads before using any (a chunk past the end reads zeros, which change no
// max): the launch waits on one HBM round trip per kBatch chunks instead of one per chunk (the host sizes the
// grid at 8 chunks per thread).
#include "moonmath/all.hpp"

namespace {
constexpr uint32_t kBatch = 8;  // chunk loads in flight per thread (formats.py's AMAX_CHUNKS_PER_THREAD)
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) void mla_q_amax(const uint16_t* __restrict__ q_lat, const uint16_t* __restrict__ q_pe,
                                                 float* __restrict__ parts, uint32_t lat_chunks, uint32_t pe_chunks,
                                                 uint32_t n_blocks) {
  MM_LDS float wave_max[4];
  const mm::buffer_rsrc lat = mm::make_buffer(q_lat, lat_chunks * 16u);
  const mm::buffer_rsrc pe = mm::make_buffer(q_pe, pe_chunks * 16u);
  const uint32_t tid = mm::thread_id_x();
  const uint32_t step = 256u * n_blocks;
  float m = 0.f;
  for (uint32_t c0 = mm::block_id_x() * 256u + tid; c0 < lat_chunks + pe_chunks; c0 += kBatch * step) {
    mm::u32x4 v[kBatch];
#pragma unroll
    for (uint32_t u = 0; u < kBatch; ++u) {  // all loads first; past the end: pe's range check gives zeros
      const uint32_t c = c0 + u * step;
      v[u] = c < lat_chunks ? mm::buffer_load_b128(lat, 16u * c) : mm::buffer_load_b128(pe, 16u * (c - lat_chunks));
    }
#pragma unroll
    for (uint32_t u = 0; u < kBatch; ++u) {
#pragma unroll
      for (int d = 0; d < 4; ++d) {
        m = __builtin_fmaxf(m, __builtin_fabsf(mm::bf16_lo(v[u][d])));
        m = __builtin_fmaxf(m, __builtin_fabsf(mm::bf16_hi(v[u][d])));
      }
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
