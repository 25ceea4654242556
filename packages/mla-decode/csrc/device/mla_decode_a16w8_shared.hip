// MLA absorbed decode, gfx942, shared-tile variant: for q_len * H > 16 (two or more row tiles).
//
// Same math, layouts of S/P/O, masking, softmax and outputs as mla_decode_a16w8.hip (read that file's
// header first); what differs is who fetches and widens the KV:
//   a workgroup = 4 waves = one (request, KV part, group of up to 4 row tiles). Per 16-token tile the
//   256 threads fetch the tile once (K rows: 576 chunks of 16 bytes; V: 128 units of 4 tokens x 16
//   columns), widen it to bf16 once, and store it in LDS in the two operand layouts; then each wave
//   with a row tile runs its 36 + 32 MFMAs reading its operands from LDS with 16-byte reads.
// So the widening VALU and the VMEM requests are paid once per workgroup instead of once per row tile.
//
// LDS (one tile, 36096 bytes):
//   Ks  [16 tokens][584 bf16]   K rows, stride 1168 bytes (bank spread); lane (i, g) of the QK MFMA
//                               reads row i, columns [144g, 144g+144) (same column order as the
//                               register kernel: slot 4g+e of k-step kk <-> column 144g + 4kk + e).
//   Vs  [16 i][4 g][34 x 8 B]   for A-row i and lane group g, 32 chunks (+ pad) of 4 bf16: chunk c holds
//                               V[tokens 4g..4g+3][column 32i + c]. Output block c of the PV MFMA covers
//                               columns 32i + c for A-rows i, so D reg rr of lane (j, g) holds
//                               O[row j][32 (4g + rr) + c].
// Two barriers per tile (tile written -> read; read -> next write). Raw fp8 of tile n+1 is fetched into
// registers while tile n is widened and computed.
#include "mla_decode_common.hpp"
#include "moonmath/convert.hpp"

namespace {

using namespace mla;
constexpr uint32_t kWaves = 4;
constexpr float kLazyMax = 0.0f;  // eager running max (see mla_decode_a16w8.hip)
constexpr uint32_t kKStride = 1168;        // bytes per K row in LDS (576 bf16 + 16 bytes pad)
constexpr uint32_t kVBlock = 272;          // bytes per (i, g) V block (32 chunks of 8 + 16 pad)
constexpr uint32_t kKBytes = 16 * kKStride;
constexpr uint32_t kVBytes = 64 * kVBlock;

// Raw fp8 of one tile held by one thread: up to three K chunks and (threads 0..127) one V unit.
struct Raw {
  mm::u32x4 k[3];
  mm::u32x4 v[4];
};

// Widen 16 fp8 bytes to 16 bf16 (8 dwords).
MM_DEVICE void widen16(const mm::u32x4& w, uint32_t out[8]) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const mm::f32x2 lo = mm::cvt_pk_f32_fp8<false>(w[q]);
    const mm::f32x2 hi = mm::cvt_pk_f32_fp8<true>(w[q]);
    out[2 * q] = mm::pack_bf16x2_hi(lo.x, lo.y);
    out[2 * q + 1] = mm::pack_bf16x2_hi(hi.x, hi.y);
  }
}

}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) __attribute__((amdgpu_waves_per_eu(1, 1))) void mla_decode_a16w8_fwd_shared(
    const MlaDecodeArgs args) {  // mla_decode_args.hpp
  MLA_UNPACK_ARGS(args);
  MM_LDS __attribute__((aligned(16))) uint8_t lds[kKBytes + kVBytes];
  uint8_t* const ks = lds;
  uint8_t* const vs = lds + kKBytes;

  const uint32_t rows = q_len * H;
  const uint32_t n_rt = (rows + 15u) / 16u;
  const uint32_t n_grp = (n_rt + kWaves - 1u) / kWaves;
  const uint32_t wg = mm::block_id_x();
  if (wg >= B * nparts * n_grp) return;  // uniform over the workgroup
  const uint32_t grp = wg % n_grp;
  const uint32_t unit = wg / n_grp;
  const Units units = locate(SplitArgs{seq_lens, glen, kv_indptr, n_idx, B, nparts, q_len, cp_rank, cp_world, flags},
                             unit, false);
  if (!units.valid) return;  // an idle unit of the balanced split (uniform over the workgroup)
  const uint32_t b = units.b;
  const uint32_t p = unit - units.first;
  const uint32_t wave = mm::wave_id();
  const uint32_t rt = grp * kWaves + wave;
  const bool has_tile = rt < n_rt;  // wave-uniform: waves past the last row tile only fetch and widen

  const uint32_t tid = mm::thread_id_x();
  const uint32_t lane = mm::lane_id();
  const uint32_t i = lane & 15u, g = lane >> 4;
  const Scales sc = read_scales(kv_scale_dev, c_qk_bits, o_scale_bits, scale_log2e_bits);
  const float c_qk = sc.c_qk;
  const float o_scale = sc.o_scale;

  const RequestView req = request_view(seq_lens, glen, kv_indices, kv_indptr, n_idx, cp_world, b);
  const int32_t slen = req.slen;
  const int32_t gl = req.glen;
  const uint32_t r = rt * 16u + i;
  const bool live = has_tile && r < rows;
  const int32_t e_row = live ? window_end(gl, slen, (int32_t)q_len, (int32_t)(r / H), (int32_t)cp_rank,
                                          (int32_t)cp_world)
                             : 0;
  const int32_t e_req = window_end(gl, slen, (int32_t)q_len, (int32_t)q_len - 1, (int32_t)cp_rank, (int32_t)cp_world);
  const uint32_t n_tiles = e_req > 0 ? ((uint32_t)e_req + 15u) / 16u : 0u;
  const uint32_t tpp = (n_tiles + units.count - 1u) / units.count;
  const uint32_t tile0 = p * tpp;
  const uint32_t tile1 = tile0 + tpp < n_tiles ? tile0 + tpp : n_tiles;
  const uint32_t k0 = tile0 * 16u;
  const uint32_t k1 = tile1 * 16u < (uint32_t)e_req ? tile1 * 16u : (uint32_t)(e_req > 0 ? e_req : 0);
  const int32_t e_lane = e_row < (int32_t)k1 ? e_row : (int32_t)k1;
  // Row ends grow with the row (position-major rows), so lane 0's end is the wave's smallest live one:
  // a tile ending at or before it needs no mask. (Dead rows then see unmasked scores of a zero Q:
  // their p only ever reaches their own, never stored, output column.)
  const uint32_t e_live = mm::uniform((uint32_t)(e_lane > 0 ? e_lane : 0));
  const uint32_t R = b * rows + r;

  const mm::buffer_rsrc pool_buf = make_pool(pool, pool_slots);
  const mm::buffer_rsrc idx_buf = req.idx;

  // Fetch roles. K chunk ck = tid + 256u (u = 0..2, ck < 576): token ck / 36, bytes 16 * (ck % 36).
  // V unit (tid < 128): tokens 4 * (tid / 32) + e, bytes 16 * (tid % 32).
  const uint32_t n_kchunks = tid < 64u ? 3u : 2u;
  uint32_t ktok[3], kcol[3];
#pragma unroll
  for (int u = 0; u < 3; ++u) {
    const uint32_t ck = tid + 256u * u;
    ktok[u] = ck / 36u;
    kcol[u] = 16u * (ck % 36u);
  }
  const bool v_role = tid < 128u;
  const uint32_t vtg = (tid >> 5) & 3u, vcg = tid & 31u;

  // Slots: lane l (< 16) of every wave loads token l's slot; the roles fetch theirs by ds_bpermute.
  auto load_tile_slot = [&](uint32_t k) __attribute__((always_inline)) {
    return load_slot(idx_buf, k + (lane & 15u));
  };
  auto fetch = [&](Raw& raw, uint32_t slot_raw, uint32_t k) __attribute__((always_inline)) {
    // tokens past the part: kNoSlot, which the pool buffer reads as zeros (K and V)
    const uint32_t slot_l = (k + (lane & 15u)) < k1 ? slot_raw : kNoSlot;
#pragma unroll
    for (int u = 0; u < 3; ++u) {
      const uint32_t s = mm::bpermute(slot_l, ktok[u] & 15u);
      if ((uint32_t)u < n_kchunks) raw.k[u] = pool_load_b128(pool_buf, s, kcol[u]);
    }
    if (v_role) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t s = mm::bpermute(slot_l, 4u * vtg + e);
        raw.v[e] = pool_load_b128(pool_buf, s, 16u * vcg);
      }
    }
  };
  // Widen a fetched tile into LDS (tokens at or past k1 were fetched as kNoSlot: zeros, never NaN).
  auto widen = [&](const Raw& raw) __attribute__((always_inline)) {
#pragma unroll
    for (int u = 0; u < 3; ++u) {
      if ((uint32_t)u < n_kchunks) {
        uint32_t w[8];
        widen16(raw.k[u], w);
        const uint32_t off = ktok[u] * kKStride + 2u * kcol[u];
        mm::lds_write_b128(ks, off, mm::u32x4{w[0], w[1], w[2], w[3]});
        mm::lds_write_b128(ks, off + 16u, mm::u32x4{w[4], w[5], w[6], w[7]});
      }
    }
    if (v_role) {
      const mm::u32x4* v = raw.v;
      // columns 16 vcg + 4q + cc -> A-row i = vcg / 2, chunk c = 16 (vcg % 2) + 4q + cc
      const uint32_t vb = ((vcg >> 1) * 4u + vtg) * kVBlock + 8u * 16u * (vcg & 1u);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        mm::f32x2 f[4][2];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          f[e][0] = mm::cvt_pk_f32_fp8<false>(v[e][q]);
          f[e][1] = mm::cvt_pk_f32_fp8<true>(v[e][q]);
        }
        uint32_t d[8];
#pragma unroll
        for (int cc = 0; cc < 4; ++cc) {
          d[2 * cc] = mm::pack_bf16x2_hi(f[0][cc >> 1][cc & 1], f[1][cc >> 1][cc & 1]);
          d[2 * cc + 1] = mm::pack_bf16x2_hi(f[2][cc >> 1][cc & 1], f[3][cc >> 1][cc & 1]);
        }
        mm::lds_write_b128(vs, vb + 32u * q, mm::u32x4{d[0], d[1], d[2], d[3]});
        mm::lds_write_b128(vs, vb + 32u * q + 16u, mm::u32x4{d[4], d[5], d[6], d[7]});
      }
    }
  };

  mm::f32x4 acc[32];
#pragma unroll
  for (int c = 0; c < 32; ++c) acc[c] = mm::f32x4{0.f, 0.f, 0.f, 0.f};
  float m_run = -__builtin_inff();
  float l_run = 0.f, ln_run = 0.f;

  // Q tile as in the register kernel: lane (j=i, g) holds columns [144g, 144g+144) of row j.
  mm::u32x4 q[18];
  {
    const mm::buffer_rsrc qlat_buf = mm::make_buffer(q_lat, B * rows * kLat * 2u);
    const mm::buffer_rsrc qpe_buf = mm::make_buffer(q_pe, B * rows * 64u * 2u);
#pragma unroll
    for (int m = 0; m < 18; ++m) {
      const uint32_t col = 144u * g + 8u * m;
      mm::u32x4 v = {0u, 0u, 0u, 0u};
      if (live) {
        if (col < kLat) v = mm::buffer_load_b128(qlat_buf, R * kLat * 2u + col * 2u);
        else v = mm::buffer_load_b128(qpe_buf, R * 64u * 2u + (col - kLat) * 2u);
      }
      q[m] = v;
    }
  }

  const int32_t nt_signed = (int32_t)tile1 - (int32_t)tile0;
  const uint32_t nt = nt_signed > 0 ? (uint32_t)nt_signed : 0u;

  Raw raw_a, raw_b;
  uint32_t slot_next = 0;
  if (nt > 0) {
    const uint32_t s0 = load_tile_slot(k0);
    slot_next = load_tile_slot(k0 + 16u);
    mm::wait_vmcnt<0>();
    fetch(raw_a, s0, k0);
  }

  auto step = [&](Raw& cur, Raw& nxt, uint32_t it) __attribute__((always_inline)) {
    const uint32_t k = k0 + 16u * it;
    if (it + 1 < nt) {  // prefetch the next tile's fp8 and the slots of the one after
      const uint32_t s = slot_next;
      slot_next = load_tile_slot(k + 32u);
      fetch(nxt, s, k + 16u);
    }
    mm::block_sync();  // every wave is done reading the previous tile from LDS
    widen(cur);
    mm::block_sync();  // the tile is in LDS
    if (!has_tile) return;

    // S^T = K Q^T: lane (i, g) reads K row i, columns 144g + 8m .. +7 (k-steps 2m, 2m+1). The 18 reads
    // go in 3 groups of 6, double-buffered: group n+1 is in flight while group n's 12 MFMAs run, and
    // one s_waitcnt per group (not one per read) retires it.
    mm::f32x4 s = {0.f, 0.f, 0.f, 0.f};
    {
      constexpr int kGrp = 6, kNGrp = 18 / kGrp;
      mm::u32x4 kw[2][kGrp];
      const uint32_t kbase = i * kKStride + 2u * 144u * g;
#pragma unroll
      for (int u = 0; u < kGrp; ++u) kw[0][u] = mm::lds_read_b128(ks, kbase + 16u * u);
#pragma unroll
      for (int n = 0; n < kNGrp; ++n) {
        if (n + 1 < kNGrp) {
#pragma unroll
          for (int u = 0; u < kGrp; ++u) kw[(n + 1) & 1][u] = mm::lds_read_b128(ks, kbase + 16u * (kGrp * (n + 1) + u));
          mm::wait_lgkmcnt<kGrp>();
        } else {
          mm::wait_lgkmcnt<0>();
        }
        mm::sched_barrier();
#pragma unroll
        for (int u = 0; u < kGrp; ++u) s = qk_step8(kw[n & 1][u], q[kGrp * n + u], s);  // the arch's stage
        mm::sched_barrier();
      }
    }

    float x[4];
    float mt = -__builtin_inff();
    if (k + 16u <= e_live) {  // uniform: every token of the tile is inside every live row's window
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
    const bool upd = mt > m_run + kLazyMax;
    float alpha = 1.f;
    if (upd) {
      alpha = mm::exp2(m_run - mt);
      m_run = mt;
    }
    const float m_sub = m_run == -__builtin_inff() ? 0.f : m_run;
    float pr[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) pr[e] = mm::exp2(x[e] - m_sub);
    const mm::u32x2 pb = {mm::pack_bf16x2_rna(pr[0], pr[1]), mm::pack_bf16x2_rna(pr[2], pr[3])};
    l_run = l_run * alpha + ((pr[0] + pr[1]) + (pr[2] + pr[3]));
    ln_run = ln_run * alpha + ((mm::bf16_lo(pb[0]) + mm::bf16_hi(pb[0])) + (mm::bf16_lo(pb[1]) + mm::bf16_hi(pb[1])));
    if (__builtin_amdgcn_ballot_w64(upd) != 0) {
#pragma unroll
      for (int c = 0; c < 32; ++c) acc[c] *= alpha;
    }

    // O += P V: lane (i, g) reads its 32 chunks (columns 32i + c, tokens 4g..4g+3), two per read; the 16
    // reads in 4 double-buffered groups of 4 with one s_waitcnt each, as for QK.
    const uint32_t vb = (i * 4u + g) * kVBlock;
    {
      constexpr int kGrp = 4, kNGrp = 16 / kGrp;
      mm::u32x4 vw[2][kGrp];
#pragma unroll
      for (int u = 0; u < kGrp; ++u) vw[0][u] = mm::lds_read_b128(vs, vb + 16u * u);
#pragma unroll
      for (int n = 0; n < kNGrp; ++n) {
        if (n + 1 < kNGrp) {
#pragma unroll
          for (int u = 0; u < kGrp; ++u) vw[(n + 1) & 1][u] = mm::lds_read_b128(vs, vb + 16u * (kGrp * (n + 1) + u));
          mm::wait_lgkmcnt<kGrp>();
        } else {
          mm::wait_lgkmcnt<0>();
        }
        mm::sched_barrier();
#pragma unroll
        for (int u = 0; u < kGrp; ++u) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const mm::u32x2 va = {vw[n & 1][u][2 * h], vw[n & 1][u][2 * h + 1]};
            const int c = 2 * (kGrp * n + u) + h;
            acc[c] = mm::mfma_16x16x16_bf16(mm::bit_cast<mm::i16x4>(va), mm::bit_cast<mm::i16x4>(pb), acc[c]);
          }
        }
        mm::sched_barrier();
      }
    }
  };

  for (uint32_t it = 0; it < nt; it += 2) {
    step(raw_a, raw_b, it);
    if (it + 1 >= nt) break;
    step(raw_b, raw_a, it + 1);
  }

  if (!live) return;
  float l_row = l_run + mm::xor_lane(l_run, 16);
  l_row += mm::xor_lane(l_row, 32);
  float ln_row = ln_run + mm::xor_lane(ln_run, 16);
  ln_row += mm::xor_lane(ln_row, 32);
  // Lane (j, g), block c, reg rr: column 32 (4g + rr) + c: 32 consecutive columns per rr.
  if (flags & kFlagPartial) {
    const uint32_t slot = unit * rows + r;
    const mm::buffer_rsrc wo = mm::make_buffer(ws_o, B * rows * nparts * kLat * 4u);
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
    if (g == 0) {
      const mm::buffer_rsrc wml = mm::make_buffer(ws_ml, B * rows * nparts * 16u);
      mm::buffer_store_b128(mm::u32x4{mm::bit_cast<uint32_t>(m_run), mm::bit_cast<uint32_t>(l_row),
                                      mm::bit_cast<uint32_t>(ln_row), 0u},
                            wml, slot * 16u);
    }
  } else {
    const float inv = inv_norm(o_scale, ln_row);
    const mm::buffer_rsrc ob = mm::make_buffer(o_lat, B * rows * kLat * 2u);
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
    if ((flags & kFlagLse) && g == 0) {
      const float out = finish_lse(m_run, l_row);
      mm::buffer_store_f32(out, mm::make_buffer(lse, B * rows * 4u), R * 4u);
    }
  }
}
