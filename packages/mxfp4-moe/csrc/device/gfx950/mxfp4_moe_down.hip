// MXFP4 MoE down-projection grouped GEMM for gfx950, a16w4: the gfx942 kernel
// (gfx942/mxfp4_moe_down.hip: whole A tile in LDS, column chunks swept against it) with the slab
// product on v_mfma_f32_16x16x32_bf16 (mxfp4_moe_common.hpp, slab_mma). Bit-equal to the gfx950
// gate/up kernel with EPI_NONE (the same slab_mma chain), as on gfx942.
#include "gfx942/mxfp4_moe_down.hip"
