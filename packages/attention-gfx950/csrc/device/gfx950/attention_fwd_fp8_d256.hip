// gfx950 attention forward with fp8 K/V (OCP e4m3fn, issue 17), head dims (256, 256): the 4-wave kernels of
// attention_fwd_d256.hip with the dequantising load stage (FwdShape<..., KvFp8 = true>; the next block's K and V
// pieces in VGPRs across a phase: 8 + 8 a lane at 4 waves), named attn_fwd_fp8_d256 + the feature suffixes; the fp32
// [heads_kv] K and V descales are their last two arguments.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_FP8_KERNELS(attn_fwd_fp8_d256, 256, 256)
