// Per-workgroup maxima of |q| over q_lat and q_pe (bf16), the first step of mla_decode_a8w8's per-tensor Q
// quantisation (every decode workgroup reduces the partials and quantises its own Q tile: no atomics, no
// zeroed buffer, no host sync, and the result is independent of the order).
//
// One wave per workgroup, n_blocks <= 256 of them (the partials the decode reduces; formats.py sizes the grid
// at one load per wave until then). The 16-byte chunks of q_lat then q_pe are one index space (lat_chunks is
// a multiple of 64: 64 per query row); workgroup w's load u reads chunks 64 (w + u n_blocks) + lane, so every
// load lies in one tensor and picks its buffer uniformly (no per-lane resource choice). A wave issues all its
// loads (up to kMaxLoads, exactly as many as it has chunks: no duplicate or out-of-range load) before reducing
// any, so the launch is one kernel-argument load, one HBM round trip and the bytes of its CU's share. (The
// 4-wave form before, 8 chunks per thread with a per-lane buffer choice and an LDS reduction, put 32 KiB on
// each of at most 144 CUs: 4500 cycles at every shape.)
#include "moonmath/all.hpp"

namespace {
constexpr uint32_t kMaxLoads = 18;  // loads in flight per wave: B 256 x H 16 x q_len 1 (72 x 4096 chunks) in one

typedef int16_t i16x2 __attribute__((ext_vector_type(2)));

// The running max is two int16 lanes of |bf16| bit patterns plus kNanShift, 3 packed ops per dword: mask the
// sign, add kNanShift (a NaN's pattern 0x7F81.. then wraps past 0x7FFF to a negative int16), signed max. Over
// the non-NaN values that is the max of |q| (bit patterns of non-negative floats order as the floats do),
// and a NaN never wins: maxnum's NaN-ignoring max, exactly (amax_of decodes it).
constexpr int16_t kNanShift = 0x7F;  // +Inf 0x7F80 -> 0x7FFF, the largest non-negative int16
MM_DEVICE i16x2 abs_max(i16x2 m, uint32_t d) {
  const uint32_t mag = d & 0x7FFF7FFFu;
  return __builtin_elementwise_max(m, __builtin_bit_cast(i16x2, mag) + i16x2{kNanShift, kNanShift});
}
MM_DEVICE float amax_of(i16x2 m) {
  const i16x2 mag = m - i16x2{kNanShift, kNanShift};
  const float lo = __builtin_bit_cast(float, (uint32_t)(uint16_t)mag.x << 16);
  const float hi = __builtin_bit_cast(float, (uint32_t)(uint16_t)mag.y << 16);
  return __builtin_fmaxf(lo, hi);
}

// abs_max over the wave's loads u < N from chunk c0 (uniform) on, step apart, all issued before any is used.
// Lanes past q_pe's end re-read its last chunk (a duplicate changes no max).
template <uint32_t N>
MM_DEVICE i16x2 loads_max(mm::buffer_rsrc lat, mm::buffer_rsrc pe, uint32_t lat_chunks, uint32_t pe_chunks,
                          uint32_t c0, uint32_t step, i16x2 m) {
  mm::u32x4 v[N];
#pragma unroll
  for (uint32_t u = 0; u < N; ++u) {
    const uint32_t c = c0 + u * step;
    v[u] = c < lat_chunks
               ? mm::buffer_load_b128(lat, 16u * (c + mm::lane_id()))
               : mm::buffer_load_b128(pe, 16u * __builtin_elementwise_min(c - lat_chunks + mm::lane_id(), pe_chunks - 1u));
  }
#pragma unroll
  for (uint32_t u = 0; u < N; ++u)
#pragma unroll
    for (int d = 0; d < 4; ++d) m = abs_max(m, v[u][d]);
  return m;
}

// loads_max<n> for a uniform n in 1..N.
template <uint32_t N>
MM_DEVICE i16x2 loads_max_n(uint32_t n, mm::buffer_rsrc lat, mm::buffer_rsrc pe, uint32_t lat_chunks,
                            uint32_t pe_chunks, uint32_t c0, uint32_t step, i16x2 m) {
  if constexpr (N == 1) {
    return loads_max<1>(lat, pe, lat_chunks, pe_chunks, c0, step, m);
  } else {
    return n == N ? loads_max<N>(lat, pe, lat_chunks, pe_chunks, c0, step, m)
                  : loads_max_n<N - 1>(n, lat, pe, lat_chunks, pe_chunks, c0, step, m);
  }
}
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(64) void mla_q_amax(const uint16_t* __restrict__ q_lat, const uint16_t* __restrict__ q_pe,
                                                float* __restrict__ parts, uint32_t lat_chunks, uint32_t pe_chunks,
                                                uint32_t n_blocks) {
  const mm::buffer_rsrc lat = mm::make_buffer(q_lat, lat_chunks * 16u);
  const mm::buffer_rsrc pe = mm::make_buffer(q_pe, pe_chunks * 16u);
  const uint32_t total = lat_chunks + pe_chunks, step = 64u * n_blocks;
  i16x2 m = {kNanShift, kNanShift};  // |q| = 0
  // one round up to 18 loads per wave; a larger Q loops
  for (uint32_t c0 = 64u * mm::block_id_x(); c0 < total; c0 += kMaxLoads * step) {
    const uint32_t n = __builtin_elementwise_min((total - c0 + step - 1u) / step, kMaxLoads);
    m = loads_max_n<kMaxLoads>(n, lat, pe, lat_chunks, pe_chunks, c0, step, m);
  }
  const float amax = mm::wave_max_uniform(amax_of(m));
  if (mm::lane_id() == 0) mm::buffer_store_f32(amax, mm::make_buffer(parts, n_blocks * 4u), 4u * mm::block_id_x());
}
