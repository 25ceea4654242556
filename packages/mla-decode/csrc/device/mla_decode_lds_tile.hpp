// The LDS-tile MLA decode body, shared by the KV formats: a16w16 (bf16 KV), mxfp4 (fp4 KV dequantised to
// bf16) and a8w8 (fp8 KV, fp8 MFMAs). Each format file (mla_decode_a16w16.hip, gfx950/mla_decode_mxfp4.hip,
// gfx950/mla_decode_a8w8.hip) supplies a `Kv` stage — who fetches which bytes of a KV tile, and how they
// become the LDS operand layouts below — and instantiates `decode_lds_tile<Kv>` as its kernel.
//
// Work unit (rows and parts as mla_decode_a16w8_ws.hip, whose header has the math): a workgroup = 4 waves = one
// (request, KV part, group of up to 4 16-row tiles). Per KV tile (16 tokens for the bf16 operands, 32 for
// fp8) the 256 threads fetch the tile ONCE (every byte of the tile by exactly one thread), convert it once,
// store it in LDS, and each wave with a row tile runs its QK and PV MFMAs reading LDS:
//   bf16: per 16 tokens QK 18 x 16x16x32 on gfx950 / 36 x 16x16x16 on gfx942 (the arch's qk_step8), PV
//         32 x 16x16x16;
//   fp8 (gfx950): per 32 tokens QK 2 x 18 and PV 32 v_mfma_f32_16x16x32_fp8_fp8 (PV's depth is the 32 tokens).
// Waves past the last row tile only fetch and convert.
//
// LDS (one tile, at most 36096 bytes):
//   Ks  bf16: [16 tokens][584 bf16] K rows, stride 1168 bytes; lane (i, g) of QK reads row i, columns
//             [144g, 144g+144) (column order as the register kernel).
//       fp8:  [32 tokens][592 bytes] K rows, fp8 as stored; QK half h reads rows 16h + i.
//   V   gfx950: PV's A operand (V^T) is read straight from the K rows (whose first 512 columns are V) by a
//             transposing read: ds_read_b64_tr_b16 (kTrV) for bf16, ds_read_b64_tr_b8 for fp8.
//       gfx942: Vs [16 i][4 g][34 x 8 B]: chunk c of block (i, g) = V[tokens 4g..4g+3][column 32i + c]
//             (4 bf16), a transposed copy; D reg rr of lane (j, g) then holds
//             O[row j][32 (4g + rr) + c] (gfx950: O[row j][16c + 4g + rr]).
// Pipeline: two barriers per tile (previous tile read -> write; written -> read); the raw bytes of tile
// n+1 are fetched into registers (unconditionally: the last tile's prefetch reads zeros) while tile n is
// converted and computed.
//
// Softmax, masking, NaN rules, outputs (direct bf16 o + lse, or fp32 partials for the shared merge
// kernel mla_decode_a16w8_merge) are the a16w8 kernels'; o_scale multiplies o (1 for bf16 KV).
//
// KvSplit (gfx950, one row tile: the _kv4 kernels): a workgroup of 4 one-wave decoders per (request, part), wave
// w over the w-th run of ceil(tiles / 4) of the part's tiles in its own LDS tile (w * kSplitTileBytes), synced
// by its own LDS waits; then the four (O, m, l, ln) merged in LDS (merge_split_waves: 4 x 32 KiB of
// accumulators + the states, 132096 bytes) and wave w writes output columns 128w .. 128w + 127. a8w8's Q tile
// is quantised once per workgroup (wave w the pieces m = w mod 4) and shared through LDS (kSplitQ8Offset).
#pragma once
#include "mla_decode_common.hpp"
#include "moonmath/convert.hpp"
#include <type_traits>

namespace mla {

constexpr uint32_t kTileWaves = 4;
constexpr mm::f32x4 kZero4 = {0.f, 0.f, 0.f, 0.f};
constexpr uint32_t kKStride = 1168;  // bytes per K row in LDS (576 bf16 + 16 bytes pad)
constexpr uint32_t kVBlock = 272;    // bytes per (i, g) V block (32 chunks of 8 + 16 pad)
constexpr uint32_t kKBytes = 16 * kKStride;
constexpr uint32_t kVBytes = 64 * kVBlock;

// Structured 4-byte load (see struct_buffer_load_b128 in mla_decode_common.hpp).
__attribute__((device)) uint32_t struct_buffer_load_b32(mm::buffer_rsrc r, uint32_t index, uint32_t voff, uint32_t soff,
                                                        int aux) __asm("llvm.amdgcn.struct.ptr.buffer.load.i32");
MM_DEVICE uint32_t struct_load_b32(mm::buffer_rsrc pool, uint32_t slot, uint32_t off) {
  return struct_buffer_load_b32(pool, slot, off, 0u, 0);
}

__attribute__((device)) mm::u32x2 struct_buffer_load_b64(mm::buffer_rsrc r, uint32_t index, uint32_t voff,
                                                         uint32_t soff, int aux)
    __asm("llvm.amdgcn.struct.ptr.buffer.load.v2i32");
MM_DEVICE mm::u32x2 struct_load_b64(mm::buffer_rsrc pool, uint32_t slot, uint32_t off) {
  return struct_buffer_load_b64(pool, slot, off, 0u, 0);
}

constexpr uint32_t kKStride8 = 592;  // bytes per K row in LDS when K stays fp8 (576 + 16 pad)
constexpr uint32_t kTokens8 = 32;    // KV tokens per tile of the fp8 (a8w8) stages: the fp8 PV MFMA's depth
constexpr float kP8Offset = 8.f;     // fp8 P is 2^(x - m + 8): p >= 2^-14 of the max is a normal e4m3fn number

// gfx950 reads PV's A operand (V^T) straight from row-major bf16 V rows with ds_read_b64_tr_b16 (the tile
// layer's lds_load_a_kmajor), so the V rows need no transposed copy: the bf16 formats read V from the K
// rows, a8w8 from its widened V rows. gfx942 (no transposing read) stores the Vs operand blocks below.
#if defined(__gfx950__)
constexpr bool kTrV = true;
#else
constexpr bool kTrV = false;
#endif

// An fp8-QK format's per-tensor Q scale (Kv::q_scale, taken where Q is quantised): q8 = fp8(q * inv), and the
// scores' factor c_qk times qs (= 1 / inv up to rounding).
struct QScale {
  float inv, qs;
};

// The wave's Q tile: 18 x 8 columns per lane, bf16 (u32x4 each) or, for the fp8 QK stage, fp8 (u32x2).
template <bool Fp8> struct QTile { mm::u32x4 w[18]; };
template <> struct QTile<true> { mm::u32x2 w[18]; };

// A pool of `stride`-byte records (one per slot): a slot >= slots (kNoSlot, a bad index) reads zeros.
MM_DEVICE mm::buffer_rsrc make_pool_rows(const void* pool, uint32_t stride, uint32_t slots) {
  return __builtin_amdgcn_make_buffer_rsrc(const_cast<void*>(pool), (short)stride, (int)slots, mm::kRawBufferFlags);
}

// Store 4 tokens x 8 consecutive latent columns (raw[e] = token e's 8 bf16) as the V chunks of columns
// col0 .. col0+7 (col0 % 8 == 0): A-row i = col0 / 32, chunks 8 (col0 / 8 % 4) .. +7 of block (i, g).
MM_DEVICE void store_v8(uint8_t* vs, const mm::u32x4 raw[4], uint32_t col0, uint32_t g) {
  const uint32_t off = ((col0 >> 5) * 4u + g) * kVBlock + 8u * (col0 & 31u);
#pragma unroll
  for (int w = 0; w < 4; ++w) {  // columns 2w, 2w+1: 4 tokens each, token e in bf16 slot e
    const uint32_t a0 = raw[0][w], a1 = raw[1][w], a2 = raw[2][w], a3 = raw[3][w];
    mm::lds_write_b128(vs, off + 16u * w,
                       mm::u32x4{(a0 & 0xFFFFu) | (a1 << 16), (a2 & 0xFFFFu) | (a3 << 16),
                                 (a0 >> 16) | (a1 & 0xFFFF0000u), (a2 >> 16) | (a3 & 0xFFFF0000u)});
  }
}

// Who converts which 8-column pieces of a 16-token tile (the same for every format, so every element is
// handled by one thread and the LDS stores are shared):
//   latent role (all 256 threads): tokens 4 vtg + e (e = 0..3), columns 8 vcg .. +7 (vtg = tid / 64,
//                vcg = tid % 64): stored as 4 K-row chunks and, transposed, as the V chunks (store_v8);
//   rope role   (threads 0..127): token rtok = tid / 8, columns 512 + 8 rcg .. +7: one K-row chunk.
struct TileRoles {
  uint32_t vtg, vcg, rtok, rcg;
  bool rope_role;
  MM_DEVICE explicit TileRoles(uint32_t tid)
      : vtg(tid >> 6), vcg(tid & 63u), rtok((tid >> 3) & 15u), rcg(tid & 7u), rope_role(tid < 128u) {}

  // lat[e]: token 4 vtg + e's 8 bf16 of the latent piece; rope: token rtok's 8 bf16 of the rope piece.
  MM_DEVICE void store(const mm::u32x4 lat[4], const mm::u32x4& rope, uint8_t* ks, uint8_t* vs) const {
#pragma unroll
    for (int e = 0; e < 4; ++e) mm::lds_write_b128(ks, (4u * vtg + e) * kKStride + 16u * vcg, lat[e]);
    if constexpr (!kTrV) store_v8(vs, lat, 8u * vcg, vtg);
    if (rope_role) mm::lds_write_b128(ks, rtok * kKStride + 2u * kLat + 16u * rcg, rope);
  }
};

struct TileArgs {
  const uint16_t* q_lat;     // [T, H, 512] bf16
  const uint16_t* q_pe;      // [T, H, 64] bf16
  const void* pool;          // the format's pool
  const void* pool_aux;      // the format's second tensor (mxfp4: the E8M0 scales), else unused
  uint16_t* o_lat;           // [T, H, 512] bf16 (direct mode)
  const int32_t* seq_lens;   // [B]
  const int32_t* kv_indices; // [n_idx]
  const int32_t* kv_indptr;  // [B + 1]
  const int32_t* glen;       // [B]
  float* lse;                // [T, H] (direct mode, kFlagLse)
  float* ws_o;               // [units, rows, 512] (partial mode)
  float* ws_ml;              // [units, rows, 4] (partial mode)
  uint32_t B, H, q_len, nparts, pool_slots, n_idx, cp_rank, cp_world, flags;
  float c_qk, o_scale;
};

// The slots of a fetch role's tokens (every format fetches tokens 4 vtg + e, e = 0..3, and rtok): kNoSlot past
// the part.
struct FetchSlots {
  uint32_t lat[4], rope;
};

// The kernel body. make_kv(t) builds the format's stage for fetch role t (`Kv::Raw`, its role's `vtg` and
// `rtok`, `fetch(raw, pool, aux, slots, FetchSlots)`, `store(raw, ks, vs)`: the conversion, then the LDS
// stores). The body bpermutes every role's slots before any load is issued (one LDS round trip per tile
// rather than one per load, as a bpermute per load interleaved with the loads cost).
// Kv::kFp8Qk picks the numerics: false: 16-token tiles, bf16 operands (TileRoles); true (a8w8): 32-token
// tiles (kTokens8), K kept fp8 in LDS at stride kKStride8, Q's bf16 pieces quantised to fp8 by quantize_q,
// QK and PV on v_mfma_f32_16x16x32_fp8_fp8, P rounded to e4m3fn by round_p8 (see the a8w8 file). The tile's
// fetch roles are those of 256 threads; a one-wave workgroup (Waves = 1, for H * q_len <= 16, where a 4-wave group would
// have one wave computing) takes four roles per lane: make_kv(64 p + lane), p = 0..3.
// N LDS reads, each consumed by one step, in double-buffered groups of G with one s_waitcnt per group (the
// next group's reads in flight while this group's MFMAs run): read(u) issues read u (one LDS instruction),
// use(u, value) its MFMA(s).
template <int N, int G, class T, class Read, class Use>
MM_DEVICE void grouped_reads(Read read, Use use) {
  static_assert(N % G == 0, "whole groups");
  constexpr int kNGrp = N / G;
  T buf[2][G];
#pragma unroll
  for (int u = 0; u < G; ++u) buf[0][u] = read(u);
#pragma unroll
  for (int n = 0; n < kNGrp; ++n) {
    if (n + 1 < kNGrp) {
#pragma unroll
      for (int u = 0; u < G; ++u) buf[(n + 1) & 1][u] = read(G * (n + 1) + u);
      mm::wait_lgkmcnt<G>();
    } else {
      mm::wait_lgkmcnt<0>();
    }
    mm::sched_barrier();
#pragma unroll
    for (int u = 0; u < G; ++u) use(G * n + u, buf[n & 1][u]);
    mm::sched_barrier();
  }
}

// ---- KvSplit: four one-wave decoders in one workgroup, merged in LDS --------------------------------------
// A workgroup of kSplitWaves waves per (request, KV part) with one row tile (H * q_len <= 16): wave w decodes the
// w-th run of ceil(tiles / 4) of the part's tiles as the one-wave kernel does (its four fetch roles per lane,
// its own LDS tile at kSplitTileBytes * w, a wave-local sync instead of the workgroup barrier: the waves' trip
// counts differ), then the four (O, m, l, ln) are merged in LDS -- the merge kernel's formula, waves in order --
// and wave w writes output column blocks [8w, 8w + 8) (the part's partials, or o and lse). So one part per
// request runs four waves on the CU with no partials and no merge launch. Each wave's run starts its own
// running max (the fp8 P rounding of a8w8 is against it: docs/numerics.md).
constexpr uint32_t kSplitWaves = 4;
constexpr uint32_t kSplitBlocks = 32 / kSplitWaves;  // output column blocks (16 columns) per wave
template <bool Fp8> constexpr uint32_t kSplitTileBytes = Fp8 ? kKStride8 * kTokens8 : kKBytes;
constexpr uint32_t kSplitAccBytes = kSplitWaves * 32u * 64u * 16u;  // every wave's 32 accumulators per lane
constexpr uint32_t kSplitLdsBytes = kSplitAccBytes + kSplitWaves * 16u * 16u;  // + (m, l, ln) per (wave, row)
constexpr uint32_t kSplitQ8Offset = kSplitWaves * kSplitTileBytes<true>;  // the shared fp8 Q tile: [18][64 lanes] x 8 B
static_assert(kSplitQ8Offset + 18u * 64u * 8u <= kSplitLdsBytes, "the shared Q tile fits in the merge's LDS");
static_assert(kSplitWaves * kSplitTileBytes<true> <= kSplitLdsBytes && kSplitWaves * kSplitTileBytes<false> <= kSplitLdsBytes,
              "the decode tiles fit in the merge's LDS");

// Between a tile's LDS stores and reads: the workgroup barrier, or (KvSplit: each wave owns its tile) only the
// wave's LDS traffic retired.
template <bool KvSplit> MM_DEVICE void tile_sync() {
  if constexpr (KvSplit) {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  } else {
    mm::block_sync();
  }
}

// The four waves' states -> this wave's blocks of O = sum_w s_w O_w, s_w = 2^(m_w - M) (0 for an empty run, l_w
// = 0), M = max over non-empty runs; m, l, ln become the row's merged (M, L, Ln). Lane (i, g) is row i as in
// the decode; a NaN l_w is not empty (it is folded, so the row stays NaN). An empty run's O is still added, times
// 0: a NaN V row it read but the row did not attend reaches the row's o, as in the one-wave kernels, the part
// merge and the references' dense P V (an all-empty row is cleared at the output). Fixed order: deterministic.
MM_DEVICE void merge_split_waves(uint8_t* lds, const mm::f32x4 acc[32], float& m, float& l, float& ln,
                                 mm::f32x4 mo[kSplitBlocks]) {
  const uint32_t w = mm::wave_id(), lane = mm::lane_id(), i = lane & 15u;
  mm::block_sync();  // every wave is done with its decode tile (the merge reuses that LDS)
#pragma unroll
  for (int c = 0; c < 32; ++c)
    mm::lds_write_b128(lds, ((w * 32u + c) * 64u + lane) * 16u, mm::bit_cast<mm::u32x4>(acc[c]));
  if (lane < 16u)
    mm::lds_write_b128(lds, kSplitAccBytes + (w * 16u + i) * 16u,
                       mm::u32x4{mm::bit_cast<uint32_t>(m), mm::bit_cast<uint32_t>(l), mm::bit_cast<uint32_t>(ln), 0u});
  mm::block_sync();
  float mw[kSplitWaves], lw[kSplitWaves], lnw[kSplitWaves];
  float M = -__builtin_inff();
#pragma unroll
  for (uint32_t v = 0; v < kSplitWaves; ++v) {
    const mm::u32x4 st = mm::lds_read_b128(lds, kSplitAccBytes + (v * 16u + i) * 16u);
    mw[v] = mm::bit_cast<float>(st[0]);
    lw[v] = mm::bit_cast<float>(st[1]);
    lnw[v] = mm::bit_cast<float>(st[2]);
    if (lw[v] != 0.f) M = __builtin_fmaxf(M, mw[v]);
  }
  float s[kSplitWaves];
  l = 0.f;
  ln = 0.f;
#pragma unroll
  for (uint32_t v = 0; v < kSplitWaves; ++v) {
    s[v] = lw[v] != 0.f ? mm::exp2(mw[v] - M) : 0.f;
    l += s[v] * lw[v];
    ln += s[v] * lnw[v];
  }
  m = M;
#pragma unroll
  for (uint32_t c = 0; c < kSplitBlocks; ++c) {
    // The four reads are unconditional and issued together (reads under an `if` were once if-converted into a
    // branch and a wait each: +1.4 us modeled per a8w8 _kv4 shape).
    mm::f32x4 x[kSplitWaves];
#pragma unroll
    for (uint32_t v = 0; v < kSplitWaves; ++v)
      x[v] = mm::bit_cast<mm::f32x4>(mm::lds_read_b128(lds, ((v * 32u + w * kSplitBlocks + c) * 64u + lane) * 16u));
    mm::f32x4 o = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (uint32_t v = 0; v < kSplitWaves; ++v) o += s[v] * x[v];
    mo[c] = o;
  }
}

// This wave's output columns 16 (8w + c) + 4g .. +3 (c < 8) of row r (the kTrV accumulator layout): the part's
// fp32 partials at workspace slot `slot` (kFlagPartial; wave 0 writes (m, l, ln)), else o in bf16 and lse.
MM_DEVICE void write_split_outputs(const TileArgs& a, mm::f32x4 (&mo)[kSplitBlocks], float m_out, float l_row,
                                   float ln_row, uint32_t slot, uint32_t R, uint32_t total_rows) {
  const uint32_t w = mm::wave_id(), g = mm::lane_id() >> 4;
  const uint32_t col0 = 16u * kSplitBlocks * w + 4u * g;
  if (a.flags & kFlagPartial) {
    const mm::buffer_rsrc wo = mm::make_buffer(a.ws_o, total_rows * a.nparts * kLat * 4u);
#pragma unroll
    for (uint32_t c = 0; c < kSplitBlocks; ++c)
      mm::buffer_store_b128(mm::bit_cast<mm::u32x4>(mo[c]), wo, (slot * kLat + col0 + 16u * c) * 4u);
    if (w == 0 && g == 0) {
      const mm::buffer_rsrc wml = mm::make_buffer(a.ws_ml, total_rows * a.nparts * 16u);
      mm::buffer_store_b128(mm::u32x4{mm::bit_cast<uint32_t>(m_out), mm::bit_cast<uint32_t>(l_row),
                                      mm::bit_cast<uint32_t>(ln_row), 0u},
                            wml, slot * 16u);
    }
    return;
  }
  const float inv = inv_norm(a.o_scale, ln_row);
  const mm::buffer_rsrc ob = mm::make_buffer(a.o_lat, total_rows * kLat * 2u);
  clear_empty_rows(mo, ln_row == 0.f);
#pragma unroll
  for (uint32_t c = 0; c < kSplitBlocks; ++c) {
    const mm::f32x4 v = mo[c];
    mm::buffer_store_b64(mm::u32x2{mm::pack_bf16x2<mm::Round::RTNE>(v[0] * inv, v[1] * inv),
                                   mm::pack_bf16x2<mm::Round::RTNE>(v[2] * inv, v[3] * inv)},
                         ob, (R * kLat + col0 + 16u * c) * 2u);
  }
  if ((a.flags & kFlagLse) && w == 0 && g == 0)
    mm::buffer_store_f32(finish_lse(m_out, l_row), mm::make_buffer(a.lse, total_rows * 4u), R * 4u);
}

template <class Kv, int N> struct KvSet { Kv k[N]; };
template <class Kv, int N, class MakeKv> MM_DEVICE KvSet<Kv, N> make_kv_set(MakeKv make_kv, uint32_t base) {
  if constexpr (N == 1) return KvSet<Kv, 1>{{make_kv(base)}};
  else return KvSet<Kv, 4>{{make_kv(base), make_kv(base + 64u), make_kv(base + 128u), make_kv(base + 192u)}};
}

template <uint32_t Waves = kTileWaves, bool KvSplit = false, class MakeKv>
MM_DEVICE void decode_lds_tile(const TileArgs& a, uint8_t* lds, MakeKv make_kv) {
  using Kv = decltype(make_kv(0u));
  constexpr int kPasses = (int)(kTileWaves / Waves);
  constexpr bool kFp8 = Kv::kFp8Qk;                 // fp8 QK and PV, 32-token tiles
  constexpr uint32_t kT = kFp8 ? kTokens8 : 16u;    // KV tokens per tile
  static_assert(!kFp8 || kTrV, "the fp8 PV reads V^T with ds_read_b64_tr_b8 (gfx950)");
  static_assert(!KvSplit || (Waves == 1 && kTrV), "KvSplit: one-wave decoders (gfx950: no Vs copy)");
  // KvSplit: kSplitWaves one-wave decoders per workgroup, each over its own LDS tile and quarter of the part
  const uint32_t kv_wave = KvSplit ? mm::wave_id() : 0u;
  uint8_t* const ks = lds + kv_wave * kSplitTileBytes<kFp8>;
  uint8_t* const vs = lds + kKBytes;
  const uint32_t B = a.B, H = a.H, q_len = a.q_len, nparts = a.nparts;
  const uint32_t rows = q_len * H;
  const uint32_t n_rt = (rows + 15u) / 16u;
  const uint32_t n_grp = (n_rt + Waves - 1u) / Waves;
  const uint32_t wg = mm::block_id_x();
  if (wg >= B * nparts * n_grp) return;  // uniform over the workgroup
  const uint32_t grp = wg % n_grp;
  const uint32_t unit = wg / n_grp;
  const Units units = locate(SplitArgs{a.seq_lens, a.glen, a.kv_indptr, a.n_idx, B, nparts, q_len, a.cp_rank,
                                       a.cp_world, a.flags},
                             unit, false);
  if (!units.valid) return;  // an idle unit of the balanced split (uniform over the workgroup)
  if (grp == 0 && mm::wave_id() == 0) publish_request_end(a.ws_ml, B * rows, nparts, a.flags, units, unit);
  const uint32_t b = units.b;
  const uint32_t p = unit - units.first;
  const uint32_t rt = grp * Waves + (Waves > 1 ? mm::wave_id() : 0u);
  const bool has_tile = rt < n_rt;  // wave-uniform

  const uint32_t tid = mm::thread_id_x();
  const uint32_t lane = mm::lane_id();
  const uint32_t i = lane & 15u, g = lane >> 4;

  const RequestView req = request_view(a.seq_lens, a.glen, a.kv_indices, a.kv_indptr, a.n_idx, a.cp_world, b);
  const int32_t slen = req.slen, gl = req.glen;
  const int32_t cpr = (int32_t)a.cp_rank, cpw = (int32_t)a.cp_world;
  const uint32_t r = rt * 16u + i;
  const bool live = has_tile && r < rows;
  const int32_t e_row = live ? window_end(gl, slen, (int32_t)q_len, (int32_t)(r / H), cpr, cpw) : 0;
  const int32_t e_req = window_end(gl, slen, (int32_t)q_len, (int32_t)q_len - 1, cpr, cpw);
  const uint32_t n_tiles = e_req > 0 ? ((uint32_t)e_req + kT - 1u) / kT : 0u;
  const uint32_t tpp = (n_tiles + units.count - 1u) / units.count;
  uint32_t tile0 = p * tpp;
  uint32_t tile1 = tile0 + tpp < n_tiles ? tile0 + tpp : n_tiles;
  if constexpr (KvSplit) {  // wave w: the w-th run of ceil(tiles / 4) tiles of the part
    const uint32_t n = tile1 > tile0 ? tile1 - tile0 : 0u, tpw = (n + kSplitWaves - 1u) / kSplitWaves;
    const uint32_t s0 = tile0 + kv_wave * tpw;
    tile0 = s0 < tile1 ? s0 : tile1;
    tile1 = s0 + tpw < tile1 ? s0 + tpw : tile1;
  }
  const uint32_t k0 = tile0 * kT;
  const uint32_t k1 = tile1 * kT < (uint32_t)e_req ? tile1 * kT : (uint32_t)(e_req > 0 ? e_req : 0);
  const int32_t e_lane = e_row < (int32_t)k1 ? e_row : (int32_t)k1;
  // Row ends grow with the row, so lane 0's end is the wave's smallest live one (see the a16w8 kernel).
  const uint32_t e_live = mm::uniform((uint32_t)(e_lane > 0 ? e_lane : 0));
  const uint32_t R = b * rows + r;
  const mm::buffer_rsrc idx_buf = req.idx;

  // lane l holds the slot of the tile's token l % kT (the fetch roles bpermute it)
  const uint32_t tok_lane = lane & (kT - 1u);
  auto load_tile_slot = [&](uint32_t k) __attribute__((always_inline)) { return load_slot(idx_buf, k + tok_lane); };
  const KvSet<Kv, kPasses> kvs = make_kv_set<Kv, kPasses>(make_kv, KvSplit ? lane : tid);
  const Kv& kv = kvs.k[0];  // its Q and P stages (role-independent)
  using Raws = typename Kv::Raw[kPasses];
  auto fetch = [&](Raws& raw, uint32_t slot_raw, uint32_t k) __attribute__((always_inline)) {
    const uint32_t slot_l = (k + tok_lane) < k1 ? slot_raw : kNoSlot;  // past the part: zeros
    FetchSlots fs[kPasses];  // every bpermute first, then the loads
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
#pragma unroll
      for (int e = 0; e < 4; ++e) fs[p].lat[e] = mm::bpermute(slot_l, 4u * kvs.k[p].vtg + e);
      fs[p].rope = mm::bpermute(slot_l, kvs.k[p].rtok);
    }
    mm::sched_barrier();
#pragma unroll
    for (int p = 0; p < kPasses; ++p) kvs.k[p].fetch(raw[p], a.pool, a.pool_aux, a.pool_slots, fs[p]);
  };

  // The one-wave decoders (Waves 1: _w1, _kv4) peel the part's first tile, whose PV MFMAs start from a zero C
  // operand: no 64 v_mov_b64 zeroing the accumulators, no rescale test (gfx950 issue cycles a part,
  // calibrate_mla_formats_emu.py: a8w8_w1 3585 -> 3325, a16w16_w1 2210 -> 1927, mxfp4_w1 2796 -> 2476, _kv4
  // a8w8 3213 -> 3011, a16w16 3095 -> 2895). The 4-wave kernels zero them first: peeled, they measured 55-76
  // cycles a part slower; so does a format whose _kv4 kernel measured slower peeled (Kv::kPeelInKvSplit: mxfp4).
  constexpr bool kPeelFirst = Waves == 1 && (!KvSplit || Kv::kPeelInKvSplit);
  mm::f32x4 acc[32];  // zeroed once nt is known (below)
  float m_run = -__builtin_inff();
  float l_run = 0.f, ln_run = 0.f;

  // Q tile: lane (j=i, g) holds columns [144g, 144g+144) of row j, loaded as bf16; the fp8 QK stage
  // (Kv::kFp8Qk) quantises each 8-column piece in registers (kv.quantize_q: the per-tensor scale).
  // No branches: a piece a lane does not own (a dead row; q_pe's columns in q_lat and back) is loaded from its
  // buffer's end, which the range check reads as zeros. Pieces m < 10 are latent for every lane group (col <=
  // 504); from m = 10 group 3 holds rope columns, so those pieces are the OR of a q_lat and a q_pe load.
  // KvSplit with the fp8 QK: the waves' Q tiles are the same, so wave w loads and quantises the pieces m = w
  // (mod 4) and every wave reads the 18 from LDS (kSplitQ8Offset, beside the decode tiles) after a barrier.
  constexpr bool kSharedQ8 = KvSplit && kFp8;
  // kSharedQ8: wave w's pieces m = w + 4t, t < kSharedPieces (m >= 18: none, its loads read zeros), each the OR
  // of a q_lat and a q_pe load, straight-line with no per-piece branch. (Before, session 15: the pieces under
  // `if (m % 4 == w)` branches, two q_pe loads beside them; the waits where the branches joined were conservative.
  // Straight-line, a8w8 _kv4 decode on the timing model: (4, 8k) 10.23 -> 10.00 us, (32, 1k) 10.24 -> 9.97,
  // (64, 1k) 13.82 -> 13.26, (256, 1k) 31.29 -> 28.87; (32, 8k) 31.16 -> 31.58, (64, 8k) 53.04 -> 53.81.)
  constexpr uint32_t kSharedPieces = (18u + kSplitWaves - 1u) / kSplitWaves;
  QTile<false> q_raw;  // bf16 (kSharedQ8: pieces t < kSharedPieces)
  uint32_t slot0 = 0, slot_next = 0;
  {
    const uint32_t lat_bytes = B * rows * kLat * 2u, pe_bytes = B * rows * 64u * 2u;
    const mm::buffer_rsrc qlat_buf = mm::make_buffer(a.q_lat, lat_bytes);
    const mm::buffer_rsrc qpe_buf = mm::make_buffer(a.q_pe, pe_bytes);
    // piece m's lat and pe loads (zeros where a lane does not own them)
    auto load_piece = [&](uint32_t m, bool own, bool with_pe) __attribute__((always_inline)) {
      const uint32_t col = 144u * g + 8u * m;
      mm::u32x4 v = mm::buffer_load_b128(qlat_buf, own && col < kLat ? R * kLat * 2u + col * 2u : lat_bytes);
      if (with_pe) v |= mm::buffer_load_b128(qpe_buf, own && col >= kLat ? R * 64u * 2u + (col - kLat) * 2u : pe_bytes);
      return v;
    };
    if constexpr (kSharedQ8) {
#pragma unroll
      for (uint32_t t = 0; t < kSharedPieces; ++t) {
        const uint32_t m = kv_wave + kSplitWaves * t;
        q_raw.w[t] = load_piece(m, live && m < 18u, 4u * t + 3u >= 10u);  // (m >= 10 possible)
      }
    } else {
#pragma unroll
      for (int m = 0; m < 18; ++m) q_raw.w[m] = load_piece((uint32_t)m, live, m >= 10);
    }
  }

  const int32_t nt_signed = (int32_t)tile1 - (int32_t)tile0;
  const uint32_t nt = nt_signed > 0 ? (uint32_t)nt_signed : 0u;
  if (!kPeelFirst || nt == 0) {
#pragma unroll
    for (int c = 0; c < 32; ++c) acc[c] = kZero4;
  }

  Raws raw_a, raw_b;
  {  // unconditionally (a wave without tiles fetches zeros, every token past k1): under `if (nt > 0)` the
     // compiler's waits for Q where the paths joined counted the first tile's loads too, and the quantisation
     // waited for most of the tile (the _kv4 kernel: vmcnt(7) of its 20 tile loads)
    slot0 = load_tile_slot(k0);
    slot_next = load_tile_slot(k0 + kT);
    mm::wait_vmcnt<0>();
    fetch(raw_a, slot0, k0);
  }
  // the fp8 QK quantises Q here, after the first tile's loads are issued (its Q and amax loads have landed)
  QTile<Kv::kFp8Qk> q;
  float c_qk = a.c_qk;  // the fp8 QK: times Q's scale qs
  float q_inv = 1.f;
  if constexpr (Kv::kFp8Qk) {
    const QScale qsc = kv.q_scale();
    q_inv = qsc.inv;
    c_qk *= qsc.qs;
  }
  if constexpr (kSharedQ8) {
#pragma unroll
    for (uint32_t t = 0; t < kSharedPieces; ++t) {
      const uint32_t m = kv_wave + kSplitWaves * t;
      const mm::u32x2 q8 = kv.quantize_q(q_raw.w[t], q_inv);
      if (m < 18u) mm::lds_write_b64(lds, kSplitQ8Offset + (64u * m + lane) * 8u, q8);
    }
  } else {
#pragma unroll
    for (int m = 0; m < 18; ++m) {
      if constexpr (Kv::kFp8Qk) q.w[m] = kv.quantize_q(q_raw.w[m], q_inv);
      else q.w[m] = q_raw.w[m];
    }
  }
  if constexpr (kSharedQ8) {
    mm::block_sync();  // every wave's pieces are in LDS
#pragma unroll
    for (int m = 0; m < 18; ++m) q.w[m] = mm::lds_read_b64(lds, kSplitQ8Offset + (64u * m + lane) * 8u);
  }

  // first (std::bool_constant): the part's first tile (kPeelFirst below), whose PV starts from zeros
  auto step = [&](Raws& cur, Raws& nxt, uint32_t it, auto first) __attribute__((always_inline)) {
    constexpr bool kFirst = decltype(first)::value;
    const uint32_t k = k0 + kT * it;
    // Prefetch the next tile's raw bytes and the slots of the one after, unconditionally: past the last tile
    // every token is past k1, so the fetch reads zeros (kNoSlot). Under `if (it + 1 < nt)` the compiler's
    // s_waitcnt before this tile's LDS stores merged the paths with and without the prefetch and waited for
    // the prefetch too (vmcnt counting down to 0), exposing a whole HBM round trip every tile.
    {
      const uint32_t s = slot_next;
      slot_next = load_tile_slot(k + 2u * kT);
      fetch(nxt, s, k + kT);
    }
    tile_sync<KvSplit>();  // every wave is done reading the previous tile from LDS
#pragma unroll
    for (int p = 0; p < kPasses; ++p) kvs.k[p].store(cur[p], ks, vs);
    tile_sync<KvSplit>();  // the tile is in LDS
    if (!has_tile) return;
    // m_run: the row's running max (log2 units); alpha rescales o and l when it grows.
    bool upd;
    float alpha = 1.f;
    if constexpr (kFp8) {
#if defined(__gfx950__)  // (the fp8 stages exist on gfx950 only: kTrV)
      // S^T = K Q^T on fp8 for the two 16-token halves h: lane (i, g) reads K row 16h + i, bytes
      // [144g, 144g+144) (9 reads of 16 fp8 = two 8-column steps each), one v_mfma_f32_16x16x32_fp8_fp8
      // per step (A/B k = 8 (lane / 16) + e).
      mm::f32x4 s[2] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
      mm::u32x4 kw[2][9];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t kbase = (16u * h + i) * kKStride8 + 144u * g;
#pragma unroll
        for (int u = 0; u < 9; ++u) kw[h][u] = mm::lds_read_b128(ks, kbase + 16u * u);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (h == 0) mm::wait_lgkmcnt<9>();
        else mm::wait_lgkmcnt<0>();
        mm::sched_barrier();
#pragma unroll
        for (int u = 0; u < 9; ++u) {
          s[h] = mm::Mfma16x16x32Fp8::run(mm::u32x2{kw[h][u][0], kw[h][u][1]}, q.w[2 * u], s[h]);
          s[h] = mm::Mfma16x16x32Fp8::run(mm::u32x2{kw[h][u][2], kw[h][u][3]}, q.w[2 * u + 1], s[h]);
        }
        mm::sched_barrier();
      }
      // x[4h + e]: token k + 16h + 4g + e of row j = i: also PV's reduction slot 8g + 4h + e (below)
      float x[8];
      if (k + kT <= e_live) {  // uniform: the whole tile is inside every live row's window
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] = s[e >> 2][e & 3] * c_qk;
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int32_t tok = (int32_t)(k + 16u * (e >> 2) + 4u * g + (e & 3));
          x[e] = tok < e_lane ? s[e >> 2][e & 3] * c_qk : -__builtin_inff();
        }
      }
      float mt = -__builtin_inff();
#pragma unroll
      for (int e = 0; e < 8; ++e) mt = __builtin_fmaxf(mt, x[e]);
      mt = __builtin_fmaxf(mt, mm::xor_lane(mt, 16));
      mt = __builtin_fmaxf(mt, mm::xor_lane(mt, 32));
      upd = mt > m_run;  // eager running max over 32-token tiles
      // a row's first finite max: its o is still exactly 0 (or NaN), which alpha = 0 would not change, so a
      // wave whose only updates are such rows skips the rescale (every part's first tile: 64 multiplies)
      const bool rescale = upd && m_run != -__builtin_inff();
      if (upd) {
        alpha = mm::exp2(m_run - mt);
        m_run = mt;
      }
      // p' = 2^(x - m_run + 8) in (0, 256] and its e4m3fn value (the row's largest score so far is exactly
      // 256): o, l and ln are kept in units of 2^(m_run - 8) (kP8Offset), so p down to 2^-14 of the running
      // max is a normal e4m3fn number (docs/numerics.md).
      const float m_sub = (m_run == -__builtin_inff() ? 0.f : m_run) - kP8Offset;
      float pr[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) pr[e] = mm::exp2(x[e] - m_sub);
      float pq_sum;
      const mm::u32x2 pb = kv.round_p8(pr, pq_sum);
      l_run = l_run * alpha + (((pr[0] + pr[1]) + (pr[2] + pr[3])) + ((pr[4] + pr[5]) + (pr[6] + pr[7])));
      ln_run = ln_run * alpha + pq_sum;
      if (!kFirst && __builtin_amdgcn_ballot_w64(rescale) != 0) {
#pragma unroll
        for (int c = 0; c < 32; ++c) acc[c] *= alpha;
      }
      // O^T += V^T P^T on fp8: block c = output columns 16c .. 16c+15; A = V^T read transposed from the fp8
      // K rows by one ds_read_b64_tr_b8: lane s of each 16-lane group g supplies bytes 16c + 8 (s % 2) .. +7 of
      // the token of slot 8g + s / 2, so lane (i, g) receives column 16c + i of the tokens of slots 8g .. 8g+7
      // (slot 8g + 4h + e = token 16h + 4g + e); B = p~ in the same slot order. 32 reads in 4
      // double-buffered groups of 8, one s_waitcnt per group.
      const uint32_t sl = lane & 15u, hh = (sl >> 3) & 1u;
      const uint32_t vbase = (16u * hh + 4u * g + ((sl >> 1) & 3u)) * kKStride8 + 8u * (sl & 1u);
      grouped_reads<32, 8, mm::u32x2>([&](int u) { return mm::lds_read_tr8_b64(ks, vbase + 16u * u); },
                                      [&](int c, const mm::u32x2& va) { acc[c] = mm::Mfma16x16x32Fp8::run(va, pb, kFirst ? kZero4 : acc[c]); });
#endif
    } else {
      mm::f32x4 s = {0.f, 0.f, 0.f, 0.f};
      // S^T = K Q^T: 18 LDS reads in 3 double-buffered groups of 6
      const uint32_t kbase = i * kKStride + 2u * 144u * g;
      grouped_reads<18, 6, mm::u32x4>([&](int u) { return mm::lds_read_b128(ks, kbase + 16u * u); },
                                      [&](int u, const mm::u32x4& kw) { s = qk_step8(kw, q.w[u], s); });  // the arch's stage
      float x[4];
      float mt = -__builtin_inff();
      if (k + 16u <= e_live) {  // uniform: the whole tile is inside every live row's window
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = s[e] * c_qk;
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int32_t tok = (int32_t)(k + 4u * g + e);
          x[e] = tok < e_lane ? s[e] * c_qk : -__builtin_inff();
        }
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) mt = __builtin_fmaxf(mt, x[e]);
      mt = __builtin_fmaxf(mt, mm::xor_lane(mt, 16));
      mt = __builtin_fmaxf(mt, mm::xor_lane(mt, 32));
      mm::u32x2 pb;
      upd = mt > m_run;  // eager running max (the a16w8 kernels' kLazyMax = 0)
      // a row's first finite max: its o is still exactly 0 (or NaN), which alpha = 0 would not change, so a
      // wave whose only updates are such rows skips the rescale (every part's first tile: 64 multiplies)
      const bool rescale = upd && m_run != -__builtin_inff();
      if (upd) {
        alpha = mm::exp2(m_run - mt);
        m_run = mt;
      }
      const float m_sub = m_run == -__builtin_inff() ? 0.f : m_run;
      float pr[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) pr[e] = mm::exp2(x[e] - m_sub);
      pb = mm::u32x2{mm::pack_bf16x2_rna(pr[0], pr[1]), mm::pack_bf16x2_rna(pr[2], pr[3])};
      l_run = l_run * alpha + ((pr[0] + pr[1]) + (pr[2] + pr[3]));
      ln_run = ln_run * alpha + ((mm::bf16_lo(pb[0]) + mm::bf16_hi(pb[0])) + (mm::bf16_lo(pb[1]) + mm::bf16_hi(pb[1])));
      if (!kFirst && __builtin_amdgcn_ballot_w64(rescale) != 0) {
#pragma unroll
        for (int c = 0; c < 32; ++c) acc[c] *= alpha;
      }

      if constexpr (kTrV) {
        // O += P V: block c = output columns 16c .. 16c+15, A = V^T read transposed from the V rows (one
        // ds_read_b64_tr_b16 per block: lane (i, g) gets V[tokens 4g..4g+3][column 16c + i]).
        using S = mm::Mfma16x16x16Bf16;
        using Rows = mm::LinearLds<kKStride>;
        const uint8_t* vrows = ks;
        // 32 reads in 4 double-buffered groups of 8, one s_waitcnt per group (as the QK reads)
        grouped_reads<32, 8, mm::FragA<S>>(
            [&](int u) {
              mm::FragA<S> va;
              mm::lds_load_a_kmajor<Rows>(va, vrows, 16u * u, 0u);
              return va;
            },
            [&](int c, const mm::FragA<S>& va) { acc[c] = S::run(va.w, pb, kFirst ? kZero4 : acc[c]); });
      } else {
        // O += P V: 16 LDS reads (two chunks each) in 4 double-buffered groups of 4.
        const uint32_t vb = (i * 4u + g) * kVBlock;
        grouped_reads<16, 4, mm::u32x4>([&](int u) { return mm::lds_read_b128(vs, vb + 16u * u); },
                                        [&](int u, const mm::u32x4& vw) {
#pragma unroll
                                          for (int h = 0; h < 2; ++h) {
                                            const mm::u32x2 va = {vw[2 * h], vw[2 * h + 1]};
                                            acc[2 * u + h] = mm::mfma_16x16x16_bf16(mm::bit_cast<mm::i16x4>(va),
                                                                                    mm::bit_cast<mm::i16x4>(pb),
                                                                                    kFirst ? kZero4 : acc[2 * u + h]);
                                          }
                                        });
      }
    }
  };

  if (kPeelFirst && nt > 0) {
    step(raw_a, raw_b, 0u, std::true_type{});
    for (uint32_t it = 1; it < nt; it += 2) {
      step(raw_b, raw_a, it, std::false_type{});
      if (it + 1 >= nt) break;
      step(raw_a, raw_b, it + 1, std::false_type{});
    }
  } else {
    for (uint32_t it = 0; it < nt; it += 2) {
      step(raw_a, raw_b, it, std::false_type{});
      if (it + 1 >= nt) break;
      step(raw_b, raw_a, it + 1, std::false_type{});
    }
  }

  float l_row = l_run + mm::xor_lane(l_run, 16);
  l_row += mm::xor_lane(l_row, 32);
  float ln_row = ln_run + mm::xor_lane(ln_run, 16);
  ln_row += mm::xor_lane(ln_row, 32);
  if constexpr (KvSplit) {
    mm::f32x4 mo[kSplitBlocks];  // this wave's columns of the merged O
    merge_split_waves(lds, acc, m_run, l_row, ln_row, mo);
    if (!live) return;
    const float m_out = kFp8 ? m_run - kP8Offset : m_run;
    write_split_outputs(a, mo, m_out, l_row, ln_row, unit * rows + r, R, B * rows);
    return;
  }
  if (!live) return;
  const float m_out = kFp8 ? m_run - kP8Offset : m_run;  // the fp8 path keeps o and l in units of 2^(m_run - 8)
  // Output columns of acc[c][rr] at lane (j, g): kTrV: 16c + 4g + rr (4 consecutive per block); otherwise
  // 32 (4g + rr) + c (32 consecutive per rr).
  if (a.flags & kFlagPartial) {
    const uint32_t slot = unit * rows + r;
    const mm::buffer_rsrc wo = mm::make_buffer(a.ws_o, B * rows * nparts * kLat * 4u);
    if constexpr (kTrV) {
#pragma unroll
      for (int c = 0; c < 32; ++c)
        mm::buffer_store_b128(mm::bit_cast<mm::u32x4>(acc[c]), wo, (slot * kLat + 16u * c + 4u * g) * 4u);
    } else {
#pragma unroll
      for (int rr = 0; rr < 4; ++rr) {
        const uint32_t col = 32u * (4u * g + rr);
#pragma unroll
        for (int q4 = 0; q4 < 8; ++q4) {
          mm::u32x4 v;
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = mm::bit_cast<uint32_t>(acc[4 * q4 + e][rr]);
          mm::buffer_store_b128(v, wo, (slot * kLat + col + 4u * q4) * 4u);
        }
      }
    }
    if (g == 0) {
      const mm::buffer_rsrc wml = mm::make_buffer(a.ws_ml, B * rows * nparts * 16u);
      mm::buffer_store_b128(mm::u32x4{mm::bit_cast<uint32_t>(m_out), mm::bit_cast<uint32_t>(l_row),
                                      mm::bit_cast<uint32_t>(ln_row), 0u},
                            wml, slot * 16u);
    }
  } else {
    const float inv = inv_norm(a.o_scale, ln_row);
    const mm::buffer_rsrc ob = mm::make_buffer(a.o_lat, B * rows * kLat * 2u);
    clear_empty_rows(acc, ln_row == 0.f);
    if constexpr (kTrV) {
#pragma unroll
      for (int c = 0; c < 32; c += 2) {  // blocks c, c+1: columns 16c + 4g .. +3 and 16(c+1) + 4g .. +3
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const mm::f32x4 v = acc[c + h];
          mm::buffer_store_b64(mm::u32x2{mm::pack_bf16x2<mm::Round::RTNE>(v[0] * inv, v[1] * inv),
                                         mm::pack_bf16x2<mm::Round::RTNE>(v[2] * inv, v[3] * inv)},
                               ob, (R * kLat + 16u * (c + h) + 4u * g) * 2u);
        }
      }
    } else {
#pragma unroll
      for (int rr = 0; rr < 4; ++rr) {
        const uint32_t col = 32u * (4u * g + rr);
#pragma unroll
        for (int q8 = 0; q8 < 4; ++q8) {
          mm::u32x4 v;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = 8 * q8 + 2 * e;
            v[e] = mm::pack_bf16x2<mm::Round::RTNE>(acc[c][rr] * inv, acc[c + 1][rr] * inv);
          }
          mm::buffer_store_b128(v, ob, (R * kLat + col + 8u * q8) * 2u);
        }
      }
    }
    if ((a.flags & kFlagLse) && g == 0) {
      const float out = finish_lse(m_out, l_row);
      mm::buffer_store_f32(out, mm::make_buffer(a.lse, B * rows * 4u), R * 4u);
    }
  }
}

}  // namespace mla
