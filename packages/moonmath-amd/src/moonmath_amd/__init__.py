"""moonmath-amd: hand-tuned HIP kernels for AMD Instinct GPUs, one API over the op packages.

`import moonmath_amd as ma`; every op runs on the current backend (`ma.get_backend()`: hip on an AMD
GPU, else the emulator, which this package depends on; the plain-torch reference only when chosen)
and, for arch-specific ops, dispatches to the package holding that arch's kernels. The emulated arch
is `ma.set_arch()` / `with ma.use_arch(...)`, else MOONMATH_EMU_ARCH, else gfx942.
`moonmath_amd.mla` and `moonmath_amd.moe` hold the same ops under the original module layout.
"""
from moonmath_common import (
    BACKENDS,
    BackendUnavailableError,
    MoonmathError,
    NoKernelError,
    emulated_arch,
    get_backend,
    live_arch,
    set_arch,
    set_backend,
    target_arch,
    use_arch,
    use_backend,
)

from . import mla, moe  # noqa: E402, F401 - the original's module layout: moonmath_amd.mla, moonmath_amd.moe

# MoE additions (issue 15): the a4w4 / a8w4 ops, the a4w4 layer kernel and the one-call layer, from moonmath_amd.moe.
from .moe import (  # noqa: F401
    fused_moe,
    mxfp4_moe_down_a4w4,
    mxfp4_moe_down_a8w4,
    mxfp4_moe_gateup_a4w4,
    mxfp4_moe_gateup_a8w4,
    mxfp4_moe_layer_a4w4,
    mxfp4_quantize,
    mxfp8_quantize,
)
from .ops import *  # noqa: F403 - the public op surface
from .ops import __all__ as _ops_all

_MOE_EXTRA = ["fused_moe", "mxfp4_moe_down_a4w4", "mxfp4_moe_gateup_a4w4", "mxfp4_quantize", "mxfp4_moe_down_a8w4",
              "mxfp4_moe_gateup_a8w4", "mxfp4_moe_layer_a4w4", "mxfp8_quantize"]

__version__ = "0.1.0"

__all__ = [
    "BACKENDS", "BackendUnavailableError", "MoonmathError", "NoKernelError", "emulated_arch", "get_backend",
    "live_arch", "set_arch", "set_backend", "target_arch", "use_arch", "use_backend", *_ops_all, *_MOE_EXTRA,
]
