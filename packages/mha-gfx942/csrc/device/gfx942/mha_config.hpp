// Tile constants of the gfx942 MHA forward, shared by the device code (mha_fwd.hip) and the host planner
// (csrc/host/mha_tail_planner.hpp, which includes this directory): plain C++, no device types.
#pragma once

namespace moonmath::mha::config {

constexpr unsigned kHeadDim = 128;
constexpr unsigned kWaves = 8;          // waves per workgroup (512 threads, two waves per SIMD)
constexpr unsigned kQTilesPerWave = 2;  // 16-row q tiles held in registers by each wave
constexpr unsigned kCtaRows = kWaves * kQTilesPerWave * 16;  // q rows per workgroup: 256
constexpr unsigned kCtaThreads = kWaves * 64;
constexpr unsigned kKvBlock = 64;       // kv rows per main-loop step
constexpr unsigned kMergeRowsPerCta = 8;  // merge kernel: 8 rows x 32 threads
// merge kernel: D / 4 threads a row (4 columns each); 96: 8 rows of 24 threads (64 threads idle)
constexpr unsigned merge_rows_per_cta(unsigned head_dim) { return head_dim == 96 ? 8 : 256 * 4 / head_dim; }

// Sliding window / causal (feature kernels): row i sees keys i + lo_shift <= j <= i + hi_shift (flash-attn's
// window, end-aligned: lo_shift = Skv - Sq - left, hi_shift = Skv - Sq + right; kUnbounded for -1).
constexpr int kUnbounded = 1 << 30;  // |shift| this large bounds nothing (rows and keys < 2^24)
struct KvRange {
  int begin, end;  // kv blocks [begin, end) holding a key of some row's window; begin == end: none
};
// The kv blocks of q rows row_first .. row_last (the item's rows below Sq): the kernel's loop range and the
// tail planner's work per item (one formula for both).
constexpr KvRange window_kv_blocks(int row_first, int row_last, int lo_shift, int hi_shift, int skv) {
  const int lo = row_first + lo_shift > 0 ? row_first + lo_shift : 0;
  const int hi = row_last + hi_shift < skv - 1 ? row_last + hi_shift : skv - 1;
  return lo > hi ? KvRange{0, 0} : KvRange{lo / (int)kKvBlock, hi / (int)kKvBlock + 1};
}

// Chiplet swizzle: CTA c runs on XCD c % 8; give each XCD a contiguous range of the head-first work
// order so the q blocks of one head share one L2. A bijection on [0, n). The default dense kernels apply it
// on the device; the feature kernels read it, reordered heaviest first, from the host's dense_order table.
constexpr unsigned xcd_contiguous(unsigned c, unsigned n) {
  const unsigned x = c & 7u, slot = c >> 3, per = n >> 3, rem = n & 7u;
  return x * per + (x < rem ? x : rem) + slot;
}

}  // namespace moonmath::mha::config
