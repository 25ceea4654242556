"""moonmath-attention-gfx950: bf16 attention forward for AMD CDNA4 (MI355X, gfx950)."""
from .attention import HEAD_DIMS, LAYOUTS, ROUND_MODES, VarlenPlan, forward, forward_paged, forward_varlen

__version__ = "0.1.0"

__all__ = ["HEAD_DIMS", "LAYOUTS", "ROUND_MODES", "VarlenPlan", "forward", "forward_paged", "forward_varlen"]
