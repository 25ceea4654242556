// gfx950 attention forward over paged K/V caches, head dims (128, 128) (page_size >= 8) and (192, 128) (MLA
// prefill, page_size >= 16): the pipeline of attention_fwd.hpp with the paged partitioner of
// attention_fwd_paged.hpp, the same plan buffer as the dense kernels (k_batch / v_batch = page strides,
// k_tok0 = first page-list entry), and the feature twins of attention_fwd_kernels.hpp.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_PAGED_KERNELS(attn_fwd_paged_d128, 128, 128)
ATTN_FWD_PAGED_KERNELS(attn_fwd_paged_d192_128, 192, 128)
