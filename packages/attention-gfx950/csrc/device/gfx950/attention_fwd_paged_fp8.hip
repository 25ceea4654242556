// gfx950 attention forward over paged fp8 K/V caches (OCP e4m3fn, issue 17): the kernels of
// attention_fwd_fp8.hip with the paged partitioner (attention_fwd_paged.hpp: paged_load_fp8), named
// attn_fwd_paged_fp8_d<D> + the feature suffixes; the fp32 [heads_kv] K and V descales are the last two arguments.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_PAGED_FP8_KERNELS(attn_fwd_paged_fp8_d64, 64, 64)
ATTN_FWD_PAGED_FP8_KERNELS(attn_fwd_paged_fp8_d128, 128, 128)
