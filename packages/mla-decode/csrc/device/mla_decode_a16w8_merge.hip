// Split-KV merge of mla_decode_a16w8_fwd's partials (gfx942 and gfx950: one source, no arch-specific stage).
//
// For one row R (row r of request b) with parts p = 0..n_b-1 (units first_b + p of the split, each
// holding row r at workspace slot unit * rows_per_request + r) holding (O_p[512] fp32 unnormalised, m_p, l_p, ln_p) where
// O_p = sum_j bf16(exp2(x_j - m_p)) v_j, l_p = sum_j exp2(x_j - m_p), ln_p = sum_j bf16(exp2(x_j - m_p)):
//   M = max_{l_p > 0} m_p,  w_p = exp2(m_p - M),  L = sum_p w_p l_p,  Ln = sum_p w_p ln_p,
//   o = o_scale * (sum_p w_p O_p) / Ln  (bf16 RTNE),  lse = M + log2(L)  (base 2).
// Parts with l_p = 0 (no token of the row in that part) carry weight 0 (their loads are unconditional): their O
// still enters times 0, so a NaN V row that the part read but the row did not attend reaches the row's o, as in
// the decode's own P V and the reference's dense product. A row with L = 0 gives o = 0 (cleared) and lse = -inf.
// A part whose l_p is NaN (its inputs held NaN/Inf) is not empty: it is folded in, so the row's lse and o are NaN.
//
// Work split: cs column blocks per row (1, or 4 for long part lists: kFlagMergeQuarters), each with wpr
// waves (the host's merge_waves_per_row(nparts), in {1, 2, 4, 8}: one wave while its parts fit 4
// iterations of 4 loads in flight, then one more power of two per doubling; the host's spread_merge_shape
// may spread them further); a workgroup of max(4, wpr) waves serves max(4, wpr) / wpr (row, block) units, so
// short splits do not pay many waves of fixed cost, or, with wpr 1, a one-wave workgroup serves one (row,
// quarter), which evens the bytes over the CUs where whole rows fill them unevenly, or, where whole rows leave
// CUs idle, a smaller power-of-two workgroup (>= wpr waves) of whole rows. Wave s of a unit takes the row's
// parts p = s, s + wpr, ...: it reads their (m, l, ln) one part per
// lane, so its max and weights cost a few instructions per 64 parts, then sums w_p O_p in part order
// (lane: 8 consecutive columns, two 16-byte loads and eight FMAs per part, four loads in flight; the first
// four are issued right after the (m, l, ln) load, before the weights are known: on the timing model (8, 8192)
// 14.1 -> 12.3 us, (32, 8192) 15.2 -> 13.1 when it landed. As compiled now, the (m, l, ln) load's unused 4th
// word shares a register with the O addresses, so an s_waitcnt vmcnt(0) separates the two; forcing the overlap
// (keeping that word live) measured slower, (8, 8192) 13.0 -> 13.2 us, gfx950 a8w8 (4, 1024) 6.5 -> 7.2: the
// first O loads then also wait for every wave's (m, l, ln) in the CU's HBM queue); with
// wpr > 1 wave 0 of the unit then folds the others' (M, L, Ln, sums) in wave order through LDS. The
// result equals the formula above up to fp32
// rounding. Fixed order for a given nparts everywhere: deterministic, no atomics.
// Prologue (ninth session): scalar, from host-computed shifts and a division multiplier, and for B <= 64 a
// straight-line locate (request_units): 382 -> 232 instructions before the (m, l, ln) load; since session 12 the
// balanced split's request ends come from the decode (mla::publish_request_end): 136 on gfx950 at (4, 1024).
// Half partials (kFlagMergeHalf: the ws kernel's): O_p is stored as fp16 O_p / ln_p, so a lane's 8 columns
// are one 16-byte load and part p's weight in the sum is w_p * ln_p (the same formula).
// Eighteenth session: one kernel per partial layout (MM_MERGE_KERNEL below: column blocks, fp16 or fp32 O, MFMA or
// natural column order; kernel.merge_kernel_name picks), so no layout test is left in a wave's stream; lanes past a
// wave's parts load through an out-of-range offset (zeros, no exec-mask branch); the (m, l, ln) load takes 3 words
// (a 4th held the O loads behind it); up to 16 parts the max and sums reduce one DPP row; at 4 column blocks in
// natural order each lane group keeps one column pair of the group sum (quarter_group_sum), so a wave publishes 2
// floats a lane and every lane stores 4 bytes. Bitwise equal to the one kernel before on 159 forced-shape runs;
// timing model, gfx950 a8w8 (4, 1024): 3.2 -> 2.3 us with the planner's new shape (spread_merge_shape).
#include "mla_decode_common.hpp"

namespace {
constexpr uint32_t kLat = 512;
constexpr uint32_t kMaxWaves = 8;  // waves per workgroup: max(4, wpr), wpr in {1, 2, 4, 8}
constexpr uint32_t kStateFloats = kLat + 4;  // one wave's published state: 512 sums, then m, l, ln
constexpr uint32_t kUnroll = 4;

// The logical block of hardware workgroup `blk`: the dispatcher deals workgroups to the 8 XCDs in turn
// (workgroup i on XCD i % 8), so consecutive logical blocks -- consecutive rows, whose (m, l, ln) of a part share a
// 128-byte line (8 rows of 16 bytes) -- are put on one XCD, where its L2 serves the line once instead of once per
// XCD. A bijection on [0, grid): with per = grid / 8 (the host's xcd_per), the last grid % 8 workgroups keep their
// index. Branch-free, on the scalar unit (blk and per are uniform).
MM_DEVICE uint32_t xcd_block_order(uint32_t blk, uint32_t per) {
  return blk < per * 8u ? (blk & 7u) * per + (blk >> 3) : blk;
}

// floor(n / d) for a divisor known to the host, by its round-up multiplier (MergeDiv in merge_plan.hpp; Granlund
// and Montgomery's unsigned division by invariant integers, exact for every 32-bit n): three scalar instructions
// instead of a ~25-instruction division, in the prologue every merge wave runs before its first load.
struct MagicDiv {
  uint32_t mul, shift;  // shift: bits 0-7 s1 (0 or 1), bits 8-15 s2 (l - 1 or 0)
  MM_DEVICE uint32_t div(uint32_t n) const {
    const uint32_t t = (uint32_t)(((uint64_t)n * mul) >> 32);
    return (t + ((n - t) >> (shift & 0xFFu))) >> (shift >> 8);
  }
};

// The units (parts) of request `req` under the split's rule (mla::locate(..., req, true)'s values): balanced, from
// the request ends its decode published (mla::publish_request_end: two scalar loads; session 12, before a
// straight-line scan in every merge wave), else req * nparts onwards.
MM_DEVICE mla::Units request_units(const mla::SplitArgs& a, uint32_t req, const float* ws_ml, uint32_t rows) {
  if (!(a.flags & mla::kFlagBalanced)) return mla::locate(a, req, true);
  const uint32_t* ends = reinterpret_cast<const uint32_t*>(ws_ml + rows * a.nparts * 4u);
  mla::Units r;
  r.b = req;
  r.first = req == 0 ? 0u : ends[req - 1u];
  r.count = ends[req] - r.first;
  r.valid = true;  // the caller passes req < B: its rows are below B * rows_req (or req 0)
  return r;
}

struct MergeState {
  float m = -__builtin_inff();
  float l = 0.f, ln = 0.f;
  // the lane's 8 columns as 4 pairs (columns 2i, 2i + 1), so a part's FMAs are 4 v_pk_fma_f32 on its loaded
  // registers as they arrive (scalar floats, the SLP vectorizer paired them across loads: 8 v_mov per part)
  mm::f32x2 acc[4] = {};
  // Fold one part (or another wave's state). l == 0: empty, no weight, but its O is still added times 0, as in
  // one wave's sum (a NaN V row it read reaches the row); NaN l is folded (NaN stays NaN).
  template <int Pairs = 4> MM_DEVICE void fold(float m2, float l2, float ln2, const float* a2) {
    const bool live = l2 != 0.f;
    const float m_new = live ? __builtin_fmaxf(m, m2) : m;
    const float s_old = m == -__builtin_inff() ? 0.f : mm::exp2(m - m_new);
    const float s_new = live ? mm::exp2(m2 - m_new) : 0.f;
    m = m_new;
    // the contractions written out (the rounding of the branchy form this replaced: bitwise the same)
    l = __builtin_fmaf(s_new, l2, l * s_old);
    ln = __builtin_fmaf(s_new, ln2, ln * s_old);
#pragma unroll
    for (int e = 0; e < Pairs; ++e)
      acc[e] = mm::f32x2{__builtin_fmaf(acc[e].x, s_old, s_new * a2[2 * e]),
                         __builtin_fmaf(acc[e].y, s_old, s_new * a2[2 * e + 1])};
  }
};
// Part k's 16-byte loads of this lane's 8 columns (b: the second half of 8 fp32; unused if Half).
struct PartLoads {
  mm::u32x4 a[kUnroll], b[kUnroll];
};
// Issue the loads of parts k = (j0 + u) * CS + grp, u < kUnroll, k < n (at_k: the byte offset of this lane's
// 8 columns of part k: 8 fp32, or 8 fp16 if Half); lanes past n read zeros (weight 0): their offset is `oob`,
// the resource's size, which the range check turns into zeros without an exec-mask branch (wo's size is a
// multiple of 1024 below 2^32, so oob + 16 does not wrap).
template <uint32_t CS, bool Half, class At>
MM_DEVICE void load_parts(PartLoads& ld, mm::buffer_rsrc wo, uint32_t oob, uint32_t j0, uint32_t n, At at_k) {
  const uint32_t grp = CS == 1 ? 0u : mm::lane_id() / (64u / CS);
#pragma unroll
  for (uint32_t u = 0; u < kUnroll; ++u) {
    if ((j0 + u) * CS >= n) break;  // wave-uniform: no loads past the wave's parts
    const uint32_t k = (j0 + u) * CS + grp;
    const uint32_t off = CS == 1 || k < n ? at_k(k) : oob;  // CS > 1: the last step's missing parts
    ld.a[u] = mm::buffer_load_b128(wo, off);
    if (!Half) ld.b[u] = mm::buffer_load_b128(wo, off + 16u);
  }
}
// st.acc += sum over parts k < n of w_k * O_k (w_k in lane k of wgt), lane group g = lane / (64 / CS) taking
// k = g (mod CS), kUnroll steps' loads in flight; `first`: the first steps' loads, already issued (so they
// overlap the weights' computation).
template <uint32_t CS, bool Half, class At>
MM_DEVICE void sum_parts(MergeState& st, mm::buffer_rsrc wo, uint32_t oob, float wgt, uint32_t n, At at_k,
                         const PartLoads& first) {
  const uint32_t grp = CS == 1 ? 0u : mm::lane_id() / (64u / CS);
  for (uint32_t j0 = 0; j0 * CS < n; j0 += kUnroll) {
    PartLoads ld;
    if (j0 == 0) ld = first;
    else load_parts<CS, Half>(ld, wo, oob, j0, n, at_k);
#pragma unroll
    for (uint32_t u = 0; u < kUnroll; ++u) {
      if ((j0 + u) * CS >= n) break;  // wave-uniform
      const uint32_t k = (j0 + u) * CS + grp;
      const float w = CS == 1 ? mm::bit_cast<float>(__builtin_amdgcn_readlane(mm::bit_cast<uint32_t>(wgt), k))
                              : mm::bit_cast<float>(mm::bpermute(mm::bit_cast<uint32_t>(wgt), k));
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (Half) {  // one v_fma_mix_f32 per value (mm::fma_f16_lo / _hi)
          st.acc[e].x = mm::fma_f16_lo(w, ld.a[u][e], st.acc[e].x);
          st.acc[e].y = mm::fma_f16_hi(w, ld.a[u][e], st.acc[e].y);
        } else {  // pair e: columns 2e, 2e + 1 (a: columns 0..3, b: 4..7)
          const mm::u32x4& src = e < 2 ? ld.a[u] : ld.b[u];
          const mm::f32x2 v = {mm::bit_cast<float>(src[2 * (e & 1)]), mm::bit_cast<float>(src[2 * (e & 1) + 1])};
          st.acc[e] = __builtin_elementwise_fma(mm::f32x2{w, w}, v, st.acc[e]);
        }
      }
    }
  }
}
// CS 4: the four lane groups hold the same 8 columns of different parts; sum them so that lane group g ends with
// the total of pair g (columns 2g, 2g + 1 of the lane's 8), in the order (g0 + g1) + (g2 + g3) of a butterfly
// (xor 16, then xor 32): each exchange sends the pair the partner keeps, so 4 + 2 exchanges of one register do
// what 8 + 8 of every pair did, and every lane then stores its own two columns. gfx950: v_permlane{16,32}_swap
// (rows 1, 3 of the first operand trade with rows 0, 2 of the second; lanes 32..63 with 0..31), else the
// exchanges tile.hpp's combine_xor16 / combine_xor32 use (ds_swizzle within 32 lanes, ds_bpermute across).
template <uint32_t Mask> MM_DEVICE float pair_sum_x(float keep_lo, float keep_hi, bool upper) {
  // lanes with `upper` keep keep_hi and send keep_lo to lane ^ Mask, which keeps keep_lo
  const float keep = upper ? keep_hi : keep_lo, send = upper ? keep_lo : keep_hi;
  const uint32_t u = mm::bit_cast<uint32_t>(send);
  return keep + mm::bit_cast<float>(Mask == 16u ? mm::swizzle_xor<16>(u) : mm::bpermute(u, mm::lane_id() ^ Mask));
}
MM_DEVICE mm::f32x2 quarter_group_sum(const mm::f32x2 (&acc)[4]) {
  mm::f32x2 b[2], c;
#if defined(__gfx950__)
  auto swap_add = [](float x, float y, bool rows16) __attribute__((always_inline)) {
    const uint32_t ux = mm::bit_cast<uint32_t>(x), uy = mm::bit_cast<uint32_t>(y);
    auto p = rows16 ? __builtin_amdgcn_permlane16_swap(ux, uy, false, false)
                    : __builtin_amdgcn_permlane32_swap(ux, uy, false, false);
    return mm::bit_cast<float>(p[0]) + mm::bit_cast<float>(p[1]);
  };
#pragma unroll
  for (int h = 0; h < 2; ++h)
    b[h] = mm::f32x2{swap_add(acc[2 * h].x, acc[2 * h + 1].x, true), swap_add(acc[2 * h].y, acc[2 * h + 1].y, true)};
  c = mm::f32x2{swap_add(b[0].x, b[1].x, false), swap_add(b[0].y, b[1].y, false)};
#else
  const uint32_t lane = mm::lane_id();
  const bool odd = (lane & 16u) != 0, upper = (lane & 32u) != 0;
#pragma unroll
  for (int h = 0; h < 2; ++h)
    b[h] = mm::f32x2{pair_sum_x<16>(acc[2 * h].x, acc[2 * h + 1].x, odd),
                     pair_sum_x<16>(acc[2 * h].y, acc[2 * h + 1].y, odd)};
  c = mm::f32x2{pair_sum_x<32>(b[0].x, b[1].x, upper), pair_sum_x<32>(b[0].y, b[1].y, upper)};
#endif
  return c;
}
}  // namespace

// dynamic LDS, (waves - 1) * kStateFloats floats when wpr > 1: the state of wave w > 0 at w - 1
extern MM_LDS float merge_state[];

template <uint32_t CS, bool Half, bool MfmaColumns>
MM_DEVICE void merge_rows(
    const float* __restrict__ ws_o,   // [B*nparts units, rows / B, 512] fp32
    const float* __restrict__ ws_ml,  // [B*nparts units, rows / B, 4] fp32 (m, l, ln, 0)
    uint16_t* __restrict__ o_lat,     // [rows, 512] bf16
    float* __restrict__ lse,          // [rows] fp32 (if flags & 1)
    uint32_t rows, uint32_t nparts, uint32_t flags, uint32_t o_scale_bits,
    // the launch's shape, from the host (kernel.py, merge_args): log2 of wpr and of the waves per workgroup,
    // grid / 8 (the XCD order), rows per request and its division multiplier (MagicDiv)
    uint32_t wpr_log2, uint32_t waves_log2, uint32_t xcd_per, uint32_t rows_req, uint32_t rq_mul, uint32_t rq_shift,
    // the split's inputs (the decode kernel's): which units hold a row's parts (mla::locate)
    const int32_t* __restrict__ seq_lens, const int32_t* __restrict__ glen, const int32_t* __restrict__ kv_indptr,
    uint32_t n_idx, uint32_t B, uint32_t q_len, uint32_t cp_rank, uint32_t cp_world,
    const float* __restrict__ kv_scale_dev) {  // [1] fp32 on the device (o_scale read here), or null
  // column split: cs = 4 (kFlagMergeQuarters) gives each (row, quarter of its 512 columns) its own wpr
  // waves, so a long part list's bytes spread over 4x the CUs; a wave's four 16-lane groups then take
  // four parts at a time (lane: 8 columns of the quarter). cs = 1: 64 lanes x 8 columns, one part at a time.
  // The prologue is scalar: every value up to the part slots is uniform (block, wave, host shapes), with shifts
  // and a multiplier where it divided (row, request, wave of the unit).
  constexpr uint32_t cs = CS, cs_log2 = CS == 4 ? 2u : 0u;
  const uint32_t wpr = 1u << wpr_log2;
  const uint32_t wave = mm::wave_id();
  const uint32_t unit_id = (xcd_block_order(mm::block_id_x(), xcd_per) << (waves_log2 - wpr_log2)) +
                           (wave >> wpr_log2);  // (row, column block)
  const uint32_t row = unit_id >> cs_log2, cblk = unit_id & (cs - 1u);
  const uint32_t sub = wave & (wpr - 1u);
  const bool valid = row < rows;  // uniform per wave; the workgroup still meets at the barrier
  const uint32_t lane = mm::lane_id();
  const uint32_t grp = lane >> (6u - cs_log2);
  const uint32_t col = (cblk << (9u - cs_log2)) + 8u * (lane & ((64u >> cs_log2) - 1u));  // this lane's 8 columns
  const uint32_t ml_bytes = rows * nparts * 16u;
  const mm::buffer_rsrc ml = mm::make_buffer(ws_ml, ml_bytes);
  constexpr bool half = Half;
  const uint32_t o_bytes = half ? 2u : 4u;  // per partial O element
  const uint32_t wo_bytes = rows * nparts * kLat * o_bytes;
  const mm::buffer_rsrc wo = mm::make_buffer(ws_o, wo_bytes);
  const uint32_t req_v = MagicDiv{rq_mul, rq_shift}.div(row);
  const uint32_t req = valid ? req_v : 0u, r_in = row - req_v * rows_req;
  const mla::Units units = request_units(
      mla::SplitArgs{seq_lens, glen, kv_indptr, n_idx, B, nparts, q_len, cp_rank, cp_world, flags}, req, ws_ml, rows);
  const uint32_t n_own = units.valid ? units.count : 0u;  // this row's parts: units first .. first + n_own - 1

  // Per wave, over its parts k = 0, 1, ... (the row's parts sub, sub + wpr, ...): first their (m, l, ln),
  // one part per lane (chunks of 64), giving the wave's max M, weights w_k = exp2(m_k - M) (0 for an
  // empty part) and the weighted sums L, Ln (DPP reductions, mm::wave_*_uniform); then O = sum_k w_k O_k, lane group g taking
  // parts k = g (mod cs): one ds_bpermute for the weight and eight FMAs per part, four parts' loads in
  // flight per lane; the groups' sums are added at the end. Every sum's order is fixed for a given
  // nparts: deterministic.
  MergeState st;
  const uint32_t n_mine = valid && n_own > sub ? (n_own - sub + wpr - 1u) >> wpr_log2 : 0u;
  auto part_slot = [&](uint32_t k) __attribute__((always_inline)) { return (units.first + sub + wpr * k) * rows_req + r_in; };
  auto meta_of = [&](uint32_t k0) __attribute__((always_inline)) {
    const uint32_t k = k0 + lane;
    // three words: a 4th, never read, would share a register the O loads' addresses take, and so hold them
    // behind this load (an s_waitcnt vmcnt(0) between)
    return mm::buffer_load_b96(ml, k < n_mine ? part_slot(k) * 16u : ml_bytes);  // past the parts: zeros
  };
  const mm::u32x3 meta0 = meta_of(0);
  // A chunk's first kUnroll steps of O loads go out before its weights are known (they need only the part
  // slots), so their latency overlaps the (m, l, ln) load and the max: one memory round trip fewer per wave.
  PartLoads first;
  auto load_first = [&](PartLoads& ld, uint32_t k0) __attribute__((always_inline)) {
    const uint32_t n_here = n_mine - k0 < 64u ? n_mine - k0 : 64u;
    auto at = [&](uint32_t k) __attribute__((always_inline)) { return (part_slot(k0 + k) * kLat + col) * o_bytes; };
    load_parts<CS, Half>(ld, wo, wo_bytes, 0u, n_here, at);
  };
  if (n_mine > 0) load_first(first, 0u);
  float m_max = -__builtin_inff();
  for (uint32_t k0 = 0; k0 < n_mine; k0 += 64u) {
    const mm::u32x3 mt = k0 == 0 ? meta0 : meta_of(k0);
    const float l = mm::bit_cast<float>(mt[1]);
    m_max = __builtin_fmaxf(m_max, l != 0.f ? mm::bit_cast<float>(mt[0]) : -__builtin_inff());
  }
  // DPP and readlanes: no LDS round trips (bitwise wave_max); up to 16 parts (lanes 0..15, the others' values
  // the identities -inf and 0) one DPP row (the same bits)
  const bool row0 = n_mine <= 16u;
  m_max = row0 ? mm::wave_max_uniform<1>(m_max) : mm::wave_max_uniform(m_max);
  st.m = m_max;
  for (uint32_t k0 = 0; k0 < n_mine; k0 += 64u) {
    const uint32_t n_here = n_mine - k0 < 64u ? n_mine - k0 : 64u;
    auto at = [&](uint32_t k) __attribute__((always_inline)) { return (part_slot(k0 + k) * kLat + col) * o_bytes; };
    if (k0 > 0) load_first(first, k0);
    const mm::u32x3 mt = k0 == 0 ? meta0 : meta_of(k0);
    const float l = mm::bit_cast<float>(mt[1]);
    // l == 0: empty (no weight); l NaN (NaN/Inf inputs) keeps its weight, so the row's L, lse and o are NaN
    const float wgt = l != 0.f ? mm::exp2(mm::bit_cast<float>(mt[0]) - m_max) : 0.f;
    st.l += row0 ? mm::wave_sum_uniform<1>(wgt * l) : mm::wave_sum_uniform(wgt * l);
    const float wln = wgt * mm::bit_cast<float>(mt[2]);
    st.ln += row0 ? mm::wave_sum_uniform<1>(wln) : mm::wave_sum_uniform(wln);
    // half partials hold O_p / ln_p: weight w_p * ln_p (l == 0 parts keep weight 0; NaN stays NaN)
    const float wo_w = half ? wgt * mm::bit_cast<float>(mt[2]) : wgt;
    sum_parts<CS, Half>(st, wo, wo_bytes, wo_w, n_here, at, first);
  }
  // CS 4 in natural order: lane group g keeps the total of its pair g only (acc[0]; columns col_own, + 1), so
  // a wave's state is 2 floats a lane; the ws kernel's MFMA order pairs stored floats rr and rr + 4 instead, so
  // there every lane keeps all 8 (the groups' sums by xor exchanges)
  constexpr bool kPairPerLane = CS == 4 && !MfmaColumns;
  constexpr int kPairs = kPairPerLane ? 1 : 4;
  const uint32_t col_own = kPairPerLane ? col + 2u * grp : col;
  if constexpr (kPairPerLane) {
    st.acc[0] = quarter_group_sum(st.acc);
  } else if constexpr (CS > 1) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      st.acc[e] += mm::f32x2{mm::xor_lane(st.acc[e].x, 16u), mm::xor_lane(st.acc[e].y, 16u)};
      st.acc[e] += mm::f32x2{mm::xor_lane(st.acc[e].x, 32u), mm::xor_lane(st.acc[e].y, 32u)};
    }
  }
  const uint32_t slot_own = kPairPerLane ? 2u * lane : 8u * lane;  // this lane's floats in a published state

  if (wpr > 1) {  // uniform over the launch
    if (sub > 0) {
#pragma unroll
      for (int e = 0; e < 2 * kPairs; ++e)
        merge_state[(wave - 1) * kStateFloats + slot_own + e] = st.acc[e / 2][e % 2];
      if (lane == 0) {
        merge_state[(wave - 1) * kStateFloats + kLat] = st.m;
        merge_state[(wave - 1) * kStateFloats + kLat + 1] = st.l;
        merge_state[(wave - 1) * kStateFloats + kLat + 2] = st.ln;
      }
    }
    mm::block_sync();
    if (sub != 0) return;
    for (uint32_t w = wave + 1; w < wave + wpr; ++w) {
      const float* o = merge_state + (w - 1) * kStateFloats;
      st.fold<kPairs>(o[kLat], o[kLat + 1], o[kLat + 2], o + slot_own);
    }
  }
  if (!valid || (!kPairPerLane && grp != 0)) return;

  const float o_scale = kv_scale_dev != nullptr ? *kv_scale_dev : mm::bit_cast<float>(o_scale_bits);
  const float inv = mla::inv_norm(o_scale, st.ln);
  const mm::buffer_rsrc ob = mm::make_buffer(o_lat, rows * kLat * 2u);
  mla::clear_empty_rows(st.acc, st.ln == 0.f);  // every part empty: o = 0, though a part's O may hold 0 x NaN
  if constexpr (kPairPerLane) {
    mm::buffer_store_b32(mm::pack_bf16x2<mm::Round::RTNE>(st.acc[0].x * inv, st.acc[0].y * inv), ob,
                         (row * kLat + col_own) * 2u);
  } else if (MfmaColumns) {  // the ws kernel's order (mfma_column): stored floats col + rr and
    // col + 4 + rr are the adjacent columns mfma_column(col + rr), +1 (four pairs, one 4-byte store each)
#pragma unroll
    for (int rr = 0; rr < 4; ++rr)
      mm::buffer_store_b32(mm::pack_bf16x2<mm::Round::RTNE>(st.acc[rr / 2][rr % 2] * inv,
                                                            st.acc[2 + rr / 2][rr % 2] * inv),
                           ob, (row * kLat + mla::mfma_column(col + rr)) * 2u);
  } else {
    mm::u32x4 o;
#pragma unroll
    for (int e = 0; e < 4; ++e) o[e] = mm::pack_bf16x2<mm::Round::RTNE>(st.acc[e].x * inv, st.acc[e].y * inv);
    mm::buffer_store_b128(o, ob, (row * kLat + col) * 2u);
  }
  if ((flags & 1u) && lane == 0 && cblk == 0) {
    mm::buffer_store_f32(mla::finish_lse(st.m, st.l), mm::make_buffer(lse, rows * 4u), row * 4u);
  }
}

// One kernel per partial layout (column blocks CS, fp16 O / ln or fp32 O, the ws kernel's MFMA column order), so
// no layout test or dead branch is left in the wave's instruction stream; the host picks by the plan
// (kernel.merge_kernel_name).
#define MM_MERGE_KERNEL(name, CS, HALF, MFMA)                                                                    \
  MM_KERNEL MM_LAUNCH_BOUNDS(64 * kMaxWaves) void name(                                                         \
      const float* __restrict__ ws_o, const float* __restrict__ ws_ml, uint16_t* __restrict__ o_lat,             \
      float* __restrict__ lse, uint32_t rows, uint32_t nparts, uint32_t flags, uint32_t o_scale_bits,           \
      uint32_t wpr_log2, uint32_t waves_log2, uint32_t xcd_per, uint32_t rows_req, uint32_t rq_mul,              \
      uint32_t rq_shift, const int32_t* __restrict__ seq_lens, const int32_t* __restrict__ glen,                 \
      const int32_t* __restrict__ kv_indptr, uint32_t n_idx, uint32_t B, uint32_t q_len, uint32_t cp_rank,       \
      uint32_t cp_world, const float* __restrict__ kv_scale_dev) {                                              \
    merge_rows<CS, HALF, MFMA>(ws_o, ws_ml, o_lat, lse, rows, nparts, flags, o_scale_bits, wpr_log2, waves_log2, \
                               xcd_per, rows_req, rq_mul, rq_shift, seq_lens, glen, kv_indptr, n_idx, B, q_len,  \
                               cp_rank, cp_world, kv_scale_dev);                                                \
  }
MM_MERGE_KERNEL(mla_decode_merge_c1, 1, false, false)
MM_MERGE_KERNEL(mla_decode_merge_c4, 4, false, false)
MM_MERGE_KERNEL(mla_decode_merge_ws_c1, 1, false, true)
MM_MERGE_KERNEL(mla_decode_merge_ws_c4, 4, false, true)
MM_MERGE_KERNEL(mla_decode_merge_ws_half_c1, 1, true, true)
MM_MERGE_KERNEL(mla_decode_merge_ws_half_c4, 4, true, true)
