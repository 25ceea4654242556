// MLA absorbed decode, gfx942 (and gfx950 through its stage file): the warp-specialised 8-wave kernel.
//
// The math (the one a16w8 decode kernel; the fourth session's one-wave and shared-tile kernels are retired):
//   rows   r = t*H + h (position t, head h) of request b, packed 16 to a tile, so any H and q_len fill
//          tiles; global row R = b*q_len*H + r indexes q_lat/q_pe/o_lat/lse directly.
//   parts  the grid holds U = B * nparts units; request b owns count_b of them (nparts each, or by length
//          with kFlagBalanced: mla_decode_common.hpp, locate) and its window [0, E_b) is cut into count_b
//          runs of whole 16-token tiles.
//   softmax in the exp2 domain (x = s * scale * kv_scale * log2(e)), running max per row; a row's
//          arithmetic depends on its own scores only, so KV outside its window cannot change it.
//   output with one part o = kv_scale * O / ln (bf16 RTNE; ln the sum of the bf16 p the MFMA used) and
//          lse = m + log2(l); otherwise partials (O / ln fp16 up to 64 parts, else fp32 O; m, l, ln fp32)
//          that mla_decode_a16w8_merge combines in a fixed order (deterministic, no atomics).
//   safety the pool is a structured buffer of 576-byte records (a bad slot reads zeros; pools beyond
//          4 GiB need no 64-bit math); each request's kv_indices run is its own buffer. A NaN score makes
//          l and lse NaN; a NaN in a KV row a row does not attend still reaches it through the shared PV
//          MFMA (p = 0 times NaN), as in the reference's dense P V product.
// How the KV reaches the MFMAs:
//   each KV row is fetched ONCE, at fp8 width (576 bytes), widened once to bf16 into LDS, and both MFMA
//   operands, K (for S = K Q^T) and V^T (for O += P V), are read from that one copy.
//
// Workgroup = 512 threads = 8 waves = one (request, KV part, group of up to 4 row tiles of 16 rows).
//   contract waves 0..nrt-1   one row tile each: Q in registers (18 x 16 B per lane), S = K Q^T over
//                             576 columns (36 16x16x16 MFMAs on gfx942, 18 16x16x32 on gfx950), online
//                             softmax; P (bf16) and each row's rescale factor published to LDS.
//   waves nrt..3              no role: they end at once (s_barrier counts only running waves).
//   PV / fill waves 4..7      PV split by output columns: wave 4 + f owns columns [128f, 128f + 128) of
//                             every row tile (8 MFMAs per row tile per KV tile; 32 accumulator registers
//                             per row tile instead of 128), and fills the tiles n = f, f + 4, ...: it
//                             fetches tile n + 4 (9 x 16 B per lane: lane l = token l/4, bytes
//                             [144 (l%4), +144)) while the other three fill waves' tiles are in flight,
//                             so four tiles of loads are in flight; then widens its tile into LDS.
//   A SIMD holds one contract wave and one PV wave: 36 QK MFMAs beside 32 PV MFMAs per row tile.
// Slot indices: each tile's 16 kv_indices entries are loaded once (16 lanes of the wave that fetches the
// tile, one round ahead) and spread to the fetching lanes by ds_bpermute.
//
// LDS (65024 bytes):
//   tile[3]     [16 tokens][592 bf16] (stride 1184 B: 74 16-byte chunks = 2 mod 8 groups of 4 banks) — the
//               widened KV tile, three in rotation, written by the fill lanes (2 x 16 B per 16 fp8); chunk c
//               of an odd token is stored at chunk c ^ 1 (chunk_swizzle). Stride and swizzle make the K and
//               V^T ds_read_b128 conflict-free in CDNA 3's 8-lane phases (lanes 0-3 + 20-23, 4-7 + 16-19,
//               ...; docs/performance.md) and the fill writes conflict-free in 8 consecutive lanes; the
//               previous 1168-byte stride (1 mod 8) was conflict-free only for consecutive-lane reads.
//               K read (QK, lane (i, g)): token i, columns 32m + 8g .. +7 (m = 0..17: m < 16 latent,
//               the rest rope, so every Q chunk is wave-uniformly latent or rope), one ds_read_b128 per
//               8-column step, the same column order as Q's registers.
//               V^T read (PV wave f, lane (i, g)): tokens 4g + e (e = 0..3), columns 128f + 8i .. +7,
//               one ds_read_b128 per token; v_perm (0x05040100 / 0x07060302: the low / high bf16 halves
//               of two dwords) turns the 4 x 8 block into the A operands of eight MFMAs (block b: output
//               column 128f + 8i + b), so D reg rr of lane (j, g) holds row j's column 128f + 32g + 8rr + b.
//   p[2][4]     per row tile, 16 bytes per lane: P in the MFMA B layout (lane (j, g) holds
//               P[tokens 4g..4g+3][row j] as 4 bf16) and the rescale factor of row j (1.0: none),
//               written and read by the same lane index, one 16-byte access each way. Before the first
//               steps its last 64 bytes carry the part (request, token range, run, scales): wave 0 locates
//               it once (the split's prefix sums, the request's run and window) and the other waves read
//               it after one barrier, instead of each of the 8 waves locating it.
//
// Pipeline: one barrier per step; at step s (tiles in a 3-slot ring):
//   PV wave 4 + s % 4   widen tile s into slot s % 3, then fetch tile s + 4 and the slots of tile s + 8
//   contract waves      QK + softmax of tile s - 1 (slot (s-1) % 3) -> p[(s-1) % 2]
//   PV waves            PV of tile s - 2 (slot (s-2) % 3, p[(s-2) % 2]), then the V^T reads of tile s - 1
//                       for the next step (its slot is complete: widened at step s - 1), so after the
//                       barrier a PV wave waits only for its P records
// so one wave's widening VALU overlaps the others' MFMAs; the MFMA phases run at s_setprio 1.
// Before step 0 the fill waves issue their first tiles' slot and KV loads, and the contract waves most of
// their Q only after them (one issue-order barrier): Q is needed a step later than tile 0.
// Each hazard is one step apart: slot s % 3 was last read for PV(s - 3) (issued at the end of step s - 2,
// consumed at step s - 1); p[s % 2] by PV(s - 2) at step s - 1.
//
// Softmax: base 2, x = s * scale * kv_scale * log2(e). Running max per row; it moves only when a tile's
// max exceeds it by more than kLazyMax (log2 units), and a PV wave rescales a row tile's accumulator only
// when one of its rows moved. The contract waves' softmax arithmetic is plain fp32 VALU (mul_f32, add_f32,
// fma_f32), never the packed v_pk_*_f32 the compiler would pair it into: a packed op waits passes + 2 slots
// after every MFMA on its SIMD, so beside the PV wave's MFMA stream it waited for the whole stream.
//
// Output: direct (one part) o = kv_scale * O / ln in bf16 RTNE and lse = m + log2(l); otherwise partials
// for mla_decode_a16w8_merge: (m, l, ln) in fp32 as the other variants, and O / ln in fp16 RTNE under
// kFlagMergeHalf (half the bytes of fp32 O; the host sets it up to kHalfPartialsMaxParts parts), else fp32
// O, its columns in the PV MFMA's
// output order (mfma_column in mla_decode_common.hpp: two accumulators stored as they are, no transpose),
// which the merge reads under kFlagMergeMfmaColumns.
#include "mla_decode_common.hpp"
#include "moonmath/convert.hpp"
#include <type_traits>

namespace {

using namespace mla;
constexpr uint32_t kMaxRowTiles = 4;   // contract waves 0..3
constexpr uint32_t kFillWave0 = 4;     // PV / fill waves 4..7
constexpr uint32_t kFillWaves = 4;
constexpr uint32_t kPvCols = 128;      // output columns per PV wave
constexpr uint32_t kRing = 3;          // LDS tile slots
constexpr uint32_t kKStride = 1184;    // bytes per token row in LDS (576 bf16 + 32 bytes pad); see the header
constexpr uint32_t kTileBytes = 16 * kKStride;
constexpr uint32_t kPBytes = 64 * 16;   // one row tile's P and alpha
constexpr uint32_t kPOff = kRing * kTileBytes;
constexpr uint32_t kLdsBytes = kPOff + 2 * kMaxRowTiles * kPBytes;
// The workgroup's part (48 bytes), published by wave 0 before the first step: at the end of the P area
// (p[1][3]'s last lanes), which no wave writes before the second step's barrier, by when every wave has read
// the part; and past the epilogue's row statistics (the first 256 bytes), written even by a part without
// steps.
constexpr uint32_t kPartOff = kLdsBytes - 64;
static_assert(kLdsBytes <= 65536, "gfx942 LDS");
constexpr float kLazyMax = 0.0f;  // log2 units; see the header
// Q chunks (of 18 per lane) a contract wave loads before the issue-order barrier, the rest after it (see there).
// On the timing model (B 1, H 16, one part per CU): 6 cut a one-tile part by 2086 cycles at q_len 4 and 370 at
// q_len 1, and left 17- and 31-tile parts at q_len 4 unchanged; 0 (all of Q after) cost 200 cycles there.
constexpr int kQEarly = 6;

// The LDS tile's 16-byte chunk swizzle: chunk c of token t sits at chunk c ^ (t & 1) of its row (byte offset
// XOR 16 for odd tokens). With the 74-chunk stride (2 mod 8 bank groups) every access to the tile is
// conflict-free: the K and V^T ds_read_b128 in CDNA 3's 8-lane phases and the fill waves' ds_write_b128.
MM_DEVICE uint32_t chunk_swizzle(uint32_t token) { return (token & 1u) << 4; }

// Plain (unpacked) fp32 VALU for the steps beside the MFMA streams. The packed forms v_pk_{mul,add,fma}_f32,
// which the compiler pairs float operations into, may issue only passes + 2 slots after any MFMA issued on
// their SIMD (docs/performance.md, "MFMA -> VALU co-execution"): while the SIMD's other wave streams its
// MFMAs, a packed op waits for the whole stream (the score scaling after QK waited ~470 cycles per tile).
// The plain forms wait one slot. The same IEEE operation per lane, so the same bits.
MM_DEVICE float mul_f32(float a, float b) {
  float r;
  asm("v_mul_f32 %0, %1, %2" : "=v"(r) : "v"(a), "v"(b));
  return r;
}
MM_DEVICE float add_f32(float a, float b) {
  float r;
  asm("v_add_f32 %0, %1, %2" : "=v"(r) : "v"(a), "v"(b));
  return r;
}
MM_DEVICE float fma_f32(float a, float b, float c) {
  float r;
  asm("v_fma_f32 %0, %1, %2, %3" : "=v"(r) : "v"(a), "v"(b), "v"(c));
  return r;
}

// Widen 16 fp8 bytes to 16 bf16 (exact), in order.
MM_DEVICE void widen16(const mm::u32x4& w, mm::u32x4& lo, mm::u32x4& hi) {
  uint32_t o[8];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const mm::f32x2 a = mm::cvt_pk_f32_fp8<false>(w[q]);
    const mm::f32x2 b = mm::cvt_pk_f32_fp8<true>(w[q]);
    o[2 * q] = mm::pack_bf16x2_hi(a.x, a.y);
    o[2 * q + 1] = mm::pack_bf16x2_hi(b.x, b.y);
  }
  lo = mm::u32x4{o[0], o[1], o[2], o[3]};
  hi = mm::u32x4{o[4], o[5], o[6], o[7]};
}


// Everything a workgroup needs that does not depend on its number of row tiles.
struct Work {
  const uint16_t* q_lat;
  const uint16_t* q_pe;
  uint16_t* o_lat;
  float* lse;
  float* ws_o;
  float* ws_ml;
  mm::buffer_rsrc pool, idx;
  uint32_t B, H, q_len, rows, nparts, unit, grp, b, cp_rank, cp_world, flags;
  int32_t slen, glen;
  uint32_t k0, k1, nt;
  float c_qk, o_scale;
};

// One wave's part of a workgroup with NRT row tiles; its role (contract, or PV / fill) is a template
// argument, so each role's step loop carries no tests of the other's (both meet the same barriers: one
// per step).
template <uint32_t NRT, bool kContract, bool kFill>
MM_DEVICE void decode_group(const Work& w, uint8_t* lds) {
  const uint32_t wave = mm::wave_id();
  const uint32_t lane = mm::lane_id();
  const uint32_t i = lane & 15u, g = lane >> 4;
  constexpr bool contract = kContract;
  constexpr bool fill = kFill;
  const uint32_t fill_id = wave - kFillWave0;
  const uint32_t rows = w.rows, k0 = w.k0, k1 = w.k1, nt = w.nt;

  // ---- contract role: this wave's row tile -----------------------------------------------------------
  const uint32_t r = (w.grp * kMaxRowTiles + wave) * 16u + i;
  const bool live = contract && r < rows;
  const int32_t e_row = live ? window_end(w.glen, w.slen, (int32_t)w.q_len, (int32_t)(r / w.H), (int32_t)w.cp_rank,
                                          (int32_t)w.cp_world)
                             : 0;
  const int32_t e_lane = e_row < (int32_t)k1 ? e_row : (int32_t)k1;
  // Row ends grow with the row, so lane 0's end is the wave's smallest live one: a tile ending at or
  // before it needs no mask.
  const uint32_t e_live = mm::uniform((uint32_t)(e_lane > 0 ? e_lane : 0));

  float m_run = -__builtin_inff();
  float l_run = 0.f, ln_run = 0.f;

  // One register array for two roles (never the same wave): a contract wave's Q tile, chunk m = columns
  // 32m + 8g .. +7 (m < 16: latent, else rope: uniform over the wave, so no divergent loads), and a fill
  // wave's fetched fp8 tile (the first 9 entries).
  mm::u32x4 q[18];
  mm::u32x4* const raw = q;
  // ---- fill role: lane l fetches token l/4, bytes [144 (l%4), +144) ----------------------------------
  const uint32_t f_tok = lane >> 2, f_col = 144u * (lane & 3u);
  uint32_t slot_next = 0;
  // Tile n's slots: lanes 0..15 load entry k + lane once; tokens past the part read kNoSlot (zeros).
  auto load_slots = [&](uint32_t n) __attribute__((always_inline)) {
    const uint32_t k = k0 + 16u * n;
    uint32_t s = kNoSlot;
    if (lane < 16u && k + lane < k1) s = load_slot(w.idx, k + lane);
    return s;
  };
  auto fetch = [&](uint32_t slots16) __attribute__((always_inline)) {
    const uint32_t s = mm::bpermute(slots16, f_tok);
#pragma unroll
    for (int m = 0; m < 9; ++m) raw[m] = struct_buffer_load_b128(w.pool, s, f_col, 16u * m, 0);
  };
  if (fill && fill_id < nt) {
    const uint32_t s0 = load_slots(fill_id);
    if (fill_id + kFillWaves < nt) slot_next = load_slots(fill_id + kFillWaves);
    fetch(s0);
  }

  // Issue order: the fill waves' first slot and KV loads go to the memory queue before most of the contract
  // waves' Q (q_len * H * 1152 bytes: at q_len 4 eight tiles' worth). Q is needed one step after the first
  // tile; issued first, it held the first tile behind it. An issue-order barrier only (nothing is shared
  // through it), met once by every running wave.
  // Q (contract waves): the first kQEarly chunks now, the rest after the issue-order barrier below.
  // Dead rows read past the buffers: zeros.
  const mm::buffer_rsrc qlat_buf = mm::make_buffer(w.q_lat, w.B * rows * kLat * 2u);
  const mm::buffer_rsrc qpe_buf = mm::make_buffer(w.q_pe, w.B * rows * 64u * 2u);
  const uint32_t R = w.b * rows + r;
  const uint32_t lat_off = live ? R * kLat * 2u + 16u * g : 0x80000000u;
  const uint32_t pe_off = live ? R * 64u * 2u + 16u * g : 0x80000000u;
  auto load_q = [&](auto lo_c, auto hi_c) __attribute__((always_inline)) {
    constexpr int lo = decltype(lo_c)::value, hi = decltype(hi_c)::value;
#pragma unroll
    for (int m = lo; m < hi; ++m)
      q[m] = m < 16 ? mm::buffer_load_b128(qlat_buf, lat_off + 64u * m) : mm::buffer_load_b128(qpe_buf, pe_off + 64u * (m - 16));
  };
  if constexpr (contract) load_q(std::integral_constant<int, 0>{}, std::integral_constant<int, kQEarly>{});
  mm::sched_barrier();
  __builtin_amdgcn_s_barrier();
  mm::sched_barrier();
  if constexpr (contract) load_q(std::integral_constant<int, kQEarly>{}, std::integral_constant<int, 18>{});

  // ---- PV role: the wave's 128 output columns of every row tile ---------------------------------------
  // Not zeroed here: the first PV step's MFMAs take a zero C operand (an inline constant), so no wave
  // spends 32 v_mov per row tile; a part without tiles zeroes them before its stores.
  mm::f32x4 acc[NRT][8];

  // LDS byte offsets of the ring slots (rotated every step): tile s (written), s - 1 (QK), s - 2 (PV).
  uint32_t slot_w = 0, slot_q = 2u * kTileBytes, slot_p = kTileBytes;
  // PV waves: the V^T reads of the next step's PV tile, issued before the step's barrier (that tile was
  // widened the step before, so its slot is complete; the fill overwrites it only two barriers later): after
  // the barrier the PV MFMAs wait for their P records alone.
  mm::u32x4 d[4];
  auto read_vt = [&](uint32_t slot) __attribute__((always_inline)) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      d[e] = mm::lds_read_b128(lds, slot + (4u * g + e) * kKStride + 2u * kPvCols * fill_id + (16u * i ^ chunk_swizzle(e)));
  };
  const uint32_t n_steps = nt > 0 ? nt + 2u : 0u;
  for (uint32_t s = 0; s < n_steps; ++s) {
    // Fill: widen tile s into its slot, then fetch tile s + 4 and the slots of tile s + 8.
    if (fill && (s & 3u) == fill_id) {
      if (s < nt) {
        const uint32_t base = slot_w + f_tok * kKStride + 2u * f_col;
        const uint32_t f_lo = chunk_swizzle(f_tok);  // odd tokens swap the 16-byte halves of each 32 bytes
#pragma unroll
        for (int m = 0; m < 9; ++m) {
          mm::u32x4 lo, hi;
          widen16(raw[m], lo, hi);
          mm::lds_write_b128(lds, base + 32u * m + f_lo, lo);
          mm::lds_write_b128(lds, base + 32u * m + (16u - f_lo), hi);
        }
      }
      if (s + kFillWaves < nt) {
        fetch(slot_next);
        if (s + 2u * kFillWaves < nt) slot_next = load_slots(s + 2u * kFillWaves);
      }
    }

    // Contract: S = K Q^T of tile s - 1, online softmax, publish P and alpha.
    if (contract && s >= 1u && s - 1u < nt) {
      const uint32_t k = k0 + 16u * (s - 1u);
      mm::set_priority<1>();
      mm::f32x4 sc = {0.f, 0.f, 0.f, 0.f};
      {
        constexpr int kGrp = 3, kNGrp = 18 / kGrp;
        mm::u32x4 kw[2][kGrp];
        // chunk m at + 64m: columns 32m + 8g
        const uint32_t kbase = slot_q + i * kKStride + (16u * g ^ chunk_swizzle(i));
#pragma unroll
        for (int u = 0; u < kGrp; ++u) kw[0][u] = mm::lds_read_b128(lds, kbase + 64u * u);
#pragma unroll
        for (int gi = 0; gi < kNGrp; ++gi) {
          if (gi + 1 < kNGrp) {
#pragma unroll
            for (int u = 0; u < kGrp; ++u)
              kw[(gi + 1) & 1][u] = mm::lds_read_b128(lds, kbase + 64u * (kGrp * (gi + 1) + u));
            mm::wait_lgkmcnt<kGrp>();
          } else {
            mm::wait_lgkmcnt<0>();
          }
          mm::sched_barrier();
#pragma unroll
          for (int u = 0; u < kGrp; ++u) sc = qk_step8(kw[gi & 1][u], q[kGrp * gi + u], sc);  // the arch's stage
          mm::sched_barrier();
        }
      }
      mm::set_priority<0>();
      float x[4];
      if (k + 16u <= e_live) {  // uniform: every token of the tile is inside every live row's window
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = mul_f32(sc[e], w.c_qk);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int32_t tok = (int32_t)(k + 4u * g + e);
          x[e] = tok < e_lane ? mul_f32(sc[e], w.c_qk) : -__builtin_inff();
        }
      }
      float mt = __builtin_fmaxf(__builtin_fmaxf(x[0], x[1]), __builtin_fmaxf(x[2], x[3]));
      mt = __builtin_fmaxf(mt, mm::xor_lane(mt, 16));
      mt = __builtin_fmaxf(mt, mm::xor_lane(mt, 32));
      const bool upd = mt > m_run + kLazyMax;
      float alpha = 1.f;
      if (upd) {
        alpha = mm::exp2(m_run - mt);  // 0 when m_run was -inf
        m_run = mt;
      }
      const float m_sub = m_run == -__builtin_inff() ? 0.f : m_run;
      float pr[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) pr[e] = mm::exp2(x[e] - m_sub);
      const mm::u32x2 pb = {mm::pack_bf16x2_rna(pr[0], pr[1]), mm::pack_bf16x2_rna(pr[2], pr[3])};
      l_run = fma_f32(l_run, alpha, add_f32(add_f32(pr[0], pr[1]), add_f32(pr[2], pr[3])));
      ln_run = fma_f32(ln_run, alpha, add_f32(add_f32(mm::bf16_lo(pb[0]), mm::bf16_hi(pb[0])),
                                              add_f32(mm::bf16_lo(pb[1]), mm::bf16_hi(pb[1]))));
      const uint32_t pt = ((s - 1u) & 1u) * kMaxRowTiles + wave;
      mm::lds_write_b128(lds, kPOff + pt * kPBytes + 16u * lane, mm::u32x4{pb[0], pb[1], mm::bit_cast<uint32_t>(alpha), 0u});
    }

    // PV of tile s - 2: the PV waves, 128 columns each (the first, s = 2, from zero accumulators).
    auto pv_step = [&](auto first) __attribute__((always_inline)) {
      constexpr bool kFirst = decltype(first)::value;
      const uint32_t pbuf = (s & 1u) * kMaxRowTiles;  // (s - 2) & 1
      mm::u32x2 pbv[NRT];
      float al[NRT];
#pragma unroll
      for (uint32_t t = 0; t < NRT; ++t) {
        const mm::u32x4 pa = mm::lds_read_b128(lds, kPOff + (pbuf + t) * kPBytes + 16u * lane);
        pbv[t] = mm::u32x2{pa[0], pa[1]};
        al[t] = mm::bit_cast<float>(pa[2]);
      }
      // block b = 2k + h: column 8i + b of the wave's 128 at tokens 4g .. 4g + 3 (the low (h = 0) or high
      // (h = 1) bf16 of dword k of the four token rows)
      mm::u32x2 va[8];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        va[2 * k] = mm::u32x2{mm::perm(d[1][k], d[0][k], 0x05040100u), mm::perm(d[3][k], d[2][k], 0x05040100u)};
        va[2 * k + 1] = mm::u32x2{mm::perm(d[1][k], d[0][k], 0x07060302u), mm::perm(d[3][k], d[2][k], 0x07060302u)};
      }
      mm::set_priority<1>();
#pragma unroll
      for (uint32_t t = 0; t < NRT; ++t) {
        if (!kFirst && __builtin_amdgcn_ballot_w64(al[t] != 1.f) != 0) {  // zero accumulators need no rescale
#pragma unroll
          for (int c = 0; c < 8; ++c) acc[t][c] *= al[t];
        }
#pragma unroll
        for (int c = 0; c < 8; ++c)
          acc[t][c] = mm::mfma_16x16x16_bf16(mm::bit_cast<mm::i16x4>(va[c]), mm::bit_cast<mm::i16x4>(pbv[t]),
                                             kFirst ? mm::f32x4{0.f, 0.f, 0.f, 0.f} : acc[t][c]);
      }
      mm::set_priority<0>();
    };
    if (fill && s == 2u) pv_step(std::true_type{});
    else if (fill && s > 2u) pv_step(std::false_type{});
    if (fill && s >= 1u && s <= nt) read_vt(slot_q);  // tile s - 1: the next step's PV (its slot_p)
    const uint32_t rot = slot_p;
    slot_p = slot_q;
    slot_q = slot_w;
    slot_w = rot;
    mm::block_sync();
  }

  // ---- epilogue: contract waves publish each row's 1 / ln; the PV waves store their columns -------------
  // The division is the contract wave's, once per row tile, instead of each of the four PV waves dividing for
  // every row tile (the same IEEE quotient, so the same bits): -256 wave-instructions per part at 4 row tiles.
  float* stats = (float*)(lds + kPOff);  // [row tile][16 rows][inv, ln]: the P area is free after the last step
  const bool partial = (w.flags & kFlagPartial) != 0;
  const bool half = (w.flags & kFlagMergeHalf) != 0;  // fp16 O / ln (uniform); else fp32 O
  if constexpr (contract) {
    float l_row = l_run + mm::xor_lane(l_run, 16);
    l_row += mm::xor_lane(l_row, 32);
    float ln_row = ln_run + mm::xor_lane(ln_run, 16);
    ln_row += mm::xor_lane(ln_row, 32);
    // the factor of the row's O: kv_scale / ln (output) or 1 / ln (fp16 partials); fp32 partials need none
    if (!partial || half) {
      const float inv = inv_norm(partial ? 1.f : w.o_scale, ln_row);  // ln == 0 (no token): zeros
      if (g == 0) {
        stats[2u * (wave * 16u + i)] = inv;
        stats[2u * (wave * 16u + i) + 1u] = ln_row;
      }
    }
    if (live && g == 0) {
      if (partial) {
        const uint32_t slot = w.unit * rows + r;
        const mm::buffer_rsrc wml = mm::make_buffer(w.ws_ml, w.B * rows * w.nparts * 16u);
        mm::buffer_store_b128(mm::u32x4{mm::bit_cast<uint32_t>(m_run), mm::bit_cast<uint32_t>(l_row),
                                        mm::bit_cast<uint32_t>(ln_row), 0u},
                              wml, slot * 16u);
      } else if (w.flags & kFlagLse) {
        mm::buffer_store_f32(finish_lse(m_run, l_row), mm::make_buffer(w.lse, w.B * rows * 4u), (w.b * rows + r) * 4u);
      }
    }
  }
  mm::block_sync();
  if constexpr (fill) {
    if (nt == 0) {  // no PV step ran: the accumulators were never written
#pragma unroll
      for (uint32_t t = 0; t < NRT; ++t)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[t][c] = mm::f32x4{0.f, 0.f, 0.f, 0.f};
    }
    // Lane (j = i, g) of PV wave f holds row j's columns 128f + 32g + 8rr + b (acc[t][b][rr]).
    const uint32_t col = kPvCols * fill_id + 32u * g;
    const mm::buffer_rsrc wo = mm::make_buffer(w.ws_o, w.B * rows * w.nparts * kLat * (half ? 2u : 4u));
    const mm::buffer_rsrc ob = mm::make_buffer(w.o_lat, w.B * rows * kLat * 2u);
#pragma unroll
    for (uint32_t t = 0; t < NRT; ++t) {
      const uint32_t rt_row = (w.grp * kMaxRowTiles + t) * 16u + i;
      if (rt_row >= rows) continue;
      if (partial && !half) {  // fp32 O, in the MFMA output order (mfma_column): acc[t][b] at floats 4b .. 4b + 3
        const uint32_t slot = w.unit * rows + rt_row;
#pragma unroll
        for (int b = 0; b < 8; ++b)
          mm::buffer_store_b128(mm::bit_cast<mm::u32x4>(acc[t][b]), wo, (slot * kLat + col + 4u * b) * 4u);
      } else if (partial) {  // O / ln in fp16, the same order: acc[t][b] at halves 4b .. 4b + 3
        const uint32_t slot = w.unit * rows + rt_row;
        const float inv = stats[2u * (t * 16u + i)];  // 1 / ln, published by the row tile's contract wave
#pragma unroll
        for (int b = 0; b < 8; b += 2) {
          const mm::f32x4 x = acc[t][b] * inv, y = acc[t][b + 1] * inv;  // two v_pk_mul_f32 each, in place
          mm::buffer_store_b128(mm::u32x4{mm::pack_f16x2(x[0], x[1]), mm::pack_f16x2(x[2], x[3]),
                                          mm::pack_f16x2(y[0], y[1]), mm::pack_f16x2(y[2], y[3])},
                                wo, (slot * kLat + col + 4u * b) * 2u);
        }
      } else {
        const float inv = stats[2u * (t * 16u + i)];  // kv_scale / ln
        clear_empty_rows(acc[t], stats[2u * (t * 16u + i) + 1u] == 0.f);
        const uint32_t R = w.b * rows + rt_row;
#pragma unroll
        for (int rr = 0; rr < 4; ++rr) {
          mm::u32x4 v;
#pragma unroll
          for (int u = 0; u < 4; ++u)
            v[u] = mm::pack_bf16x2<mm::Round::RTNE>(acc[t][2 * u][rr] * inv, acc[t][2 * u + 1][rr] * inv);
          mm::buffer_store_b128(v, ob, (R * kLat + col + 8u * rr) * 2u);
        }
      }
    }
  }
}

}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(512) void mla_decode_a16w8_fwd_ws(
    const MlaDecodeArgs args) {  // mla_decode_args.hpp
  MLA_UNPACK_ARGS(args);
  MM_LDS __attribute__((aligned(16))) uint8_t lds[kLdsBytes];

  const uint32_t rows = q_len * H;
  const uint32_t n_rt = (rows + 15u) / 16u;
  const uint32_t n_grp = (n_rt + kMaxRowTiles - 1u) / kMaxRowTiles;
  const uint32_t wg = mm::block_id_x();
  if (wg >= B * nparts * n_grp) return;  // uniform over the workgroup
  // n_grp is 1 up to 64 rows (q_len * H): no integer division (~25 instructions per wave) then.
  const uint32_t grp = n_grp == 1u ? 0u : wg % n_grp;
  const uint32_t unit = n_grp == 1u ? wg : wg / n_grp;
  const uint32_t nrt = n_rt - grp * kMaxRowTiles < kMaxRowTiles ? n_rt - grp * kMaxRowTiles : kMaxRowTiles;
  // Waves nrt..3 have no role and end before any of the work below (s_barrier counts only running waves).
  const uint32_t wave = mm::wave_id();
  const bool contract = wave < nrt, fill = wave >= kFillWave0;
  if (!contract && !fill) return;

  // The part: located once, by wave 0 (the balanced split's prefix sums, the request's run and window,
  // the tile range, the scales: ~150 scalar instructions), and published to LDS; the other waves read it
  // back with three broadcast ds_read_b128 after one barrier.
  if (wave == 0) {
    const Units units = locate(SplitArgs{seq_lens, glen, kv_indptr, n_idx, B, nparts, q_len, cp_rank, cp_world, flags},
                               unit, false);
    publish_request_end(ws_ml, B * q_len * H, nparts, flags, units, unit);
    const RequestView req = request_view(seq_lens, glen, kv_indices, kv_indptr, n_idx, cp_world, units.b);
    const Scales sc = read_scales(kv_scale_dev, c_qk_bits, o_scale_bits, scale_log2e_bits);
    const int32_t e_req = window_end(req.glen, req.slen, (int32_t)q_len, (int32_t)q_len - 1, (int32_t)cp_rank,
                                     (int32_t)cp_world);
    const uint32_t n_tiles = e_req > 0 ? ((uint32_t)e_req + 15u) / 16u : 0u;
    const uint32_t p = unit - units.first;
    const uint32_t tpp = units.count > 0 ? (n_tiles + units.count - 1u) / units.count : 0u;
    const uint32_t tile0 = p * tpp;
    const uint32_t tile1 = tile0 + tpp < n_tiles ? tile0 + tpp : n_tiles;
    const uint32_t k1 = tile1 * 16u < (uint32_t)e_req ? tile1 * 16u : (uint32_t)(e_req > 0 ? e_req : 0);
    const int32_t nt_signed = (int32_t)tile1 - (int32_t)tile0;  // tile0 may lie past the last tile
    if (mm::lane_id() == 0) {
      mm::lds_write_b128(lds, kPartOff, mm::u32x4{units.valid ? 1u : 0u, units.b, tile0 * 16u, k1});
      mm::lds_write_b128(lds, kPartOff + 16u, mm::u32x4{nt_signed > 0 ? (uint32_t)nt_signed : 0u, (uint32_t)req.slen,
                                                        (uint32_t)req.glen, req.lo});
      mm::lds_write_b128(lds, kPartOff + 32u, mm::u32x4{req.span, mm::bit_cast<uint32_t>(sc.c_qk),
                                                        mm::bit_cast<uint32_t>(sc.o_scale), 0u});
    }
  }
  mm::block_sync();
  const mm::u32x4 p0 = mm::lds_read_b128(lds, kPartOff), p1 = mm::lds_read_b128(lds, kPartOff + 16u),
                  p2 = mm::lds_read_b128(lds, kPartOff + 32u);
  if (mm::uniform(p0[0]) == 0u) return;  // an idle unit of the balanced split (uniform over the workgroup)

  Work w;
  w.q_lat = q_lat;
  w.q_pe = q_pe;
  w.o_lat = o_lat;
  w.lse = lse;
  w.ws_o = ws_o;
  w.ws_ml = ws_ml;
  w.B = B;
  w.H = H;
  w.q_len = q_len;
  w.rows = rows;
  w.nparts = nparts;
  w.unit = unit;
  w.grp = grp;
  w.b = mm::uniform(p0[1]);
  w.k0 = mm::uniform(p0[2]);
  w.k1 = mm::uniform(p0[3]);
  w.nt = mm::uniform(p1[0]);
  w.slen = (int32_t)mm::uniform(p1[1]);
  w.glen = (int32_t)mm::uniform(p1[2]);
  w.idx = mm::make_buffer(kv_indices + mm::uniform(p1[3]), mm::uniform(p2[0]) * 4u);
  w.c_qk = mm::uniform(mm::bit_cast<float>(p2[1]));
  w.o_scale = mm::uniform(mm::bit_cast<float>(p2[2]));
  w.cp_rank = cp_rank;
  w.cp_world = cp_world;
  w.flags = flags;
  w.pool = make_pool(pool, pool_slots);

  // A body per (row-tile count, role): uniform over the wave, so the step loops carry no role tests and
  // the PV loops over row tiles no bounds tests.
  switch (nrt) {
    case 1:
      if (contract) decode_group<1, true, false>(w, lds);
      else decode_group<1, false, true>(w, lds);
      break;
    case 2:
      if (contract) decode_group<2, true, false>(w, lds);
      else decode_group<2, false, true>(w, lds);
      break;
    case 3:
      if (contract) decode_group<3, true, false>(w, lds);
      else decode_group<3, false, true>(w, lds);
      break;
    default:
      if (contract) decode_group<4, true, false>(w, lds);
      else decode_group<4, false, true>(w, lds);
      break;
  }
}
