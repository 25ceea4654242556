// Paged K/V partitioner of the gfx950 attention forward (issue 13): the same pipeline
// (attention_fwd.hpp), a different answer to "where do the keys of block key0 live".
//
// Caches are [pages, page_size, kv_heads, D] with page_size = 2^page_shift >= 8. A work item's
// sequence reads its pages from a page list on the device: entries pages[k_tok0 ..] (for paged items
// k_tok0 is the sequence's first page-list entry: kv_indptr[b], or b * block_table.stride(0)). Key j
// of the sequence is row (j & (page_size - 1)) of page pages[k_tok0 + (j >> page_shift)].
//
// Addressing. One raw buffer resource spans the whole cache (from the kv head's first element; the
// host bounds the span below 2^32 - 64 bytes); every DMA lane computes its row's offset from its
// page index. A lane whose key is past k_len, or whose page index points outside the cache (a
// device-resident list the host could not check), gets offset = the resource's size: the load returns
// 0, as the dense partitioner's clipped resource does, so paged and varlen runs fill LDS with the same
// bytes and give the same bits. Page indices are fetched for all of a block's K and V rows first,
// then the DMAs are issued (one wait for the small loads, not one per DMA).
#pragma once
#include "attention_fwd.hpp"

namespace attn950 {

// The kernel arguments the paged partitioner adds to the dense ones.
struct PagedKv {
  const int32_t* pages;     // page list (kv_page_indices or the block table)
  uint32_t k_bytes;         // bytes of k_cache from its first element (span of the whole cache)
  uint32_t v_bytes;
  int32_t page_shift;       // log2(page_size)
};

// A wave-uniform pointer, said so (readfirstlane of both halves): the caches' resources then stay in SGPRs. Without
// it the compiler kept them in VGPRs and wrapped every DMA in a readfirstlane loop.
template <class T>
MM_DEVICE const T* uniform_ptr(const T* p) {
  const uint64_t x = reinterpret_cast<uint64_t>(p);
  return reinterpret_cast<const T*>(((uint64_t)mm::uniform((uint32_t)(x >> 32)) << 32) | mm::uniform((uint32_t)x));
}

template <class Shape>
struct PagedTile : DenseTile<Shape> {
  using Base = DenseTile<Shape>;
  mm::buffer_rsrc k_cache, v_cache, page_list;
  uint32_t k_span, v_span;   // the resources' sizes: the "load 0" offset
  // Page and token strides (elements) in 32 bits: a cache spans < 2^32 bytes (host-checked), so they fit, and
  // the loop keeps 4 SGPRs fewer than the plan's 64-bit fields.
  uint32_t k_page, k_tok, v_page, v_tok;
  int32_t shift;

  MM_DEVICE PagedTile(const AttnFwdArgs& a_, const AttnWorkItem& it_, int32_t h_, const uint16_t* k,
                      const uint16_t* v, const PagedKv& pk)
      : Base(a_, it_, h_, k, v), k_page((uint32_t)a_.k_batch), k_tok((uint32_t)a_.k_token),
        v_page((uint32_t)a_.v_batch), v_tok((uint32_t)a_.v_token), shift(pk.page_shift) {
    // k_batch / v_batch carry the page strides of paged plans (elements: bf16, or bytes for fp8 K/V).
    typedef typename Shape::KvT KvT;
    const int64_t hk_k = (int64_t)this->hk * a_.k_head, hk_v = (int64_t)this->hk * a_.v_head;
    k_span = mm::uniform(pk.k_bytes - (uint32_t)(hk_k * Shape::kKvBytes));
    v_span = mm::uniform(pk.v_bytes - (uint32_t)(hk_v * Shape::kKvBytes));
    k_cache = mm::make_buffer(uniform_ptr(reinterpret_cast<const KvT*>(k) + hk_k), k_span);
    v_cache = mm::make_buffer(uniform_ptr(reinterpret_cast<const KvT*>(v) + hk_v), v_span);
    const int32_t n_pages = it_.k_len > 0 ? ((it_.k_len - 1) >> shift) + 1 : 0;
    page_list = mm::make_buffer(pk.pages + it_.k_tok0, (uint32_t)n_pages * 4u);
  }
  // Byte offset of key `key` (row of a page) at element offset 0 of the row; span when not loadable.
  MM_DEVICE uint32_t row_offset(int32_t key, int32_t page, uint32_t page_stride, uint32_t token_stride,
                                uint32_t span, int32_t row_bytes) const {
    const int64_t off =
        ((int64_t)page * page_stride + (int64_t)(key & ((1 << shift) - 1)) * token_stride) * Shape::kKvBytes;
    const bool ok = key < this->it.k_len && page >= 0 && off + row_bytes <= (int64_t)span;
    return ok ? (uint32_t)off : span;
  }
};

// The paged counterpart of dma_rows: the same LDS positions, row permutation and partial last round (DmaRows),
// rows addressed through pages; chunks past the source row (Dv 80's pad) read at the span: zeros.
template <class Layout, int SrcBytes = Layout::kRowBytes>
struct PagedRows {
  using D = DmaRows<Layout, SrcBytes>;
  int32_t page[D::kLoads];
  MM_DEVICE void fetch_pages(const mm::buffer_rsrc& list, int32_t key0, int32_t shift, uint32_t wave, uint32_t lane) {
#pragma unroll
    for (int i = 0; i < D::kLoads; ++i)
      if (D::issued(wave, i))
        page[i] = (int32_t)mm::buffer_load_b32(list, (uint32_t)((key0 + (int32_t)D::row_of(wave, i, lane)) >> shift) * 4u);
  }
  template <class Tile>
  MM_DEVICE void dma(const Tile& t, mm::buffer_rsrc cache, uint32_t span, uint32_t page_stride, uint32_t token_stride,
                     int32_t key0, lds_u8* dst, uint32_t wave, uint32_t lane) const {
#pragma unroll
    for (int i = 0; i < D::kLoads; ++i) {
      if (!D::issued(wave, i)) continue;
      const uint32_t row = D::row_of(wave, i, lane), byte = D::byte_of(wave, i, lane);
      const uint32_t off = t.row_offset(key0 + (int32_t)row, page[i], page_stride, token_stride, span, SrcBytes);
      // A not-loadable row keeps offset = span for all its chunks (out of range: 0).
      bool load = off != span;
      if constexpr (D::kSrcBytes < (uint32_t)Layout::kRowBytes) load = load && byte < D::kSrcBytes;
      mm::buffer_load_to_lds<16>(cache, (void*)(dst + D::base(wave, i) * 16u), load ? off + byte : span);
    }
  }
};

// Chosen over the generic dma_k / dma_v of attention_fwd.hpp for paged tiles (more specialised overloads).
template <class Shape>
MM_DEVICE void dma_k(const PagedTile<Shape>& tile, int32_t key0, lds_u8* buf, uint32_t wave, uint32_t lane) {
  PagedRows<typename Shape::KLayout> kr;
  kr.fetch_pages(tile.page_list, key0, tile.shift, wave, lane);
  kr.dma(tile, tile.k_cache, tile.k_span, tile.k_page, tile.k_tok, key0, buf, wave, lane);
}
template <class Shape>
MM_DEVICE void dma_v(const PagedTile<Shape>& tile, int32_t key0, lds_u8* buf, uint32_t wave, uint32_t lane) {
  PagedRows<typename Shape::VLayout, Shape::Dv * 2> vr;
  vr.fetch_pages(tile.page_list, key0, tile.shift, wave, lane);
  vr.dma(tile, tile.v_cache, tile.v_span, tile.v_page, tile.v_tok, key0, buf, wave, lane);
}

// fp8 K/V through pages: Fp8Rows' lanes, each row's offset from its page (the page indices of all the block's
// loads fetched first), a not-loadable row read at the span (zeros); land() is the dense one.
template <class Rows, class Tile>
MM_DEVICE void paged_load_fp8(const Tile& t, Rows& r, mm::buffer_rsrc cache, uint32_t span, uint32_t page_stride,
                              uint32_t token_stride, int32_t key0, uint32_t wave, uint32_t lane) {
  int32_t page[Rows::kLoads];
#pragma unroll
  for (int i = 0; i < Rows::kLoads; ++i)
    if (Rows::issued(wave, i))
      page[i] = (int32_t)mm::buffer_load_b32(t.page_list, (uint32_t)((key0 + (int32_t)Rows::row_of(wave, i, lane)) >> t.shift) * 4u);
#pragma unroll
  for (int i = 0; i < Rows::kLoads; ++i) {
    if (!Rows::issued(wave, i)) continue;
    const uint32_t row = Rows::row_of(wave, i, lane), c = Rows::piece_of(wave, i, lane);
    const uint32_t off = t.row_offset(key0 + (int32_t)row, page[i], page_stride, token_stride, span, Rows::kPieces * 16);
    r.put(i, cache, off == span ? span : off + c * 16u, wave);
  }
}
template <class Shape>
MM_DEVICE void load_k_fp8(const PagedTile<Shape>& tile, int32_t key0, Fp8K<Shape>& r, uint32_t wave, uint32_t lane) {
  paged_load_fp8(tile, r, tile.k_cache, tile.k_span, tile.k_page, tile.k_tok, key0, wave, lane);
}
template <class Shape>
MM_DEVICE void load_v_fp8(const PagedTile<Shape>& tile, int32_t key0, Fp8V<Shape>& r, uint32_t wave, uint32_t lane) {
  paged_load_fp8(tile, r, tile.v_cache, tile.v_span, tile.v_page, tile.v_tok, key0, wave, lane);
}

}  // namespace attn950
