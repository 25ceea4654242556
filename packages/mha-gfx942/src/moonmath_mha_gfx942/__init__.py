"""moonmath-mha-gfx942: bf16 MHA forward for AMD CDNA3 (MI300X, gfx942)."""
from .attention import FP8_KV, HEAD_DIMS, LAYOUTS, ROUND_MODES, forward

__version__ = "0.1.0"

__all__ = ["FP8_KV", "HEAD_DIMS", "LAYOUTS", "ROUND_MODES", "forward"]
