"""`import moonmath_amd.moe as moe`: the MXFP4 MoE ops under the original package's module layout.
The same functions as moonmath_amd's top level."""
from moonmath_mxfp4_moe import (
    EPI_NONE,
    EPI_SILU,
    EPI_SITU,
    moe_align_block_size,
    mxfp4_moe_down,
    mxfp4_moe_down_a4w4,
    mxfp4_moe_down_a8w4,
    mxfp4_moe_down_block_m,
    mxfp4_moe_down_n_steps,
    mxfp4_moe_down_nt,
    mxfp4_moe_down_plan,
    mxfp4_moe_gateup,
    mxfp4_moe_gateup_a4w4,
    mxfp4_moe_gateup_a8w4,
    mxfp4_moe_gateup_block_m,
    mxfp4_moe_gateup_supports_k,
    mxfp4_moe_layer_a4w4,
    mxfp4_quantize,
    mxfp8_quantize,
    repack_mxfp4,
    repack_mxfp4_scales,
    unrepack_mxfp4,
    unrepack_mxfp4_scales,
)

from .moe_layer import fused_moe

__all__ = [
    "EPI_NONE", "EPI_SILU", "EPI_SITU", "moe_align_block_size", "mxfp4_moe_down", "mxfp4_moe_down_block_m",
    "mxfp4_moe_down_n_steps", "mxfp4_moe_down_nt", "mxfp4_moe_down_plan", "mxfp4_moe_gateup",
    "mxfp4_moe_gateup_block_m", "mxfp4_moe_gateup_supports_k", "repack_mxfp4", "repack_mxfp4_scales",
    "unrepack_mxfp4", "unrepack_mxfp4_scales",
    # a4w4 / a8w4 (gfx950), the one-launch a4w4 layer kernel and the one-call layer
    "fused_moe", "mxfp4_moe_down_a4w4", "mxfp4_moe_gateup_a4w4", "mxfp4_quantize", "mxfp4_moe_down_a8w4",
    "mxfp4_moe_gateup_a8w4", "mxfp8_quantize", "mxfp4_moe_layer_a4w4",
]
