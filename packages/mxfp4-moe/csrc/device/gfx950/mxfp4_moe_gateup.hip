// MXFP4 MoE gate/up grouped GEMM for gfx950, a16w4 (bf16 activations, E2M1 weights + E8M0 scales).
//
// The gfx942 kernel (gfx942/mxfp4_moe_gateup.hip: tiling, waves' roles, LDS layout, pipeline and
// epilogues NONE / SITU / SILU are the same) built for gfx950; only the slab product differs: the
// dequantised 8 weights of a granule dword feed one v_mfma_f32_16x16x32_bf16 instead of two 16x16x16
// (mxfp4_moe_common.hpp, slab_mma). Why dequantise rather than quantise the activations into the
// scaled MFMA: a16w4 promises the exact bf16 activations; fp8/fp4 activations change the result by
// far more than its 1e-2 check allows (docs/kernels/mxfp4_moe_gfx950.md has the measurement).
// LDS use is the gfx942 kernel's (<= 28 KiB of gfx950's 160 KiB).
#include "gfx942/mxfp4_moe_gateup.hip"
