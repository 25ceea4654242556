// gfx950 attention forward, head dims (Dqk, Dv) = (256, 256) (issue 17), one pass: 4 waves of 256 threads, one a
// SIMD (FwdShape::kWaves), each wave's 32-row tile holding O (128 fp32 a lane, the MFMA accumulators in AGPRs) and Q
// (64) in the whole 512-entry register file; the 256-row tile in two row passes. Every feature twin
// (attention_fwd_kernels.hpp).
#include "attention_fwd_kernels.hpp"

ATTN_FWD_KERNELS(attn_fwd_d256, 256, 256)
