// gfx950 attention forward over paged fp8 K/V caches (OCP e4m3fn, issue 17), kernel head dims (256, 128): the kernels
// of attention_fwd_fp8_d256.hip with the paged partitioner (attention_fwd_paged.hpp: paged_load_fp8), every feature
// twin; the fp32 [heads_kv] K and V descales are the last two arguments.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_PAGED_FP8_KERNELS(attn_fwd_paged_fp8_d256_128, 256, 128)
