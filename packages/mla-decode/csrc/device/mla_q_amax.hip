// Per-workgroup maxima of |q| over q_lat and q_pe (bf16), the first step of mla_decode_a8w8's per-tensor Q
// quantisation (every decode workgroup reduces the partials and quantises its own Q tile: no atomics, no
// zeroed buffer, no host sync, and the result is independent of the order).
//
// Waves: one wave per workgroup, at most AMAX_MAX_BLOCKS (256) workgroups (the partials the decode reduces;
// formats.amax_launch_shape sizes them). q_lat then q_pe are one index space of wave-chunks (64 16-byte chunks,
// 1024 bytes; q_lat's count is one per query row); workgroup w reads wave-chunks w * per_wave .. + per_wave, so
// its count of loads is uniform and known without a division, and each load picks its tensor's base by a scalar
// select (no per-load branch). A wave issues all its loads (up to kMaxLoads, exactly as many as it has
// wave-chunks) before reducing any: one kernel-argument load, one HBM round trip and the bytes of its CU's share.
// q_pe's last wave-chunk may be partial: its lanes past the end re-read the last chunk (a duplicate changes no
// max, and the timing model charges no line past the tensor). The maxima are reduced as integers (magnitudes,
// never NaN: their bits order as the floats do). (Four waves per workgroup meeting in LDS were measured slower:
// B 32 / 64 / 256 2212 / 2980 / 3934 cycles.)
//
// Before (session 7): one wave per workgroup over one index space of q_lat then q_pe, chunk 64 (w + u
// n_blocks) + lane, the count per wave by a division and the tensor chosen per load: 1688 cycles at B 4
// (72 workgroups of one load), 3000 at B 256 (606 instructions a wave, issue-bound).
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
// The max's f32 bit pattern: a magnitude in 0 .. +Inf (never NaN), so its bits order as the floats do.
MM_DEVICE uint32_t amax_of(i16x2 m) {
  const i16x2 mag = m - i16x2{kNanShift, kNanShift};
  return __builtin_elementwise_max((uint32_t)(uint16_t)mag.x << 16, (uint32_t)(uint16_t)mag.y << 16);
}

// The wave-chunks of q_lat then q_pe as one index space: wave-chunk k (uniform) is q_lat's 1024 bytes k, or for
// k >= lat_wc q_pe's k - lat_wc; its lanes past q_pe's end re-read its last chunk (a duplicate changes no max).
struct QChunks {
  const uint8_t* lat;
  const uint8_t* pe;
  uint32_t lat_wc, pe_last;  // q_lat's wave-chunks; q_pe's last chunk's byte offset
  MM_DEVICE mm::u32x4 load(uint32_t k) const {
    const bool in_lat = k < lat_wc;  // uniform: a scalar select of the base, no branch
    const uint32_t kb = 1024u * (in_lat ? k : k - lat_wc);
    const uint8_t* base = (in_lat ? lat : pe) + kb;
    const uint32_t lim = in_lat ? 1008u : pe_last - kb;
    return *(const mm::u32x4*)(base + __builtin_elementwise_min(16u * mm::lane_id(), lim));
  }
};

// abs_max over the wave's wave-chunks k0 .. k0 + N - 1, all loads issued before any is used.
template <uint32_t N>
MM_DEVICE i16x2 loads_max(const QChunks& q, uint32_t k0, i16x2 m) {
  mm::u32x4 v[N];
#pragma unroll
  for (uint32_t u = 0; u < N; ++u) v[u] = q.load(k0 + u);
#pragma unroll
  for (uint32_t u = 0; u < N; ++u)
#pragma unroll
    for (int d = 0; d < 4; ++d) m = abs_max(m, v[u][d]);
  return m;
}

// loads_max<n> for a uniform n in 1..N.
template <uint32_t N>
MM_DEVICE i16x2 loads_max_n(uint32_t n, const QChunks& q, uint32_t k0, i16x2 m) {
  if constexpr (N == 1) {
    return loads_max<1>(q, k0, m);
  } else {
    return n == N ? loads_max<N>(q, k0, m) : loads_max_n<N - 1>(n, q, k0, m);
  }
}
}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(64) void mla_q_amax(const uint16_t* __restrict__ q_lat, const uint16_t* __restrict__ q_pe,
                                                float* __restrict__ parts, uint32_t lat_chunks, uint32_t pe_chunks,
                                                uint32_t per_wave) {
  const QChunks q{(const uint8_t*)q_lat, (const uint8_t*)q_pe, lat_chunks / 64u, 16u * (pe_chunks - 1u)};
  const uint32_t total = lat_chunks / 64u + (pe_chunks + 63u) / 64u, k0 = mm::block_id_x() * per_wave;
  const uint32_t count = k0 < total ? __builtin_elementwise_min(per_wave, total - k0) : 0u;
  i16x2 m = {kNanShift, kNanShift};  // |q| = 0
  if (count == 1) {  // every wave up to B 56 at H 16: no dispatch on the count
    m = loads_max<1>(q, k0, m);
  } else {  // one round of up to 18 loads per wave; a larger Q loops
    for (uint32_t u0 = 0; u0 < count; u0 += kMaxLoads)
      m = loads_max_n<kMaxLoads>(__builtin_elementwise_min(count - u0, kMaxLoads), q, k0 + u0, m);
  }
  const float amax = mm::bit_cast<float>(mm::wave_max_u32_uniform(amax_of(m)));
  if (mm::lane_id() == 0) mm::buffer_store_f32(amax, mm::make_buffer(parts, 4u * mm::block_id_x() + 4u), 4u * mm::block_id_x());
}
