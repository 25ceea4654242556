// gfx950 attention forward over paged K/V caches, kernel head dims (256, 128) (issue 17; page_size >= 8): the
// kernels of attention_fwd_d256.hip with the paged partitioner (attention_fwd_paged.hpp), every feature twin.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_PAGED_KERNELS(attn_fwd_paged_d256_128, 256, 128)
