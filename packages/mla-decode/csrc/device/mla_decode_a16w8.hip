// MLA absorbed decode, gfx942: bf16 Q against fp8 e4m3fnuz fused KV rows (576 = 512 latent + 64 rope).
//
// Work unit: one wave owns one 16-row tile of one request over one KV part.
//   rows   r = t*H + h (position t, head h) of request b, packed 16 to a tile, so any H and q_len
//          fill tiles; global row R = b*q_len*H + r indexes q_lat/q_pe/o_lat/lse directly.
//   parts  the grid holds U = B * nparts units; request b owns count_b of them (nparts each, or by
//          length with kFlagBalanced: mla_decode_common.hpp, locate) and its window [0, E_b) (E_b =
//          window end of its last position) is cut into count_b runs of whole 16-token tiles; part p
//          takes tiles [p*tpp, (p+1)*tpp).
// Waves are independent (no LDS, no barriers): each keeps its Q tile and its full 16x512 fp32
// output accumulator in registers and streams its part's KV tiles straight from the pool.
// Wave order inside the grid: rt fastest, then part, then request, so the row tiles that share a
// KV part sit in one workgroup and share its fetches through L1/L2.
//
// Per 16-token KV tile, per wave: 36 MFMA for S = K Q^T (K = all 576 columns) and 32 MFMA for
// O += P V (V = the first 512 columns), all v_mfma_f32_16x16x16_bf16, fp8 widened exactly to bf16.
//
// Operand layouts (16x16x16: A[i][k] in lane 16*(k/4)+i element k%4, B[k][j] in lane 16*(k/4)+j,
// D[i][j] in reg i%4 of lane 16*(i/4)+j). Lane = 16*g + i. The contraction index of an MFMA may be
// any permutation of the reduced dimension as long as both operands use the same one:
//   QK  A = K (i = token), B = Q (j = row), k-step kk in 0..35, slot 4g+e <-> column 144g + 4kk + e:
//       lane (i, g) needs bytes [144g, 144g+144) of token i's row: nine 16-byte loads. Q likewise.
//       D = S^T: lane (j, g) holds scores of row j for tokens 4g..4g+3: already the B layout of P.
//   PV  A = V^T (i = output column, k = token), B = P. Output column of block c (0..31) at A-row i:
//       col(c, i) = 256*(c/16) + 16*i + c%16, so lane (i, g) needs tokens 4g..4g+3, bytes
//       [256h + 16i, +16) for h = 0, 1: eight 16-byte loads. D: lane (j, g), block c, reg r holds
//       O[row j][256*(c/16) + 64g + 16r + c%16]: 16 consecutive columns per (c/16, r).
//
// Softmax in the exp2 domain: x = s * scale * kv_scale * log2(e). Running max per row; it moves
// when a tile's max exceeds it by more than kLazyMax, and the O rescale runs only when some row of
// the wave moved. kLazyMax = 0 (an eager max): then the row's largest probability is exactly 1.0,
// exact in bf16, which halves the error of peaked rows against a threshold of 8 (measured: rel. L2
// 1.0-1.5e-3 vs 1.7-2.1e-3) for ~12% more VALU per tile (more rescales on short parts).
// A row's arithmetic depends on its own scores only, so KV outside its window cannot change it.
//
// Output: with one part the wave writes o (bf16 RTNE, o = kv_scale * O / ln, ln = the sum of the bf16
// p the MFMA used) and lse = m + log2(l) (l = the sum of the fp32 p); otherwise it writes the fp32
// partial (O, m, l, ln) to the workspace and mla_decode_a16w8_merge combines the parts in a fixed
// order (deterministic, no atomics). For q_len * H > 16 the planner usually picks the shared-tile
// variant (mla_decode_a16w8_shared.hip), which widens each KV tile once per 4 row tiles.
//
// Memory safety and size (mla_decode_common.hpp): the pool is a structured buffer (576-byte records,
// num_records = slots), so a bad slot index reads zeros, never outside the pool, and pools beyond 4 GiB
// need no 64-bit math; each request's kv_indices run is its own buffer and its length is clamped to
// that run (a device-resident seq_len of 2^31-1 cannot hang the kernel).
// NaN/Inf: a NaN in a score makes the row's l NaN, so lse is NaN (not -inf, which reads as empty).
// A NaN in a KV row that a row does not attend (causal positions of q_len > 1 sharing the tile)
// still reaches that row through the shared PV MFMA (p = 0 times NaN = NaN), as in the reference's
// dense P V product over the request's longest window.
#include "mla_decode_common.hpp"
#include "moonmath/convert.hpp"

namespace {

using namespace mla;
constexpr uint32_t kWavesPerBlock = 4;
constexpr float kLazyMax = 0.0f;         // log2 units (see the softmax note)

struct KvRaw {
  mm::u32x4 k[9];     // token i, bytes [144g + 16m, +16)
  mm::u32x4 v[4][2];  // token 4g+e, bytes [256h + 16i, +16)
};

// Issue the loads of one KV tile. Lane (i, g): K = token i's bytes [144g, +144); V = tokens 4g+e's
// bytes [256h + 16i, +16). Token i's slot is `slot_raw` if tok_i < k_end, else kNoSlot: the pool
// buffer returns zeros for it, so tokens past the part contribute 0 to S (masked anyway) and to PV.
MM_DEVICE void load_kv(KvRaw& raw, mm::buffer_rsrc pool, uint32_t slot_raw, uint32_t tok_i, uint32_t k_end,
                       uint32_t g, uint32_t i) {
  const uint32_t slot_i = tok_i < k_end ? slot_raw : kNoSlot;
#pragma unroll
  for (int m = 0; m < 9; ++m) raw.k[m] = pool_load_b128(pool, slot_i, 144u * g + 16u * m);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const uint32_t s = mm::bpermute(slot_i, 4u * g + e);  // slot of token 4g+e (held by lane 4g+e)
    raw.v[e][0] = pool_load_b128(pool, s, 16u * i);
    raw.v[e][1] = pool_load_b128(pool, s, 16u * i + 256u);
  }
}

}  // namespace

MM_KERNEL MM_LAUNCH_BOUNDS(256) __attribute__((amdgpu_waves_per_eu(1, 1))) void mla_decode_a16w8_fwd(
    const MlaDecodeArgs args) {  // mla_decode_args.hpp: one struct for the host and the three decode kernels
  MLA_UNPACK_ARGS(args);
  const uint32_t rows = q_len * H;
  const uint32_t n_rt = (rows + 15u) / 16u;
  const uint32_t gw = mm::block_id_x() * kWavesPerBlock + mm::wave_id();
  if (gw >= B * nparts * n_rt) return;
  const uint32_t rt = gw % n_rt;
  const uint32_t unit = gw / n_rt;
  const Units units = locate(SplitArgs{seq_lens, glen, kv_indptr, n_idx, B, nparts, q_len, cp_rank, cp_world, flags},
                             unit, false);
  if (!units.valid) return;  // an idle unit of the balanced split (wave-uniform)
  const uint32_t b = units.b;
  const uint32_t p = unit - units.first;

  const uint32_t lane = mm::lane_id();
  const uint32_t i = lane & 15u, g = lane >> 4;
  const Scales sc = read_scales(kv_scale_dev, c_qk_bits, o_scale_bits, scale_log2e_bits);
  const float c_qk = sc.c_qk;
  const float o_scale = sc.o_scale;

  // ---- this wave's rows and KV range -------------------------------------------------------------
  const RequestView req = request_view(seq_lens, glen, kv_indices, kv_indptr, n_idx, cp_world, b);
  const int32_t slen = req.slen;
  const int32_t gl = req.glen;
  const uint32_t r = rt * 16u + i;  // lane's row (as j of S/O) within the request
  const bool live = r < rows;
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
  const int32_t e_lane = e_row < (int32_t)k1 ? e_row : (int32_t)k1;  // valid tokens: tok < e_lane
  const uint32_t R = b * rows + r;                                   // global row

  // ---- stream the part's KV tiles ------------------------------------------------------------------
  const mm::buffer_rsrc pool_buf = make_pool(pool, pool_slots);
  const mm::buffer_rsrc idx_buf = req.idx;

  mm::f32x4 acc[32];
#pragma unroll
  for (int c = 0; c < 32; ++c) acc[c] = mm::f32x4{0.f, 0.f, 0.f, 0.f};
  float m_run = -__builtin_inff();
  float l_run = 0.f;   // this lane's share (tokens 4g..4g+3 of every tile) of row j's sum of p
  float ln_run = 0.f;  // the same over the bf16-rounded p

  mm::u32x4 q[18];
  // ---- Q tile: lane (j=i, g) holds columns [144g, 144g+144) of row j as 18 x 8 bf16 ----------------
  const mm::buffer_rsrc qlat_buf = mm::make_buffer(q_lat, B * rows * kLat * 2u);
  const mm::buffer_rsrc qpe_buf = mm::make_buffer(q_pe, B * rows * 64u * 2u);
  auto load_q = [&]() __attribute__((always_inline)) {
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
  };

  const int32_t nt_signed = (int32_t)tile1 - (int32_t)tile0;  // tile0 may lie past the last tile
  const uint32_t nt = nt_signed > 0 ? (uint32_t)nt_signed : 0u;

  // One 16-token tile: S, online softmax, O += P V. `it` is the tile's index within the part.
  auto compute = [&](KvRaw& cur, uint32_t it) __attribute__((always_inline)) {
    const uint32_t k = k0 + 16u * it;
    // S^T = K Q^T over 576 columns (36 k-steps).
    mm::f32x4 s = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int m = 0; m < 9; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // columns 144g + 16m + 8h .. +7 = Q chunk 2m + h
        mm::u32x4 kb;
#pragma unroll
        for (int w = 0; w < 2; ++w) {
          const mm::f32x2 lo = mm::cvt_pk_f32_fp8<false>(cur.k[m][2 * h + w]);
          const mm::f32x2 hi = mm::cvt_pk_f32_fp8<true>(cur.k[m][2 * h + w]);
          kb[2 * w] = mm::pack_bf16x2_hi(lo.x, lo.y);
          kb[2 * w + 1] = mm::pack_bf16x2_hi(hi.x, hi.y);
        }
        s = qk_step8(kb, q[2 * m + h], s);  // the arch's stage (gfx942/gfx950 mla_decode_stages.hpp)
      }
    }

    // Online softmax for row j over tokens k + 4g + 0..3.
    float x[4];
    float mt = -__builtin_inff();
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int32_t tok = (int32_t)(k + 4u * g + e);
      x[e] = tok < e_lane ? s[e] * c_qk : -__builtin_inff();
      mt = __builtin_fmaxf(mt, x[e]);
    }
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
    // Two sums: l (fp32 p) for the lse, and ln (the bf16 p the PV MFMA uses) to normalise o, so o is an
    // exactly normalised average of V rows (normalising by l would scale o by a dominant token's
    // rounding error, up to 2^-9).
    l_run = l_run * alpha + ((pr[0] + pr[1]) + (pr[2] + pr[3]));
    ln_run = ln_run * alpha + ((mm::bf16_lo(pb[0]) + mm::bf16_hi(pb[0])) + (mm::bf16_lo(pb[1]) + mm::bf16_hi(pb[1])));
    if (__builtin_amdgcn_ballot_w64(upd) != 0) {
#pragma unroll
      for (int c = 0; c < 32; ++c) acc[c] *= alpha;
    }

    // O += P V: block c = 16h + 4w + cc covers output columns 256h + 16i + 4w + cc.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        mm::f32x2 f[4][2];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          f[e][0] = mm::cvt_pk_f32_fp8<false>(cur.v[e][h][w]);
          f[e][1] = mm::cvt_pk_f32_fp8<true>(cur.v[e][h][w]);
        }
#pragma unroll
        for (int cc = 0; cc < 4; ++cc) {
          const float v0 = f[0][cc >> 1][cc & 1], v1 = f[1][cc >> 1][cc & 1];
          const float v2 = f[2][cc >> 1][cc & 1], v3 = f[3][cc >> 1][cc & 1];
          const mm::u32x2 va = {mm::pack_bf16x2_hi(v0, v1), mm::pack_bf16x2_hi(v2, v3)};
          const int c = 16 * h + 4 * w + cc;
          acc[c] = mm::mfma_16x16x16_bf16(mm::bit_cast<mm::i16x4>(va), mm::bit_cast<mm::i16x4>(pb), acc[c]);
        }
      }
    }
  };

  // Software pipeline, unrolled by two so the tile buffers never move: while tile `it` computes,
  // tile it+1's KV and tile it+2's slots are in flight. Each slot load is issued before the KV loads
  // of the previous tile, so waiting for it never waits for KV that is not needed yet.
  KvRaw buf_a, buf_b;
  uint32_t slot_a = 0, slot_b = 0;
  if (nt > 0) {
    slot_a = load_slot(idx_buf, k0 + i);
    slot_b = load_slot(idx_buf, k0 + 16u + i);
  }
  load_q();
  // One round trip for Q and the first slots together. (Also: the compiler's wait tracking loses the
  // divergent Q loads at the loop head, so retire them here rather than at the first MFMA.)
  mm::wait_vmcnt<0>();
  if (nt > 0) load_kv(buf_a, pool_buf, slot_a, k0 + i, k1, g, i);
  for (uint32_t it = 0; it < nt; it += 2) {
    const uint32_t k = k0 + 16u * it;
    if (it + 1 < nt) {
      slot_a = load_slot(idx_buf, k + 32u + i);
      load_kv(buf_b, pool_buf, slot_b, k + 16u + i, k1, g, i);
    }
    compute(buf_a, it);
    if (it + 1 >= nt) break;
    if (it + 2 < nt) {
      slot_b = load_slot(idx_buf, k + 48u + i);
      load_kv(buf_a, pool_buf, slot_a, k + 32u + i, k1, g, i);
    }
    compute(buf_b, it + 1);
  }

  // ---- epilogue -------------------------------------------------------------------------------------
  float l_row = l_run + mm::xor_lane(l_run, 16);
  l_row += mm::xor_lane(l_row, 32);
  float ln_row = ln_run + mm::xor_lane(ln_run, 16);
  ln_row += mm::xor_lane(ln_row, 32);
  if (!live) return;
  // Lane (j, g), block 16h + c16, reg rr: column 256h + 64g + 16rr + c16.
  if (flags & kFlagPartial) {
    const uint32_t slot = unit * rows + r;  // unit-major: a request's parts need not be contiguous per row
    const mm::buffer_rsrc wo = mm::make_buffer(ws_o, B * rows * nparts * kLat * 4u);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int rr = 0; rr < 4; ++rr) {
        const uint32_t col = 256u * h + 64u * g + 16u * rr;
#pragma unroll
        for (int q4 = 0; q4 < 4; ++q4) {
          mm::u32x4 v;
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = mm::bit_cast<uint32_t>(acc[16 * h + 4 * q4 + e][rr]);
          mm::buffer_store_b128(v, wo, (slot * kLat + col + 4u * q4) * 4u);
        }
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
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int rr = 0; rr < 4; ++rr) {
        const uint32_t col = 256u * h + 64u * g + 16u * rr;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          mm::u32x4 v;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = 16 * h + 8 * half + 2 * e;
            v[e] = mm::pack_bf16x2<mm::Round::RTNE>(acc[c][rr] * inv, acc[c + 1][rr] * inv);
          }
          mm::buffer_store_b128(v, ob, (R * kLat + col + 8u * half) * 2u);
        }
      }
    }
    if ((flags & kFlagLse) && g == 0) {
      const float out = finish_lse(m_run, l_row);
      mm::buffer_store_f32(out, mm::make_buffer(lse, B * rows * 4u), R * 4u);
    }
  }
}
