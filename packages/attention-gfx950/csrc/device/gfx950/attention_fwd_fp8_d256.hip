// gfx950 attention forward with fp8 K/V (OCP e4m3fn, issue 17), kernel head dims (256, 128): head dims 256 run as
// two column passes of these kernels (kernel.py COLUMN_PASSES), as the bf16 attention_fwd_d256.hip. The fp8 rows are
// staged in LDS by direct-to-LDS loads and widened from there (FwdShape::kFp8Staged: the registers of the (256, 128)
// kernel are all taken). Every feature twin; the fp32 [heads_kv] K and V descales are the last two arguments.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_FP8_KERNELS(attn_fwd_fp8_d256_128, 256, 128)
