// Shared stages of the MLA decode kernels, gfx942 and gfx950 (mla_decode_a16w8_ws.hip, the KV-format kernels
// over mla_decode_lds_tile.hpp, mla_decode_a16w8_merge.hip).
// The kernels are one source for both archs; the arch-specific stage (the QK MFMA step, qk_step8) is in
// gfx942/mla_decode_stages.hpp and gfx950/mla_decode_stages.hpp, picked here by the target.
//
//   request_view   one request's KV metadata read from the device and made safe: its kv_indices run
//                  [kv_indptr[b], kv_indptr[b+1]) clamped into the kv_indices tensor, its length
//                  clamped to that run (so a device-resident seq_len of 2^31-1 cannot make the kernel
//                  walk 2^27 tiles), and a buffer over just that run (rebased on the 64-bit pointer, so
//                  kv_indices may be any size; the run itself is capped at 2^30-1 entries).
//   pool           the fp8 pool as a *structured* buffer: record = one 576-byte row, num_records = the
//                  number of slots. The hardware computes base + slot * 576 + offset in 48 bits, so
//                  pools beyond 4 GiB are addressed without 64-bit VALU math, and a slot >= slots
//                  (kNoSlot, or a bad index) reads zeros.
//   finish_lse     lse = m + log2(l): -inf for an empty row, NaN when the row's inputs held NaN/Inf.
#pragma once
#include "mla_decode_args.hpp"
#include "moonmath/all.hpp"
#if defined(__gfx950__)
#include "gfx950/mla_decode_stages.hpp"
#elif defined(__gfx942__)
#include "gfx942/mla_decode_stages.hpp"
#else
#error "mla_decode: no stages for this target (gfx942, gfx950)"
#endif

namespace mla {

// A pointer field of MlaDecodeArgs (a 64-bit device address) as a typed pointer.
template <class T>
MM_DEVICE T* args_ptr(uint64_t addr) {
  return reinterpret_cast<T*>(addr);
}
// The same for memory the kernel only reads (the index arrays, the device kv_scale): through the constant
// address space, so its uniform loads stay scalar (s_load) as they were for pointer kernel arguments (a
// pointer taken from a struct is otherwise generic, and its loads flat).
template <class T>
MM_DEVICE const T* args_const_ptr(uint64_t addr) {
  return (const T*)reinterpret_cast<const __attribute__((address_space(4))) T*>(addr);
}

// The decode kernels' named arguments, unpacked from the by-value MlaDecodeArgs (one line per kernel).
#define MLA_UNPACK_ARGS(a)                                                                             \
  const uint16_t* __restrict__ q_lat = ::mla::args_ptr<const uint16_t>((a).q_lat);                     \
  const uint16_t* __restrict__ q_pe = ::mla::args_ptr<const uint16_t>((a).q_pe);                       \
  const uint8_t* __restrict__ pool = ::mla::args_ptr<const uint8_t>((a).pool);                         \
  uint16_t* __restrict__ o_lat = ::mla::args_ptr<uint16_t>((a).o_lat);                                 \
  const int32_t* __restrict__ seq_lens = ::mla::args_const_ptr<int32_t>((a).seq_lens);                 \
  const int32_t* __restrict__ kv_indices = ::mla::args_const_ptr<int32_t>((a).kv_indices);             \
  const int32_t* __restrict__ kv_indptr = ::mla::args_const_ptr<int32_t>((a).kv_indptr);               \
  const int32_t* __restrict__ glen = ::mla::args_const_ptr<int32_t>((a).glen);                         \
  float* __restrict__ lse = ::mla::args_ptr<float>((a).lse);                                           \
  float* __restrict__ ws_o = ::mla::args_ptr<float>((a).ws_o);                                         \
  float* __restrict__ ws_ml = ::mla::args_ptr<float>((a).ws_ml);                                       \
  const float* __restrict__ kv_scale_dev = ::mla::args_const_ptr<float>((a).kv_scale_dev);             \
  const uint32_t B = (a).B, H = (a).H, q_len = (a).q_len, nparts = (a).nparts, pool_slots = (a).pool_slots; \
  const uint32_t n_idx = (a).n_idx, cp_rank = (a).cp_rank, cp_world = (a).cp_world, flags = (a).flags;    \
  const uint32_t c_qk_bits = (a).c_qk_bits, o_scale_bits = (a).o_scale_bits;                           \
  const uint32_t scale_log2e_bits = (a).scale_log2e_bits

constexpr uint32_t kLat = 512;
constexpr uint32_t kRow = 576;            // fused row bytes (fp8): 512 latent + 64 rope
constexpr uint32_t kFlagLse = 1u;         // write lse (direct mode)
constexpr uint32_t kFlagPartial = 2u;     // write partials to the workspace instead of o/lse
constexpr uint32_t kFlagBalanced = 4u;    // parts per request by length (RequestUnits), not nparts each
constexpr uint32_t kFlagMergeQuarters = 8u;  // merge: each row's 512 columns in 4 blocks of their own waves
// merge: the partials' columns are in the ws kernel's MFMA output order (mfma_column), not natural order
constexpr uint32_t kFlagMergeMfmaColumns = 16u;
// merge: the partial O is fp16 and normalised by its part's ln (the ws kernel's: half the bytes of fp32; the
// rounding adds 0.2-0.5% to o's error where bf16 added 16-23%); the merge weights part p by w_p * ln_p
constexpr uint32_t kFlagMergeHalf = 32u;

// The ws kernel's partial O layout: within each 32-column block, float 4b + rr holds column 8rr + b
// (b = 0..7, rr = 0..3), so a PV lane stores each accumulator (one b, four rr) as one 16-byte chunk without
// a transpose. The column of stored float `at`:
MM_DEVICE uint32_t mfma_column(uint32_t at) { return (at & ~31u) | ((at & 3u) << 3) | ((at >> 2) & 7u); }
constexpr uint32_t kNoSlot = 0xFFFFFFFFu; // past every pool: a pool load of it returns zeros
constexpr uint32_t kMaxSpan = (1u << 30) - 1u;  // entries of one request's run (4-byte offsets < 2^32)

// Structured buffer load (idxen): address = base + index * stride + voffset + soffset; range-checked by
// index < num_records. clang has no builtin for it, so the LLVM intrinsic is named directly; the
// compiler still tracks its vmcnt like any buffer load.
__attribute__((device)) mm::u32x4 struct_buffer_load_b128(mm::buffer_rsrc r, uint32_t index, uint32_t voff,
                                                          uint32_t soff, int aux)
    __asm("llvm.amdgcn.struct.ptr.buffer.load.v4i32");

MM_DEVICE mm::buffer_rsrc make_pool(const uint8_t* pool, uint32_t slots) {
  return __builtin_amdgcn_make_buffer_rsrc(const_cast<uint8_t*>(pool), (short)kRow, (int)slots, mm::kRawBufferFlags);
}

// 16 bytes of pool row `slot` at byte `off` (off + 16 <= 576).
MM_DEVICE mm::u32x4 pool_load_b128(mm::buffer_rsrc pool, uint32_t slot, uint32_t off) {
  return struct_buffer_load_b128(pool, slot, off, 0u, 0);
}

// Window end (local rows) of position t: end-aligned causal, decode context parallel.
MM_DEVICE int32_t window_end(int32_t glen, int32_t slen, int32_t q_len, int32_t t, int32_t cp_rank,
                             int32_t cp_world) {
  // A device-resident glen near +-2^31 must not wrap: g in 64 bits, then g - cp_rank < 2^31 and the
  // rounded-up quotient fits an unsigned 32-bit division.
  const int64_t g = (int64_t)glen - (q_len - 1 - t);
  if (g <= cp_rank) return 0;
  if (cp_world == 1) return g < slen ? (int32_t)g : slen;  // no division without DCP (uniform branch)
  const uint32_t e = ((uint32_t)(g - cp_rank) + (uint32_t)cp_world - 1u) / (uint32_t)cp_world;
  return e < (uint32_t)slen ? (int32_t)e : slen;
}

struct RequestView {
  int32_t slen;          // seq_lens[b] clamped to [0, span]
  int32_t glen;          // the global length: glen[b] under DCP (window_end clamps by slen), else slen
  mm::buffer_rsrc idx;   // request b's kv_indices run; entry j at byte 4j
  uint32_t lo, span;     // that run: kv_indices[lo, lo + span) (idx rebuilt from them elsewhere)
};

MM_DEVICE uint32_t clamp_u32(int32_t v, uint32_t hi) {
  return v < 0 ? 0u : ((uint32_t)v < hi ? (uint32_t)v : hi);
}

// n_idx: usable entries of kv_indices (the host passes min(numel, 2^31 - 1): kv_indptr is int32).
MM_DEVICE RequestView request_view(const int32_t* seq_lens, const int32_t* glen, const int32_t* kv_indices,
                                   const int32_t* kv_indptr, uint32_t n_idx, uint32_t cp_world, uint32_t b) {
  const uint32_t lo = clamp_u32(kv_indptr[b], n_idx);
  uint32_t span = clamp_u32(kv_indptr[b + 1], n_idx);
  span = span > lo ? span - lo : 0u;
  span = span < kMaxSpan ? span : kMaxSpan;
  RequestView r;
  r.slen = (int32_t)clamp_u32(seq_lens[b], span);
  // Without DCP the causal ends follow the clamped length (end-aligned on it), not the raw one.
  r.glen = cp_world > 1 ? glen[b] : r.slen;
  r.idx = mm::make_buffer(kv_indices + lo, span * 4u);
  r.lo = lo;
  r.span = span;
  return r;
}

// KV tiles of request b: the window of its last position, in 16-token tiles.
MM_DEVICE uint32_t request_tiles(const int32_t* seq_lens, const int32_t* glen, const int32_t* kv_indptr, uint32_t n_idx,
                                 uint32_t q_len, uint32_t cp_rank, uint32_t cp_world, uint32_t b) {
  const uint32_t lo = clamp_u32(kv_indptr[b], n_idx);
  uint32_t span = clamp_u32(kv_indptr[b + 1], n_idx);
  span = span > lo ? span - lo : 0u;
  span = span < kMaxSpan ? span : kMaxSpan;
  const int32_t slen = (int32_t)clamp_u32(seq_lens[b], span);
  const int32_t gl = cp_world > 1 ? glen[b] : slen;
  const int32_t e = window_end(gl, slen, (int32_t)q_len, (int32_t)q_len - 1, (int32_t)cp_rank, (int32_t)cp_world);
  return e > 0 ? ((uint32_t)e + 15u) / 16u : 0u;
}

// The split of the grid's U = B * nparts units (parts) among the requests.
//   uniform (no kFlagBalanced): request b owns units [b * nparts, (b + 1) * nparts).
//   balanced: request b owns count_b = 1 + floor((U - B) * t_b / T) units (t_b its tiles, T their sum;
//     fp32 arithmetic, identical in the decode and merge kernels), each end clamped so that every later
//     request keeps at least one unit; units past the last end idle. So a 150k-token request beside
//     seven 1k ones gets ~95% of the parts instead of 1/8, and the busiest part carries ~T / (U - B)
//     tiles whatever the mix. Graph-capturable: a function of the device-resident lengths.
//   Lane-parallel: lane j of a wave serves request c0 + j of each chunk of 64 requests (one chunk up to
//     B = 64, the planner's limit for balancing), so a wave spends O(B / 64) steps, not O(B) scalar loads.
//     The clamped ends are min(inclusive prefix sum of count, cap_b): once an end meets its cap every
//     later one does (count >= 1), which is what the sequential clamp gives.
struct Units {
  uint32_t b = 0;      // the request
  uint32_t first = 0;  // its first unit
  uint32_t count = 0;  // its units (parts)
  bool valid = false;
};

struct SplitArgs {
  const int32_t* seq_lens;
  const int32_t* glen;
  const int32_t* kv_indptr;
  uint32_t n_idx, B, nparts, q_len, cp_rank, cp_world, flags;
};

// Inclusive prefix sum over the 64 lanes of a wave: Hillis-Steele inside each row of 16 lanes (DPP row_shr
// 1, 2, 4, 8, a lane past its row's start adding 0), then row 0's total into row 1, row 2's into row 3
// (row_bcast:15) and row 1's into rows 2 and 3 (row_bcast:31): the same integer sums as six ds_bpermute
// steps, in VALU latencies instead of LDS round trips (the balanced split's locate runs two of them).
template <int Ctrl, int RowMask, bool BoundZero>
MM_DEVICE uint32_t dpp_or_zero(uint32_t x) {  // lanes without a source (or outside RowMask) read 0
  return (uint32_t)__builtin_amdgcn_update_dpp(0, (int)x, Ctrl, RowMask, 0xF, BoundZero);
}
MM_DEVICE uint32_t wave_inclusive_scan(uint32_t v) {
  v += dpp_or_zero<0x111, 0xF, true>(v);  // row_shr:1
  v += dpp_or_zero<0x112, 0xF, true>(v);  // row_shr:2
  v += dpp_or_zero<0x114, 0xF, true>(v);  // row_shr:4
  v += dpp_or_zero<0x118, 0xF, true>(v);  // row_shr:8
  v += dpp_or_zero<mm::kDppRowBcast15, 0xA, false>(v);  // rows 1, 3
  v += dpp_or_zero<mm::kDppRowBcast31, 0xC, false>(v);  // rows 2, 3
  return v;
}

MM_DEVICE uint32_t lane_value(uint32_t v, uint32_t lane) { return __builtin_amdgcn_readlane(v, lane); }

// The request owning unit u (valid = false: an idle unit), or with by_request the units of request u.
MM_DEVICE Units locate(const SplitArgs& a, uint32_t u, bool by_request) {
  Units r;
  if (!(a.flags & kFlagBalanced)) {
    r.b = by_request ? u : u / a.nparts;
    r.first = r.b * a.nparts;
    r.count = a.nparts;
    r.valid = r.b < a.B;
    return r;
  }
  const uint32_t U = a.B * a.nparts, lane = mm::lane_id();
  auto tiles = [&](uint32_t c0) __attribute__((always_inline)) {
    const uint32_t b = c0 + lane;
    return b < a.B ? request_tiles(a.seq_lens, a.glen, a.kv_indptr, a.n_idx, a.q_len, a.cp_rank, a.cp_world, b) : 0u;
  };
  const uint32_t t0 = tiles(0);
  uint32_t total = lane_value(wave_inclusive_scan(t0), 63);
  for (uint32_t c0 = 64; c0 < a.B; c0 += 64) total += lane_value(wave_inclusive_scan(tiles(c0)), 63);
  const float share = total > 0 ? (float)(U - a.B) / (float)total : 0.f;
  uint32_t carry = 0;  // the (clamped) end of the previous chunk's last request
  for (uint32_t c0 = 0; c0 < a.B; c0 += 64) {
    const uint32_t b = c0 + lane;
    const uint32_t t = c0 == 0 ? t0 : tiles(c0);
    const uint32_t count = b < a.B ? 1u + (uint32_t)(share * (float)t) : 0u;
    const uint32_t cap = b < a.B ? U - (a.B - 1u - b) : U;
    uint32_t end = carry + wave_inclusive_scan(count);
    end = end < cap ? end : cap;
    const uint64_t mine = by_request ? (u >= c0 && u - c0 < 64u ? 1ull << (u - c0) : 0ull)
                                     : mm::ballot(b < a.B && u < end);
    if (mine != 0) {
      const uint32_t j = (uint32_t)__builtin_ctzll(mine);
      r.b = c0 + j;
      r.first = j == 0 ? carry : lane_value(end, j - 1u);
      r.count = lane_value(end, j) - r.first;
      r.valid = r.b < a.B;
      return r;
    }
    const uint32_t last = a.B - 1u - c0 < 63u ? a.B - 1u - c0 : 63u;
    carry = lane_value(end, last);
  }
  return r;
}

// The balanced split's end unit of each request (first + count), [B] u32 in the workspace right after the partials'
// (m, l, ln) ([total_rows * nparts] x 16 bytes of ws_ml): written by the decode of each request's first unit, read
// by the merge, which so needs no locate of its own (its ~80-instruction scan, run by every merge wave before).
MM_DEVICE void publish_request_end(float* ws_ml, uint32_t total_rows, uint32_t nparts, uint32_t flags,
                                   const Units& u, uint32_t unit) {
  if ((flags & kFlagBalanced) && (flags & kFlagPartial) && u.valid && unit == u.first && mm::lane_id() == 0)
    mm::buffer_store_b32(u.first + u.count, mm::make_buffer(ws_ml + total_rows * nparts * 4u, (u.b + 1u) * 4u),
                         u.b * 4u);
}

// kv_indices entry of request-local token `tok` (past the run: 0, harmless: such tokens are masked).
MM_DEVICE uint32_t load_slot(mm::buffer_rsrc idx, uint32_t tok) { return mm::buffer_load_b32(idx, tok * 4u); }

// Base-2 lse of a row from its running max m and sum l (of exp2(x - m)). l == 0: an empty row, -inf.
// A NaN/Inf input makes l NaN (exp2(NaN) or exp2(inf - inf)); it must stay NaN, not read as empty.
MM_DEVICE float finish_lse(float m, float l) { return l == 0.f ? -__builtin_inff() : m + mm::log2(l); }

// The pool's dequant scale as the kernels use it: c_qk = scale * kv_scale * log2(e) (scores, exp2 domain)
// and o_scale = kv_scale (o). kv_dev null: the host's values (c_qk_bits, o_scale_bits, computed in double).
// Otherwise kv_scale is the one fp32 element at kv_dev, a device tensor read here, never by the host (no
// sync): c_qk = scale_log2e * kv_scale in fp32 (within one rounding of the host's product).
struct Scales {
  float c_qk, o_scale;
};
MM_DEVICE Scales read_scales(const float* kv_dev, uint32_t c_qk_bits, uint32_t o_scale_bits, uint32_t scale_log2e_bits) {
  if (kv_dev == nullptr) return Scales{mm::bit_cast<float>(c_qk_bits), mm::bit_cast<float>(o_scale_bits)};
  const float kv = *kv_dev;
  return Scales{mm::bit_cast<float>(scale_log2e_bits) * kv, kv};
}

// 1 / normaliser for o (0 for an empty row; NaN propagates).
MM_DEVICE float inv_norm(float scale, float ln) { return ln == 0.f ? 0.f : scale / ln; }

// An empty row (no token of its window: ln == 0) writes o = 0. Its accumulators can still hold NaN (p = 0 times a
// NaN V row that another row of the tile attends), which inv_norm's factor 0 would keep, so they are cleared. One
// uniform branch: the selects run only in a wave that has an empty row.
template <class T, int N> MM_DEVICE void clear_empty_rows(T (&acc)[N], bool empty) {
  if (mm::ballot(empty) == 0) return;
#pragma unroll
  for (int c = 0; c < N; ++c) acc[c] = empty ? T{} : acc[c];
}

}  // namespace mla
