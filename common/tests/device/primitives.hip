// Device-side tests of the moonmath primitives: each kernel exercises one header on real hardware
// semantics (here: in moonmath-emu) and writes what it saw; common/tests/test_device_primitives.py
// checks the results against torch.
#include "moonmath/all.hpp"

using namespace mm;

// numerics.hpp: bf16 rounding in the three modes, fp8/E2M1/E8M0 decode of every byte pattern.
MM_KERNEL void t_bf16_round(const float* in, uint16_t* rtne, uint16_t* rtna, uint16_t* rtz, int n) {
  uint32_t i = block_id_x() * block_dim_x() + thread_id_x();
  if (i >= (uint32_t)n) return;
  rtne[i] = f32_to_bf16<Round::RTNE>(in[i]);
  rtna[i] = f32_to_bf16<Round::RTNA>(in[i]);
  rtz[i] = f32_to_bf16<Round::RTZ>(in[i]);
}

MM_KERNEL void t_pack_bf16x2(const float* in, uint32_t* out, int n_pairs) {
  uint32_t i = block_id_x() * block_dim_x() + thread_id_x();
  if (i >= (uint32_t)n_pairs) return;
  out[i] = pack_bf16x2<Round::RTNE>(in[2 * i], in[2 * i + 1]);
}

MM_KERNEL void t_decode(float* fnuz, float* fn, float* e2m1, float* e8m0) {
  uint32_t b = thread_id_x() + 64 * block_id_x();  // 256 threads over 4 blocks: every byte
  fnuz[b] = fp8_e4m3fnuz_to_f32(b);
  fn[b] = fp8_e4m3fn_to_f32(b);
  e2m1[b] = e2m1_to_f32(b & 0xF);
  e8m0[b] = e8m0_to_f32(b);
}

// convert.hpp: hardware fp8 -> f32 (the arch's native fp8) and the v_perm bf16 packs.
MM_KERNEL void t_convert(const uint32_t* words, float* f, uint32_t* hi_pack, uint32_t* rna_pack, const float* x) {
  uint32_t t = thread_id_x() + 64 * block_id_x();  // 64 dwords = all 256 bytes
  uint32_t w = words[t];
  f32x2 lo = cvt_pk_f32_fp8<false>(w), hi = cvt_pk_f32_fp8<true>(w);
  f[4 * t + 0] = lo[0];
  f[4 * t + 1] = lo[1];
  f[4 * t + 2] = hi[0];
  f[4 * t + 3] = hi[1];
  hi_pack[t] = pack_bf16x2_hi(x[2 * t], x[2 * t + 1]);
  rna_pack[t] = pack_bf16x2_rna(x[2 * t], x[2 * t + 1]);
}

// buffer.hpp: raw buffer range rules (OOB loads give 0, OOB stores dropped) and direct-to-LDS.
MM_KERNEL void t_buffer(const uint32_t* src, int src_bytes, uint32_t* dst, int dst_bytes, uint32_t* lds_out) {
  MM_LDS uint32_t stage[64];
  uint32_t lane = thread_id_x();
  buffer_rsrc s = make_buffer(src, (uint32_t)src_bytes);
  buffer_rsrc d = make_buffer(dst, (uint32_t)dst_bytes);
  uint32_t v = buffer_load_b32(s, lane * 4);            // lanes past src_bytes read 0
  buffer_store_b32(v + 1000, d, lane * 4);              // lanes past dst_bytes are dropped
  buffer_load_to_lds<4>(s, stage, lane * 4);            // stage[lane] = src[lane] or 0
  wait_vmcnt<0>();
  block_sync();
  lds_out[lane] = stage[lane];
}

// buffer_load_to_lds_at: the instruction offset moves the global and the LDS side together; soffset
// moves the global side only. Pieces 0..2 of 256 bytes, piece 1 also shifted by soff on the source.
MM_KERNEL void t_buffer_to_lds_at(const uint32_t* src, int src_bytes, uint32_t soff, uint32_t* lds_out) {
  MM_LDS uint32_t stage[192];
  uint32_t lane = thread_id_x();
  buffer_rsrc s = make_buffer(src, (uint32_t)src_bytes);
  buffer_load_to_lds_at<4, 0>(s, stage, lane * 4);
  buffer_load_to_lds_at<4, 256>(s, stage, lane * 4, soff);
  buffer_load_to_lds_at<4, 512>(s, stage, lane * 4);
  wait_vmcnt<0>();
  block_sync();
  for (uint32_t i = 0; i < 3; ++i) lds_out[64 * i + lane] = stage[64 * i + lane];
}

MM_KERNEL void t_buffer_wide(const uint32_t* src, uint32_t* dst, int n_bytes) {
  uint32_t lane = thread_id_x();
  buffer_rsrc s = make_buffer(src, (uint32_t)n_bytes);
  buffer_rsrc d = make_buffer(dst, (uint32_t)n_bytes);
  u32x4 q = buffer_load_b128(s, lane * 16);
  u32x2 p = buffer_load_b64(s, lane * 8);
  buffer_store_b128(q, d, lane * 16);
  buffer_store_b64(p + 7u, d, n_bytes / 2 + lane * 8);
}

// xlane.hpp: swizzle, bpermute, DPP, butterfly reductions.
MM_KERNEL void t_xlane(const float* in, uint32_t* sw, uint32_t* bp, uint32_t* dpp, float* wmax, float* wsum) {
  uint32_t lane = thread_id_x();
  uint32_t v = lane * 3 + 1;
  sw[lane] = swizzle_xor<1>(v) | (swizzle_xor<16>(v) << 16);
  bp[lane] = bpermute(v, (lane * 7 + 5) & 63);
  dpp[lane] = dpp_mov<kDppRowShr1>(v);
  float f = in[lane];
  wmax[lane] = wave_max(f);
  wsum[lane] = wave_sum(f);
}

// xlane.hpp: the DPP + readlane reductions against the ds_bpermute butterflies (bit for bit: out[0..3] = uniform
// sum, butterfly sum at lane 0, uniform max, butterfly max at lane 0).
MM_KERNEL void t_wave_reduce_uniform(const float* in, float* out) {
  uint32_t lane = thread_id_x();
  float f = in[lane];
  const float su = wave_sum_uniform(f), sb = wave_sum(f), mu = wave_max_uniform(f), mb = wave_max(f);
  if (lane == 0) {
    out[0] = su;
    out[1] = sb;
    out[2] = mu;
    out[3] = mb;
  }
}

// mfma.hpp: one 16x16 output tile D = A * B + C with the documented lane layouts.
MM_KERNEL void t_mfma16(const uint16_t* a, const uint16_t* b, const float* c, float* d) {
  // a: [16][K] row-major bf16, b: [K][16] row-major bf16, c/d: [16][16] fp32; K = 16 (gfx942 form).
  uint32_t lane = thread_id_x();
  uint32_t col = lane & 15, quad = lane >> 4;
  i16x4 av, bv;
  for (int e = 0; e < 4; ++e) {
    av[e] = (short)a[col * 16 + quad * 4 + e];     // A[i=col][k=4*quad+e]
    bv[e] = (short)b[(quad * 4 + e) * 16 + col];   // B[k=4*quad+e][j=col]
  }
  f32x4 acc;
  for (int r = 0; r < 4; ++r) acc[r] = c[(quad * 4 + r) * 16 + col];  // D[i=4*quad+r][j=col]
  acc = mfma_16x16x16_bf16(av, bv, acc);
  for (int r = 0; r < 4; ++r) d[(quad * 4 + r) * 16 + col] = acc[r];
}

#if defined(__gfx950__)
MM_KERNEL void t_mfma16x32(const uint16_t* a, const uint16_t* b, const float* c, float* d) {
  // K = 32: lane group quad holds k = 8*quad + 0..7.
  uint32_t lane = thread_id_x();
  uint32_t col = lane & 15, quad = lane >> 4;
  bf16x8 av, bv;
  for (int e = 0; e < 8; ++e) {
    av[e] = __builtin_bit_cast(__bf16, a[col * 32 + quad * 8 + e]);
    bv[e] = __builtin_bit_cast(__bf16, b[(quad * 8 + e) * 16 + col]);
  }
  f32x4 acc;
  for (int r = 0; r < 4; ++r) acc[r] = c[(quad * 4 + r) * 16 + col];
  acc = mfma_16x16x32_bf16(av, bv, acc);
  for (int r = 0; r < 4; ++r) d[(quad * 4 + r) * 16 + col] = acc[r];
}
#endif

// softmax.hpp: online softmax over blocks and the LSE merge, one row per lane.
MM_KERNEL void t_softmax(const float* s, int n_blocks, int block_len, float* lse_online, const float* lses,
                         int n_lses, float* lse_merged) {
  uint32_t lane = thread_id_x();
  OnlineSoftmax sm;
  for (int blk = 0; blk < n_blocks; ++blk) {
    float bmax = -__builtin_inff();
    for (int j = 0; j < block_len; ++j) bmax = __builtin_fmaxf(bmax, s[(lane * n_blocks + blk) * block_len + j]);
    sm.update_max(bmax);
    for (int j = 0; j < block_len; ++j) sm.l += exp2(s[(lane * n_blocks + blk) * block_len + j] - sm.m);
  }
  lse_online[lane] = sm.lse();
  LseMerge mg;
  for (int r = 0; r < n_lses; ++r) mg.see(lses[lane * n_lses + r]);
  for (int r = 0; r < n_lses; ++r) mg.add(mg.weight(lses[lane * n_lses + r]));
  lse_merged[lane] = mg.lse();
}

// prelude.hpp + sync.hpp: ids, sizes from the hidden arguments, LDS exchange across waves.
MM_KERNEL void t_ids(uint32_t* out) {
  uint32_t flat = (block_id_y() * grid_dim_x() + block_id_x()) * block_dim_x() + thread_id_x();
  out[flat * 4 + 0] = thread_id_x();
  out[flat * 4 + 1] = block_dim_x() | (block_dim_y() << 16);
  out[flat * 4 + 2] = grid_dim_x();
  out[flat * 4 + 3] = lane_id() | (wave_id() << 8);
}

MM_KERNEL MM_LAUNCH_BOUNDS(256) void t_block_sync(uint32_t* out) {
  MM_LDS uint32_t slots[256];
  uint32_t t = thread_id_x();
  slots[t] = t * t;
  block_sync();
  out[t] = slots[255 - t];  // written by another wave
}

// convert.hpp perm: v_perm_b32 byte selection (0..3 lo, 4..7 hi, 0x0C zero) with per-lane selectors.
MM_KERNEL void t_perm(const uint32_t* hi, const uint32_t* lo, const uint32_t* sel, uint32_t* out) {
  uint32_t t = thread_id_x();
  out[t] = perm(hi[t], lo[t], sel[t]);
}

// convert.hpp: two f32 -> one dword of two fp16 (RTNE), the high word written in place.
MM_KERNEL void t_pack_f16x2(const float* in, uint32_t* out, int n_pairs) {
  uint32_t i = block_id_x() * block_dim_x() + thread_id_x();
  if (i >= (uint32_t)n_pairs) return;
  out[i] = pack_f16x2(in[2 * i], in[2 * i + 1]);
}
