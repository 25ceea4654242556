// bf16 MHA forward for gfx942 (MI300X): O = softmax(Q K^T / sqrt(D)) V, head dim D = 128 (64, 96), fp32 online
// softmax in the log2 domain, bf16 output rounded RTNA / RTNE / RTZ (one kernel per mode; P and O are
// rounded by the same rule; NaN output canonical 0x7FFF for RTNE/RTNA, RTZ truncates NaN like AITER's).
//
// Tiling. A workgroup of 8 waves (512 threads, two waves per SIMD) owns 256 q rows of one (batch, head).
// Wave w holds two 16-row q tiles (rows 32w .. 32w+31) for the whole kernel: Q as the B operand of QK
// (64 registers), O^T as 2 x 8 fp32 C fragments (64) and one (m, l) per tile. Two waves fit a SIMD's
// 512-register file only at <= 256 registers each (186-188 used, no scratch), so the CTA shares one copy
// of every K and V_t block through LDS instead of each wave fetching its own (as the 4-wave predecessor
// did): 32 KB of global traffic per 64-key block and CTA instead of 128 KB.
//
// Waves' roles. Waves w and w + 4 share SIMD w % 4. Group A (waves 0-3) and group B (4-7) run the same
// stage sequence QK(n), softmax(n), PV(n) cut at different barriers: in the interval between barriers i
// and i + 1, A runs PV(i-1) QK(i) softmax(i) and B runs softmax(i-1) PV(i-1) QK(i). So while one wave of
// a SIMD is in its MFMA phase (s_setprio 3: it issues whenever the matrix pipe is free) the other is in
// its VALU phase, and they swap mid-interval. Group B also issues all the DMA (A opens each interval
// with MFMAs). The softmax only decides O's rescale factor; PV applies it (in the VALU slots between
// the wave's own MFMAs), so every wave does the same work per block and no wave's rescale delays the
// barrier. Group B's softmax runs at priority 1, above group A's (kGroupBSoftmaxPriority). Group B leaves the
// last half of its QK(i)'s last K subtile (operands in registers) for after barrier i + 1, at priority 3: those
// MFMAs fill the matrix pipe while group A's first V_t reads are in flight, and A's first PV head-dim tile runs
// at 2 so they finish first. The d128 / d96 default kernels run a lean softmax (kLeanSoftmax): the cross-lane max in
// one LDS round trip, and group B's row sums added among its PV MFMAs instead of in its softmax, so B's softmax
// (which B's MFMA phase waits for) ends earlier and B's waves reach the barrier closer together.
// Modeled: the matrix pipe is busy ~96 % of the cycles (RTZ, Skv = 8192; RTNE 91 %).
//
// LDS (64 KB = two stages). Stage s: one K block (64 rows x 256 B at s * 16 KB; 16-byte chunk c of row r
// at chunk c ^ (r % 8), so the 8 lanes of a b128 read group hit 8 different bank groups) and one V_t
// block (16 KB at 32 KB + s * 16 KB, byte for byte as mha_v_transpose wrote it: chunk-major, lane-minor,
// conflict-free b128 reads). Interval i holds K(i) in stage i % 2 and V_t(i-1) in stage (i-1) % 2.
//
// Pipeline. Per interval: s_waitcnt vmcnt(0) (this wave's DMA landed) and s_barrier (everyone's; everyone
// is done with the stages about to be refilled), then group B issues K(i+1) into the other K stage and
// V_t(i) into the other V stage (the dense RTZ kernels: at the start of B's MFMA phase instead, after its
// softmax) by direct-to-LDS dword loads (16 K rows per wave: XOR-permuted lane
// offsets, the row offset in soffset, a descriptor based at the block; 4 KB of V_t per wave: one lane
// offset and one M0, the piece in the instruction offset, which moves both sides). The DMA has a whole
// interval to land. Every LDS read is issued one step before its MFMAs: QK reads K subtile t + 1 while
// subtile t's MFMAs run, PV reads head-dim tile dt + 1 while tile dt's run and, during its last tile,
// the first K subtile of the QK that follows. P is rounded to bf16 at the end of the softmax phase, in
// the lane that produced it (it is the B operand of PV as it stands).
//
// Bounds: every tensor is read through a raw buffer descriptor whose num_records is the exact byte
// extent of that (batch, head)'s rows; out-of-range loads give 0 and stores are dropped. BHSD and BSHD
// differ only in the row/head/batch strides passed in (no copies). Waves whose rows are all >= Sq still
// compute (they take part in the DMA and the barriers); their stores are dropped.
//
// Grid. Dense: 1-D over the work items (q block, batch*head) in head-first order, remapped so each XCD
// gets a contiguous range (one head's q blocks share an L2); the feature dense kernels read their item from
// the host's table (_C.dense_order: most kv blocks first across all heads, the swizzle without a window).
// Tail KV-split (host planner, _C): the last items of the head-first order run as G parts each
// (mha_fwd_split_*: part p takes kv blocks p, p+G, ...) writing fp32 partials (O unnormalised, m, l), folded
// by mha_merge_* in fp32 with the NaN-safe pack.
//
// Features (issue 17): mha_fwd_feat_* / mha_fwd_split_feat_* are attend<..., kFeat = true>: the soft-cap
// between QK and the tail mask (a runtime-uniform branch), the sink in the epilogue (part 0 of a split item
// only, so the merge is unchanged), the window / causal (a kv block range per item from the rows' windows;
// a per-row mask only on the blocks that cross a wave's row bounds), the fp8 descales (k_descale in the logit
// factor, v_descale on O). The default kernels are instantiated without them: same instructions. fp8 K/V
// (e4m3fnuz) reach these kernels as bf16: mha_kv_fp8_* widens K to bf16 rows and V to V_t exactly, in place of
// mha_v_transpose (K reaches LDS by direct-to-LDS DMA, which cannot convert, and every wave reads every K row,
// so the attention kernel cannot widen it once).
//
// Head dims: every kernel is instantiated per D (HeadDim<D>: 128 the default names, 64 and 96 with d64_ / d96_
// before the mode); the tiling, roles, LDS stages and pipeline above are the same, with D / 16 k-steps and
// head-dim tiles and K / V_t blocks of 64 rows x D (a d96 K row padded to 256 bytes in LDS for the swizzle).
//
// Code objects: this header holds the stages and the kernel macros; each .hip beside it instantiates one
// (head dim, family) so the build compiles them in parallel: mha_fwd (d128 default kernels, V transpose,
// fp8 K/V pass), mha_fwd_feat (d128 feature kernels), mha_fwd_d64 / mha_fwd_d96 and mha_fwd_feat_d64 /
// mha_fwd_feat_d96 likewise. A feature launch merges with its head dim's default mha_merge_*.
#pragma once
#include "gfx942/mha_stages.hpp"
#include "moonmath/convert.hpp"

namespace mha {

constexpr uint32_t kWaves = moonmath::mha::config::kWaves;
constexpr uint32_t kQTilesPerWave = moonmath::mha::config::kQTilesPerWave;
constexpr uint32_t kCtaRows = moonmath::mha::config::kCtaRows;
constexpr uint32_t kCtaThreads = moonmath::mha::config::kCtaThreads;
// Group B's softmax runs at priority 1, above group A's (0): when A's MFMA phase ends before B's softmax
// (a block where B's max moved: the cross-lane max and its exp2), the SIMD's VALU slots go to B, whose MFMA
// phase waits on it, not to A's softmax, which has all of B's MFMA phase to finish.
constexpr int kGroupBSoftmaxPriority = 1;  // (2 models the same: only the order against A matters)
static_assert(kCtaRows == kWaves * kQTilesPerWave * 16, "one 16-row q tile per wave and slot");

template <uint32_t V>
struct Flag {  // a compile-time count as a lambda argument
  static constexpr uint32_t value = V;
};

struct Strides {
  uint32_t row;    // bytes between consecutive sequence rows
  uint64_t head;   // bytes between heads
  uint64_t batch;  // bytes between batches
};

MM_DEVICE mm::buffer_rsrc head_buffer(const void* base, Strides st, uint32_t bh, uint32_t heads, uint32_t rows,
                                      uint32_t row_bytes = kRowBytes) {
  const uint32_t b = bh / heads, h = bh - b * heads;
  const char* p = (const char*)base + b * st.batch + h * st.head;
  return mm::make_buffer(p, (rows - 1u) * st.row + row_bytes);
}


// The features of the mha_fwd_feat_* kernels (issue 17), runtime-selected inside that variant only: the
// default kernels are instantiated without them (kFeat = false), so their code is unchanged.
struct Features {
  const float* sinks;  // fp32 [heads] natural-log sink logits, or null
  float scale_log2;    // the softmax's logit factor: kScaleLog2e, or cap * log2 e under a soft-cap
  float softcap_pre2;  // 2 * scale * log2 e / cap, or 0 (no soft-cap)
  int lo_shift = -moonmath::mha::config::kUnbounded;  // window / causal: row i sees keys i + lo_shift ..
  int hi_shift = moonmath::mha::config::kUnbounded;   // .. i + hi_shift (mha_config.hpp)
  // fp8 K/V (widened exactly to bf16 by mha_kv_fp8_*): fp32 [heads] descales, or null (= 1). k_descale folds
  // into the logit factor (into the soft-cap's pre-factor under a cap), v_descale multiplies O once.
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
  // The factors of head h: S = (q . k8) * (scale * k_descale[h]).
  MM_DEVICE void fold_k_descale(uint32_t h) {
    if (k_descale == nullptr) return;
    if (softcap_pre2 != 0.f) softcap_pre2 *= k_descale[h];
    else scale_log2 *= k_descale[h];
  }
};

// One work item: q block `qb` of head `bh`, kv blocks part, part + nparts, ... . kSplit: write the fp32
// partial (slot) instead of the normalised bf16 output. lds: kLdsBytes, the two stages. kFeat: apply `feat`
// (soft-cap between QK and the mask; the sink in the epilogue, carried by part 0 of a split item; the window:
// the item runs only the kv blocks of its rows' windows, part p of them p, p + nparts, ..., and a wave masks
// per row only the blocks that cross one of its 32 rows' bounds). D: the head dim (HeadDim<D>; 128 for the
// default kernels).
template <mm::Round R, bool kSplit, bool kFeat = false, uint32_t D = 128>
MM_DEVICE void attend(const uint16_t* q, const uint16_t* k, const uint16_t* vt, uint16_t* out, float* ws_o,
                      float* ws_ml, uint32_t sq, uint32_t skv, uint32_t heads, Strides qs, Strides ks, uint32_t qb,
                      uint32_t bh, uint32_t part, uint32_t nparts, uint32_t slot, uint8_t* lds,
                      Features feat = Features{nullptr, HeadDim<D>::kScaleLog2e, 0.f}) {
  typedef HeadDim<D> HD;
  const uint32_t wave = mm::wave_id();
  const bool group_b = wave >= kWaves / 2;  // waves 4..7: the second wave of each SIMD
  const uint32_t row0 = qb * kCtaRows + wave * (kQTilesPerWave * 16);
  const uint32_t nkb = (skv + kKvBlock - 1) / kKvBlock;
  const mm::buffer_rsrc qr = head_buffer(q, qs, bh, heads, sq, HD::kRowBytes);
  const uint32_t b = bh / heads, h = bh - b * heads;
  const char* k_head = (const char*)k + b * ks.batch + h * ks.head;
  const uint32_t k_bytes = (skv - 1u) * ks.row + HD::kRowBytes;
  const mm::buffer_rsrc vr =
      mm::make_buffer((const char*)vt + (uint64_t)bh * nkb * HD::kVtBlockBytes, nkb * HD::kVtBlockBytes);
  if constexpr (kFeat) feat.fold_k_descale(h);

  FragB qf[kQTilesPerWave][HD::kKSteps];
  FragC o[kQTilesPerWave][HD::kDTiles];
  GatedColSoftmax sm[kQTilesPerWave];
#pragma unroll
  for (uint32_t i = 0; i < kQTilesPerWave; ++i) {
    load_rows16_kpair(qf[i], qr, row0 + 16u * i, qs.row);
#pragma unroll
    for (uint32_t dt = 0; dt < HD::kDTiles; ++dt) o[i][dt] = mm::zeros<S16>();
  }

  // Block i of this item is kv block kb0 + part + i * nparts (kb0 = 0 but under a window); interval i
  // (between barriers i and i + 1) holds K(i) in K stage i % 2 and V_t(i - 1) in V stage (i - 1) % 2, while
  // the DMAs of K(i + 1) and V_t(i) fill the other stages. Group A runs PV(i-1) QK(i) softmax(i), group B
  // softmax(i-1) PV(i-1) QK(i): the same sequence cut at a different place, so a SIMD's two waves alternate
  // MFMA and VALU phases.
  uint32_t kb0 = 0, cnt = (nkb - part + nparts - 1) / nparts;  // block i is kv block kb0 + part + i * nparts
  if constexpr (kFeat) {  // the window's blocks (the tail planner gives every part at least one)
    const int first = (int)(qb * kCtaRows), end = first + (int)kCtaRows < (int)sq ? first + (int)kCtaRows : (int)sq;
    const moonmath::mha::config::KvRange kr =
        moonmath::mha::config::window_kv_blocks(first, end - 1, feat.lo_shift, feat.hi_shift, (int)skv);
    const uint32_t n = (uint32_t)(kr.end - kr.begin);
    kb0 = (uint32_t)kr.begin;
    cnt = n > part ? (n - part + nparts - 1) / nparts : 0u;
  }
  const uint32_t dma_wave = wave - kWaves / 2;  // group B copies the blocks: A's MFMA phase opens the interval
  if (group_b && (!kFeat || cnt != 0)) dma_k<D>(lds, k_head, k_bytes, kb0 + part, ks.row, 0, dma_wave);
  FragC s[kQTilesPerWave][kKvSub];  // S^T of the current block, then P (fp32)
  FragB p[kQTilesPerWave][kKvSub];  // P^T packed to bf16: the B operands of PV
  // The lean softmax (d128 and d96 default kernels; the others' budgets do not hold it: d64 spills at 128 registers,
  // the d96 feature kernels pass 176 VGPRs, the d128 feature kernels 80 SGPRs): the cross-lane max in one LDS round
  // trip (col_max_one_trip), and group B's row sums l += sum p added during its PV, in the VALU slots between its
  // own MFMAs, not in its softmax, which is on the interval's critical path (it must end before B's MFMA phase can
  // start). The same operations in the same order, so the same bits (section "Eighth session" of the docs).
  constexpr bool kLeanSoftmax = !kFeat && D != 64;
  constexpr bool kSumInPv = kLeanSoftmax;
  auto softmax = [&](uint32_t i, auto sum_here) {  // online softmax of block i, P packed for PV
    const uint32_t kb = kb0 + part + i * nparts;
    const bool partial_block = (kb + 1) * kKvBlock > skv;
    // feature kernels: does block kb hold a key outside the window of one of this wave's rows (or >= skv)?
    const int kv0 = (int)(kb * kKvBlock), wrow0 = (int)row0, wrow1 = wrow0 + 16 * (int)kQTilesPerWave - 1;
    const bool crosses = kv0 < wrow1 + feat.lo_shift || kv0 + (int)kKvBlock - 1 > wrow0 + feat.hi_shift ||
                         kv0 + (int)kKvBlock > (int)skv;
#pragma unroll
    for (uint32_t t = 0; t < kQTilesPerWave; ++t) {
      if constexpr (kFeat) {
        if (feat.softcap_pre2 != 0.f) softcap_scores(s[t], feat.softcap_pre2);
        if (crosses) mask_window(s[t], kv0, (int)(row0 + 16u * t), feat.lo_shift, feat.hi_shift, (int)skv);
      } else if (partial_block) {
        mask_kv_tail(s[t], kb * kKvBlock, skv);
      }
      constexpr bool kSum = decltype(sum_here)::value != 0;
      if constexpr (kFeat) sm[t].update<true, kSum, kLeanSoftmax>(s[t], i == 0, feat.scale_log2);
      else sm[t].update<false, kSum, kLeanSoftmax>(s[t], i == 0, HD::kScaleLog2e);
#pragma unroll
      for (uint32_t u = 0; u < kKvSub; ++u) p[t][u] = mm::as_b_operand(pack_p<R>(s[t][u]));
    }
  };
  FragA kf[2][HD::kKSteps];  // K operands of QK: two subtiles (the one in use, the next one being read)
  auto k_stage = [&](uint32_t i) { return lds + (i & 1u) * HD::kKBlockBytes; };
  // Group B leaves the last kTailSteps k-steps of each QK's last K subtile (their operands already read) to the
  // next interval: they fill the matrix pipe after the barrier while group A's first V_t reads are in flight,
  // and B's loop bookkeeping issues among its last MFMAs before the barrier (section "Session 7" of the docs).
  // (Not in the d96 feature kernels: their operands held across the barrier take them past their 176 registers.)
  constexpr uint32_t kTailSteps = kFeat && D == 96 ? 0 : HD::kKSteps / 2;
  typedef Flag<0> WholeQk;
  typedef Flag<kTailSteps> GroupBQk;
  auto qk_first = [&](auto tail) {  // the item's first QK: no PV before it to read K subtile 0 during
    mm::set_priority<3>();
    lds_load_k_subtile(kf[0], k_stage(0), 0);
    qk_lds<kQTilesPerWave, HD::kKSteps, decltype(tail)::value>(s, k_stage(0), qf, kf);
    mm::set_priority<0>();
  };
  // Group B's DMA of K(i + 1) and V_t(i), into the stages barrier i freed. Dense RTZ issues it in B's MFMA phase,
  // two instructions after each of PV's first 8 MFMAs, so B's softmax starts right after its deferred k-steps;
  // RTNA / RTNE (whose longer softmax leaves no slack for it there) and the split kernels issue it after the
  // barrier: both measured slower with the move (section "Session 7" of the docs).
  constexpr bool kDmaInMfmaPhase = R == mm::Round::RTZ && !kSplit;
  auto dma = [&](uint32_t i) {
    if (i + 1 < cnt) dma_k<D>(lds, k_head, k_bytes, kb0 + part + (i + 1) * nparts, ks.row, (i + 1) & 1u, dma_wave);
    if (i < cnt) dma_vt<D>(lds, vr, kb0 + part + i * nparts, i & 1u, dma_wave);
  };
  // PV(i - 1) with O's pending rescale, then QK(i) (K subtile 0 read during PV's last tile): one MFMA phase.
  // Group B's runs at priority 3 and stays there through the barrier into its deferred k-steps (no s_setprio
  // at its end, so the loop's scalar work shares a scheduling region with the last MFMAs). Group A's starts
  // at 2, below those deferred k-steps, so they finish before B's softmax needs them instead of interleaving
  // with A's whole phase, and goes to 3 at PV's second head-dim tile. After the last block (i == cnt) PV
  // only; its K read hits a stale stage, unused.
  auto pv_qk = [&](uint32_t i, auto tail) {
    float r[kQTilesPerWave];
#pragma unroll
    for (uint32_t t = 0; t < kQTilesPerWave; ++t) r[t] = sm[t].r;
    const uint8_t* vst = lds + HD::kLdsV + ((i - 1) & 1u) * HD::kVtBlockBytes;
    if (group_b) {
      mm::set_priority<3>();
      if constexpr (kDmaInMfmaPhase) {
        dma(i);
        spread_vmem_among_mfmas<8, 2>();
      }
      if constexpr (kSumInPv) {
        float acc[kQTilesPerWave];
        pv_lds(o, vst, p, k_stage(i), kf[0], r, [&](uint32_t dt) {
          if (dt >= kKvSub) return;
#pragma unroll
          for (uint32_t t = 0; t < kQTilesPerWave; ++t) {
            if (dt == 0) acc[t] = 0.f;
            GatedColSoftmax::add_subtile_sum(acc[t], s[t][dt]);
            if (dt + 1 == kKvSub) sm[t].add_block_sum(acc[t]);
          }
        });
      } else {
        pv_lds(o, vst, p, k_stage(i), kf[0], r);
      }
      if (i < cnt) qk_lds<kQTilesPerWave, HD::kKSteps, decltype(tail)::value>(s, k_stage(i), qf, kf);
      spread_salu_among_mfmas<8>();
    } else {
      mm::set_priority<2>();
      pv_lds<true>(o, vst, p, k_stage(i), kf[0], r);
      if (i < cnt) qk_lds<kQTilesPerWave, HD::kKSteps, decltype(tail)::value>(s, k_stage(i), qf, kf);
      mm::set_priority<0>();
    }
  };
  // Interval i: wait for K(i), V_t(i - 1); group B finishes QK(i - 1) and starts K(i + 1), V_t(i). Group B's
  // reads of its deferred operands must be done before the barrier lets the DMA refill their stage.
  auto refill = [&](uint32_t i) {
    if (group_b) mm::wait_lgkmcnt<0>();
    mm::wait_vmcnt<0>();  // this wave's DMAs have landed
    mm::block_sync();     // ... and every wave's; every wave is done with the stages refilled below
    if (group_b) {
      if (i > 0) {
        mm::set_priority<3>();
        qk_tail<kTailSteps>(s, qf, kf);
        mm::set_priority<0>();
      }
      if (!kDmaInMfmaPhase || i == 0) dma(i);
    }
  };
  // One loop per group (two separate loops, so that the register allocator sees two regions, not one
  // loop whose values must sit in the same registers on both paths). No block (an empty window): O = 0, m = -inf.
  if (kFeat && cnt == 0) {
  } else if (!group_b) {
    refill(0);
    qk_first(WholeQk{});
    softmax(0, Flag<1>{});
    for (uint32_t i = 1; i < cnt; ++i) {
      refill(i);
      pv_qk(i, WholeQk{});
      softmax(i, Flag<1>{});
    }
    refill(cnt);
    pv_qk(cnt, WholeQk{});
  } else {
    refill(0);
    qk_first(GroupBQk{});
    for (uint32_t i = 1; i < cnt; ++i) {
      refill(i);  // (with QK(i - 1)'s deferred k-steps)
      mm::set_priority<kGroupBSoftmaxPriority>();
      softmax(i - 1, Flag<!kSumInPv>{});
      pv_qk(i, GroupBQk{});
    }
    refill(cnt);
    mm::set_priority<kGroupBSoftmaxPriority>();
    softmax(cnt - 1, Flag<!kSumInPv>{});
    pv_qk(cnt, GroupBQk{});
  }

#pragma unroll
  for (uint32_t i = 0; i < kQTilesPerWave; ++i) {
    float lsum = sm[i].sum_l();
    const uint32_t r = row0 + 16u * i;
    if constexpr (kFeat) {
      if (feat.sinks != nullptr && part == 0) add_sink(o[i], sm[i].m, lsum, feat.sinks[h] * 1.4426950408889634f);
      if (feat.v_descale != nullptr) {
        const ColVec vd = {feat.v_descale[h]};
#pragma unroll
        for (uint32_t dt = 0; dt < HD::kDTiles; ++dt) mm::mul_cols(o[i][dt], vd);
      }
    }
    if constexpr (kSplit) {
      // Partial: O unnormalised (fp32) and the row's (m, l); rows of the CTA, not of the sequence.
      const uint32_t cta_row = r - qb * kCtaRows;
      store_o_partial(o[i], mm::make_buffer(ws_o + (uint64_t)slot * kCtaRows * D, kCtaRows * D * 4u), cta_row);
      if (quad_id() == 0) {
        const mm::buffer_rsrc wm = mm::make_buffer(ws_ml + (uint64_t)slot * kCtaRows * 2u, kCtaRows * 8u);
        mm::buffer_store_b64(mm::u32x2{__builtin_bit_cast(uint32_t, sm[i].m), __builtin_bit_cast(uint32_t, lsum)},
                             wm, (cta_row + col_id()) * 8u);
      }
    } else {
      store_o_tile<R>(o[i], lsum, head_buffer(out, qs, bh, heads, sq, HD::kRowBytes), r, qs.row);
    }
  }
}

// Merge of G fp32 partials of one q block: M = max m_p, w_p = exp2(m_p - M) (0 for a part that saw
// no finite max), out = sum w_p O_p / sum w_p l_p, packed like the unsplit output. 256 threads: 8 rows
// x 32 threads of 4 head-dim columns each (head dim 64: 16 rows x 16 threads; 96: 8 rows x 24 threads);
// kCtaRows / 8 (16) workgroups per q block.
template <mm::Round R, uint32_t D = 128>
MM_DEVICE void merge(const float* ws_o, const float* ws_ml, const int32_t* table, uint16_t* out, uint32_t sq,
                     uint32_t heads, Strides qs, uint32_t ngroups) {
  constexpr uint32_t kThreadsPerRow = D / 4, kRows = moonmath::mha::config::merge_rows_per_cta(D);
  static_assert(kRows * kThreadsPerRow <= 256 && kCtaRows % kRows == 0, "the host's merge grid");
  constexpr uint32_t kPerGroup = kCtaRows / kRows;
  const uint32_t g = mm::block_id_x() / kPerGroup;
  if (g >= ngroups) return;
  const uint32_t tid = mm::thread_id_x();
  if constexpr (kRows * kThreadsPerRow < 256) {
    if (tid >= kRows * kThreadsPerRow) return;
  }
  const uint32_t cta_row = (mm::block_id_x() % kPerGroup) * kRows + tid / kThreadsPerRow;
  const uint32_t col = (tid % kThreadsPerRow) * 4u;
  const mm::buffer_rsrc tr = mm::make_buffer(table, ngroups * 16u);
  const mm::u32x4 e = mm::buffer_load_b128(tr, g * 16u);
  const uint32_t qb = mm::uniform(e.x), bh = mm::uniform(e.y), slot0 = mm::uniform(e.z), parts = mm::uniform(e.w);
  const uint32_t row = qb * kCtaRows + cta_row;
  float big_m = -__builtin_inff();
  for (uint32_t p = 0; p < parts; ++p)
    big_m = __builtin_fmaxf(big_m, ws_ml[((uint64_t)(slot0 + p) * kCtaRows + cta_row) * 2u]);
  mm::f32x4 acc = {0.f, 0.f, 0.f, 0.f};
  float big_l = 0.f;
  for (uint32_t p = 0; p < parts; ++p) {
    const uint64_t base = (uint64_t)(slot0 + p) * kCtaRows + cta_row;
    const float mp = ws_ml[base * 2u], lp = ws_ml[base * 2u + 1u];
    const float w = mp == -__builtin_inff() ? 0.f : mm::exp2(mp - big_m);
    const mm::f32x4 op = *(const mm::f32x4*)(ws_o + base * D + col);
    big_l += w * lp;
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] += w * op[i];
  }
  if (row >= sq) return;
  const float inv = big_l == 0.f ? 0.f : mm::rcp(big_l);
  const mm::u32x2 w = {pack_o<R>(acc[0] * inv, acc[1] * inv), pack_o<R>(acc[2] * inv, acc[3] * inv)};
  mm::buffer_store_b64(w, head_buffer(out, qs, bh, heads, sq, D * 2u), row * qs.row + col * 2u);
}

}  // namespace mha

namespace mha {

// fp8 (e4m3fnuz, gfx942's native fp8) -> bf16, exact: every e4m3fnuz value (3 mantissa bits, 2^-10 .. 240)
// is a bf16 value, so the high half of v_cvt_pk_f32_fp8's f32 is it (the NaN 0x80 -> a bf16 NaN).
MM_DEVICE mm::u32x2 widen_fp8x4(uint32_t w) {
  const mm::f32x2 lo = mm::cvt_pk_f32_fp8<false>(w), hi = mm::cvt_pk_f32_fp8<true>(w);
  return mm::u32x2{mm::pack_bf16x2_hi(lo.x, lo.y), mm::pack_bf16x2_hi(hi.x, hi.y)};
}

// V [rows, D] of one (batch, head) -> V_t blocks (see mha_stages.hpp lds_load_vt_dtile), one 64-row block
// per workgroup: staged in LDS (`tile`, 64 x D bf16), then gathered per output lane. Rows >= Skv read as 0.
// kFp8: V is e4m3fnuz [rows, D] (vs in bytes), widened exactly on its way into the tile.
template <uint32_t D, bool kFp8 = false>
MM_DEVICE void v_transpose(uint16_t* tile, const void* v, uint16_t* vt, uint32_t skv, uint32_t heads, Strides vs) {
  typedef HeadDim<D> HD;
  constexpr uint32_t kChunks = D / 8;  // 16-byte pieces of a bf16 row; 1 KB chunks of a V_t block
  const uint32_t n = mm::block_id_x(), bh = mm::block_id_y(), tid = mm::thread_id_x();
  const uint32_t nkb = (skv + kKvBlock - 1) / kKvBlock;
  const mm::buffer_rsrc vr = head_buffer(v, vs, bh, heads, skv, kFp8 ? D : HD::kRowBytes);
  if constexpr (kFp8) {
#pragma unroll
    for (uint32_t i = 0; i < kKvBlock * kChunks / 512; ++i) {  // 16 fp8 per load, two 16-byte tile pieces
      const uint32_t idx = tid + 256u * i, row = idx / (kChunks / 2), c32 = idx % (kChunks / 2);
      const mm::u32x4 w = mm::buffer_load_b128(vr, (n * kKvBlock + row) * vs.row + c32 * 16u);
      const mm::u32x2 a = widen_fp8x4(w.x), b = widen_fp8x4(w.y), c = widen_fp8x4(w.z), d = widen_fp8x4(w.w);
      *(mm::u32x4*)&tile[row * D + c32 * 16u] = mm::u32x4{a.x, a.y, b.x, b.y};
      *(mm::u32x4*)&tile[row * D + c32 * 16u + 8u] = mm::u32x4{c.x, c.y, d.x, d.y};
    }
  } else {
#pragma unroll
    for (uint32_t i = 0; i < kKvBlock * kChunks / 256; ++i) {
      const uint32_t idx = tid + 256u * i, row = idx / kChunks, c16 = idx % kChunks;
      *(mm::u32x4*)&tile[row * D + c16 * 8u] = mm::buffer_load_b128(vr, (n * kKvBlock + row) * vs.row + c16 * 16u);
    }
  }
  mm::block_sync();
  const mm::buffer_rsrc out = mm::make_buffer(vt + (uint64_t)bh * nkb * (HD::kVtBlockBytes / 2), nkb * HD::kVtBlockBytes);
#pragma unroll
  for (uint32_t i = 0; i < kChunks * 64 / 256; ++i) {
    const uint32_t idx = tid + 256u * i, c = idx / 64u, lane = idx % 64u;
    const uint32_t dt = c / 2u, pair = c % 2u, quad = lane / 16u, col = lane % 16u;
    uint32_t w[4];
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h)
#pragma unroll
      for (uint32_t e = 0; e < 4; e += 2) {
        const uint32_t kv = 16u * (2u * pair + h) + 4u * quad + e, hd = 16u * dt + col;
        w[2 * h + e / 2] = (uint32_t)tile[kv * D + hd] | ((uint32_t)tile[(kv + 1) * D + hd] << 16);
      }
    mm::buffer_store_b128(mm::u32x4{w[0], w[1], w[2], w[3]}, out, n * HD::kVtBlockBytes + c * 1024u + lane * 16u);
  }
}

// fp8 K of one (batch, head) and 64-row block -> bf16 rows of `kw` ([batch * heads][skv][D], contiguous), exact
// (the attention kernels then read it as a bf16 K): 8 fp8 per thread and step. Rows >= Skv are not written.
template <uint32_t D>
MM_DEVICE void k_widen(const void* k, uint16_t* kw, uint32_t skv, uint32_t heads, Strides ks) {
  const uint32_t n = mm::block_id_x(), bh = mm::block_id_y(), tid = mm::thread_id_x();
  const mm::buffer_rsrc kr = head_buffer(k, ks, bh, heads, skv, D);
  const mm::buffer_rsrc out = mm::make_buffer(kw + (uint64_t)bh * skv * D, skv * D * 2u);
#pragma unroll
  for (uint32_t i = 0; i < kKvBlock * D / 8 / 256; ++i) {
    const uint32_t idx = tid + 256u * i, row = n * kKvBlock + idx / (D / 8), c8 = idx % (D / 8);
    const mm::u32x2 w = mm::buffer_load_b64(kr, row * ks.row + c8 * 8u);
    const mm::u32x2 a = widen_fp8x4(w.x), b = widen_fp8x4(w.y);
    mm::buffer_store_b128(mm::u32x4{a.x, a.y, b.x, b.y}, out, (row * D + c8 * 8u) * 2u);
  }
}

}  // namespace mha

#define MHA_V_TRANSPOSE(name, D)                                                                                       \
  MM_KERNEL MM_LAUNCH_BOUNDS(256) void name(const uint16_t* v, uint16_t* vt, uint32_t skv, uint32_t heads,             \
                                            uint32_t row_stride, uint64_t head_stride, uint64_t batch_stride) {        \
    MM_LDS uint16_t tile[mha::kKvBlock * D];                                                                           \
    mha::v_transpose<D>(tile, v, vt, skv, heads, mha::Strides{row_stride, head_stride, batch_stride});                 \
  }

// fp8 K/V (e4m3fnuz): one pass per (64-row block, batch * head) widens K to bf16 rows and V to bf16 V_t, both
// exact; the feature kernels then run on them with the descales (Features::k_descale, v_descale).
#define MHA_KV_FP8(name, D)                                                                                            \
  MM_KERNEL MM_LAUNCH_BOUNDS(256) void name(const uint8_t* k, const uint8_t* v, uint16_t* kw, uint16_t* vt,            \
                                            uint32_t skv, uint32_t heads, uint32_t row_stride, uint64_t head_stride,   \
                                            uint64_t batch_stride) {                                                   \
    MM_LDS uint16_t tile[mha::kKvBlock * D];                                                                           \
    const mha::Strides st{row_stride, head_stride, batch_stride};                                                      \
    mha::k_widen<D>(k, kw, skv, heads, st);                                                                            \
    mha::v_transpose<D, true>(tile, v, vt, skv, heads, st);                                                            \
  }

// Head dim 64 fits two workgroups per CU (32 KB of LDS each) when a wave holds <= 128 registers: ask the
// compiler for four waves per SIMD there (the default kernels; the feature kernels: below). Other head dims: none.
#define MHA_OCCUPANCY_64 __attribute__((amdgpu_waves_per_eu(4)))
#define MHA_OCCUPANCY_96
#define MHA_OCCUPANCY_128
// The feature kernels: the window stage and the fp8 descales take the d64 ones past 128 registers (32-40 bytes
// of scratch under waves_per_eu(4)), so they run one workgroup per CU, like d96 and d128.
#define MHA_FEAT_OCCUPANCY_64
#define MHA_FEAT_OCCUPANCY_96
#define MHA_FEAT_OCCUPANCY_128

#define MHA_KERNELS(mode, R, D)                                                                                        \
  MM_KERNEL MM_LAUNCH_BOUNDS(mha::kCtaThreads) MHA_OCCUPANCY_##D void mha_fwd_##mode(                             \
      const uint16_t* q, const uint16_t* k, const uint16_t* vt, uint16_t* out, uint32_t sq, uint32_t skv,              \
      uint32_t heads, uint32_t nqb, uint32_t n_work, uint32_t q_row, uint64_t q_head, uint64_t q_batch,                \
      uint32_t k_row, uint64_t k_head, uint64_t k_batch) {                                                             \
    MM_LDS uint8_t lds[mha::HeadDim<D>::kLdsBytes];                                                                    \
    const uint32_t w = mha::xcd_contiguous(mm::block_id_x(), n_work);                                                  \
    mha::attend<R, false, false, D>(q, k, vt, out, nullptr, nullptr, sq, skv, heads,                                   \
                                    mha::Strides{q_row, q_head, q_batch},                                              \
                          mha::Strides{k_row, k_head, k_batch}, w % nqb, w / nqb, 0u, 1u, 0u, lds);                    \
  }                                                                                                                    \
  MM_KERNEL MM_LAUNCH_BOUNDS(mha::kCtaThreads) MHA_OCCUPANCY_##D void mha_fwd_split_##mode(                       \
      const uint16_t* q, const uint16_t* k, const uint16_t* vt, float* ws_o, float* ws_ml, const int32_t* sched,       \
      uint32_t n_slots, uint32_t sq, uint32_t skv, uint32_t heads, uint32_t q_row, uint64_t q_head,                    \
      uint64_t q_batch, uint32_t k_row, uint64_t k_head, uint64_t k_batch) {                                           \
    MM_LDS uint8_t lds[mha::HeadDim<D>::kLdsBytes];                                                                    \
    const uint32_t slot = mm::block_id_x();                                                                            \
    const mm::u32x4 e = mm::buffer_load_b128(mm::make_buffer(sched, n_slots * 16u), slot * 16u);                       \
    mha::attend<R, true, false, D>(q, k, vt, nullptr, ws_o, ws_ml, sq, skv, heads,                                     \
                                   mha::Strides{q_row, q_head, q_batch},                                               \
                         mha::Strides{k_row, k_head, k_batch}, mm::uniform(e.x), mm::uniform(e.y), mm::uniform(e.z),   \
                         mm::uniform(e.w), slot, lds);                                                                 \
  }                                                                                                                    \
  MM_KERNEL MM_LAUNCH_BOUNDS(256) void mha_merge_##mode(const float* ws_o, const float* ws_ml, const int32_t* table,   \
                                                        uint16_t* out, uint32_t sq, uint32_t heads, uint32_t q_row,    \
                                                        uint64_t q_head, uint64_t q_batch, uint32_t ngroups) {         \
    mha::merge<R, D>(ws_o, ws_ml, table, out, sq, heads, mha::Strides{q_row, q_head, q_batch}, ngroups);               \
  }

// The feature variants (sinks, soft-cap, window / causal, fp8 descales): the dense and split kernels with seven
// more arguments.
#define MHA_FEAT_KERNELS(mode, R, D)                                                                                   \
  MM_KERNEL MM_LAUNCH_BOUNDS(mha::kCtaThreads) MHA_FEAT_OCCUPANCY_##D void mha_fwd_feat_##mode(                        \
      const uint16_t* q, const uint16_t* k, const uint16_t* vt, uint16_t* out, uint32_t sq, uint32_t skv,              \
      uint32_t heads, uint32_t nqb, uint32_t n_work, uint32_t q_row, uint64_t q_head, uint64_t q_batch,                \
      uint32_t k_row, uint64_t k_head, uint64_t k_batch, const float* sinks, float scale_log2, float softcap_pre2,     \
      int lo_shift, int hi_shift, const float* k_descale, const float* v_descale, const int32_t* order) {              \
    MM_LDS uint8_t lds[mha::HeadDim<D>::kLdsBytes];                                                                    \
    /* the item of this workgroup: the host's dense_order, the most kv blocks first across all heads */                \
    const uint32_t w = mm::uniform(                                                                                    \
        mm::buffer_load_b32(mm::make_buffer(order, n_work * 4u), mm::block_id_x() * 4u));                              \
    mha::attend<R, false, true, D>(q, k, vt, out, nullptr, nullptr, sq, skv, heads,                                    \
                                   mha::Strides{q_row, q_head, q_batch},                                               \
                                mha::Strides{k_row, k_head, k_batch}, w % nqb, w / nqb, 0u, 1u, 0u, lds,               \
                                mha::Features{sinks, scale_log2, softcap_pre2, lo_shift, hi_shift, k_descale,          \
                                              v_descale});                                                             \
  }                                                                                                                    \
  MM_KERNEL MM_LAUNCH_BOUNDS(mha::kCtaThreads) MHA_FEAT_OCCUPANCY_##D void mha_fwd_split_feat_##mode(                  \
      const uint16_t* q, const uint16_t* k, const uint16_t* vt, float* ws_o, float* ws_ml, const int32_t* sched,       \
      uint32_t n_slots, uint32_t sq, uint32_t skv, uint32_t heads, uint32_t q_row, uint64_t q_head,                    \
      uint64_t q_batch, uint32_t k_row, uint64_t k_head, uint64_t k_batch, const float* sinks, float scale_log2,       \
      float softcap_pre2, int lo_shift, int hi_shift, const float* k_descale, const float* v_descale) {                \
    MM_LDS uint8_t lds[mha::HeadDim<D>::kLdsBytes];                                                                    \
    const uint32_t slot = mm::block_id_x();                                                                            \
    const mm::u32x4 e = mm::buffer_load_b128(mm::make_buffer(sched, n_slots * 16u), slot * 16u);                       \
    mha::attend<R, true, true, D>(q, k, vt, nullptr, ws_o, ws_ml, sq, skv, heads,                                      \
                                  mha::Strides{q_row, q_head, q_batch},                                                \
                               mha::Strides{k_row, k_head, k_batch}, mm::uniform(e.x), mm::uniform(e.y),               \
                               mm::uniform(e.z), mm::uniform(e.w), slot, lds,                                          \
                               mha::Features{sinks, scale_log2, softcap_pre2, lo_shift, hi_shift, k_descale,           \
                                             v_descale});                                                              \
  }
