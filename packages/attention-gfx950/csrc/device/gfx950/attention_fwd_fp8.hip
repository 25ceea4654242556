// gfx950 attention forward with fp8 K/V (OCP e4m3fn, issue 17), bf16 Q and output: the kernels of
// attention_fwd.hip with the dequantising load stage (FwdShape<..., KvFp8 = true>), named attn_fwd_fp8_d<D>
// + the feature suffixes; the fp32 [heads_kv] K and V descales are their last two arguments. Head dims 64 and
// 128 (the serving models' head dims: gpt-oss, Llama/Qwen/Mistral; 256: attention_fwd_fp8_d256.hip), dense and varlen; the paged ones
// are in attention_fwd_paged_fp8.hip.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_FP8_KERNELS(attn_fwd_fp8_d64, 64, 64)
ATTN_FWD_FP8_KERNELS(attn_fwd_fp8_d128, 128, 128)
