// gfx950 attention forward, the head dims other than 128 and MLA (issue 17): 64 (gpt-oss, small models), 80 (phi-2;
// V padded to 96 in LDS) and 96 (phi-3); 256 is not built (attention_fwd.hpp).
// Every feature twin (attention_fwd_kernels.hpp); the paged ones are in attention_fwd_paged_dims.hip. Their own
// code objects, so that the build compiles them beside attention_fwd.hip and attention_fwd_paged.hip.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_KERNELS(attn_fwd_d64, 64, 64)
ATTN_FWD_KERNELS(attn_fwd_d80, 80, 80)
ATTN_FWD_KERNELS(attn_fwd_d96, 96, 96)
