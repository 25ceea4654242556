// Per-workgroup maxima of |q| over q_lat and q_pe (bf16), the first step of mla_decode_a8w8's per-tensor Q
// quantisation (every decode workgroup reduces the partials and quantises its own Q tile: no atomics, no
// zeroed buffer, no host sync, and the result is independent of the order).
//
// Waves: one wave per workgroup, at most AMAX_MAX_BLOCKS (256) workgroups (the partials the decode reduces;
// formats.amax_launch_shape sizes them). Workgroup w takes query rows r0 = w * R * rounds .. + R * rounds - 1:
// each row's q_lat is 1024 bytes, one 16-byte chunk per lane (R loads a round); q_pe's 128-byte rows are 8 to a
// load (ceil(R / 8) loads), its lanes past the round's rows given an out-of-range offset. R is the kernel's
// (mla_q_amax_r<R>, R in kRowsPerWave; the host takes the smallest that keeps the grid within 256 workgroups, and
// for more than 4096 rows R 16 in several rounds), so each kernel's loads are straight-line code with no dispatch
// on a count (a runtime ladder over R let the compiler hoist the first load out of its arms and wait for it
// before issuing the rest: two HBM round trips). Both tensors are read through buffer resources of their sizes,
// the row base in the scalar offset and the load's place in the immediate: a load past a tensor's end reads
// zeros (no max changes), and no load picks its tensor or clamps its address (the one index space over q_lat
// then q_pe before, session 9, spent ~14 scalar instructions a load on that: 644 instructions a wave at B 256,
// 2912 cycles, issue-bound). A wave issues all of a round's loads before reducing any. The maxima are reduced as
// integers (magnitudes, never NaN: their bits order as the floats do). (Four waves per workgroup meeting in LDS
// were measured slower: B 32 / 64 / 256 2212 / 2980 / 3934 cycles.)
#include "moonmath/all.hpp"

namespace {
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

constexpr uint32_t kLatRowBytes = 1024;   // 512 bf16: one 16-byte chunk per lane
constexpr uint32_t kPeRowBytes = 128;     // 64 bf16
constexpr uint32_t kPeRowsPerLoad = 8;    // 64 lanes x 16 bytes / 128
constexpr uint32_t kOutOfRange = 0x80000000u;  // a voffset past any Q tensor (the buffer reads zeros)

// abs_max over rows r0 .. r0 + R - 1 of q_lat and q_pe (rows past a tensor's end read as zeros), all loads issued
// before any is used.
template <uint32_t R>
MM_DEVICE i16x2 rows_max(mm::buffer_rsrc lat, mm::buffer_rsrc pe, uint32_t r0, i16x2 m) {
  constexpr uint32_t kPe = (R + kPeRowsPerLoad - 1) / kPeRowsPerLoad;
  const uint32_t lane = mm::lane_id();
  mm::u32x4 v[R + kPe];
#pragma unroll
  for (uint32_t u = 0; u < R; ++u) v[u] = mm::buffer_load_b128(lat, 16u * lane + kLatRowBytes * u, kLatRowBytes * r0);
#pragma unroll
  for (uint32_t u = 0; u < kPe; ++u) {
    const bool mine = lane + 64u * u < (kPeRowBytes / 16u) * R;  // lane's q_pe row within the wave's R rows
    v[R + u] = mm::buffer_load_b128(pe, mine ? 16u * lane + kPeRowsPerLoad * kPeRowBytes * u : kOutOfRange, kPeRowBytes * r0);
  }
#pragma unroll
  for (uint32_t u = 0; u < R + kPe; ++u)
#pragma unroll
    for (int d = 0; d < 4; ++d) m = abs_max(m, v[u][d]);
  return m;
}

}  // namespace

// The kernel of R rows per round (formats.AMAX_ROWS_PER_WAVE lists the instantiations): `rounds` rounds a wave.
template <uint32_t R>
MM_DEVICE void q_amax_body(const uint16_t* q_lat, const uint16_t* q_pe, float* parts, uint32_t rows, uint32_t rounds) {
  const mm::buffer_rsrc lat = mm::make_buffer(q_lat, rows * kLatRowBytes), pe = mm::make_buffer(q_pe, rows * kPeRowBytes);
  const uint32_t r0 = mm::block_id_x() * R * rounds;
  i16x2 m = {kNanShift, kNanShift};  // |q| = 0
  for (uint32_t k = 0; k < rounds; ++k) m = rows_max<R>(lat, pe, r0 + k * R, m);
  const float amax = mm::bit_cast<float>(mm::wave_max_u32_uniform(amax_of(m)));
  if (mm::lane_id() == 0) mm::buffer_store_f32(amax, mm::make_buffer(parts, 4u * mm::block_id_x() + 4u), 4u * mm::block_id_x());
}

#define MLA_Q_AMAX(R)                                                                                        \
  MM_KERNEL MM_LAUNCH_BOUNDS(64) void mla_q_amax_r##R(const uint16_t* __restrict__ q_lat,                      \
                                                      const uint16_t* __restrict__ q_pe, float* __restrict__ parts, \
                                                      uint32_t rows, uint32_t rounds) {                       \
    q_amax_body<R>(q_lat, q_pe, parts, rows, rounds);                                                         \
  }
MLA_Q_AMAX(1)
MLA_Q_AMAX(2)
MLA_Q_AMAX(3)
MLA_Q_AMAX(4)
MLA_Q_AMAX(6)
MLA_Q_AMAX(8)
MLA_Q_AMAX(12)
MLA_Q_AMAX(16)
