"""moonmath-attention-gfx950: bf16 attention forward for AMD CDNA4 (MI355X, gfx950)."""
from moonmath_common.emu_device import EmuDeviceTensor, HostReadError, as_emu_device

from .attention import FP8_HEAD_DIMS, FP8_KV, HEAD_DIMS, LAYOUTS, ROUND_MODES, forward, forward_paged, forward_varlen
from .varlen_plan import VarlenPlan

__version__ = "0.1.0"

__all__ = ["EmuDeviceTensor", "FP8_HEAD_DIMS", "FP8_KV", "HEAD_DIMS", "HostReadError", "LAYOUTS", "ROUND_MODES",
           "VarlenPlan", "as_emu_device", "forward", "forward_paged", "forward_varlen"]
