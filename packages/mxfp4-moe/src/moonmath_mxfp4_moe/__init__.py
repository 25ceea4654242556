"""moonmath-mxfp4-moe: MXFP4 mixture-of-experts grouped GEMMs (bf16 activations x E2M1 weights with E8M0
scales; on gfx950 also a4w4 / a8w4: MXFP4 / MXFP8 activations quantised by AITER's per-1x32 rules, and the
one-launch a4w4 layer), the weight repack, the tile planners and moe_align_block_size."""
from .a4w4 import (
    mxfp4_moe_down_a4w4,
    mxfp4_moe_down_a8w4,
    mxfp4_moe_gateup_a4w4,
    mxfp4_moe_gateup_a8w4,
    mxfp4_moe_layer_a4w4,
    mxfp4_moe_layer_a4w4_block_m,
    mxfp4_moe_layer_a4w4_down_splits,
)
from .align import moe_align_block_size
from .ops import EPI_NONE, EPI_SILU, EPI_SITU, mxfp4_moe_down, mxfp4_moe_gateup
from .planners import (
                       mxfp4_moe_down_block_m,
                       mxfp4_moe_down_n_steps,
                       mxfp4_moe_down_nt,
                       mxfp4_moe_down_plan,
                       mxfp4_moe_gateup_block_m,
                       mxfp4_moe_gateup_supports_k,
)
from .quant import mxfp4_quantize, mxfp8_quantize, mxfp8_quantize_reference
from .quant import quantize_reference as mxfp4_quantize_reference
from .repack import repack_mxfp4, repack_mxfp4_scales, unrepack_mxfp4, unrepack_mxfp4_scales

__version__ = "0.1.0"

__all__ = [
    "EPI_NONE", "EPI_SILU", "EPI_SITU", "moe_align_block_size", "mxfp4_moe_down", "mxfp4_moe_down_a4w4",
    "mxfp4_moe_down_block_m", "mxfp4_moe_gateup_a4w4", "mxfp4_quantize", "mxfp4_quantize_reference",
    "mxfp8_quantize", "mxfp8_quantize_reference", "mxfp4_moe_gateup_a8w4", "mxfp4_moe_down_a8w4",
    "mxfp4_moe_down_n_steps", "mxfp4_moe_down_nt", "mxfp4_moe_down_plan", "mxfp4_moe_gateup",
    "mxfp4_moe_gateup_block_m", "mxfp4_moe_gateup_supports_k", "mxfp4_moe_layer_a4w4",
    "mxfp4_moe_layer_a4w4_block_m", "mxfp4_moe_layer_a4w4_down_splits", "repack_mxfp4", "repack_mxfp4_scales",
    "unrepack_mxfp4", "unrepack_mxfp4_scales",
]
