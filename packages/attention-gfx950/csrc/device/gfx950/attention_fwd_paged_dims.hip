// gfx950 attention forward over paged K/V caches, the head dims 64, 80 and 96 (issue 17; page_size >= 8):
// the kernels of attention_fwd_dims.hip with the paged partitioner (attention_fwd_paged.hpp), every feature twin.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_PAGED_KERNELS(attn_fwd_paged_d64, 64, 64)
ATTN_FWD_PAGED_KERNELS(attn_fwd_paged_d80, 80, 80)
ATTN_FWD_PAGED_KERNELS(attn_fwd_paged_d96, 96, 96)
