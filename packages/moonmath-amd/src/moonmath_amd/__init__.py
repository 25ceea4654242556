"""moonmath-amd: hand-tuned HIP kernels for AMD Instinct GPUs, one API over the op packages.

`import moonmath_amd as ma`; every op runs on the current backend (`ma.get_backend()`: hip on an AMD
GPU, else the emulator when installed, else the torch reference) and, for arch-specific ops,
dispatches to the package holding that arch's kernels.
"""
from moonmath_common import (
    BACKENDS,
    BackendUnavailableError,
    MoonmathError,
    NoKernelError,
    emulated_arch,
    get_backend,
    live_arch,
    set_backend,
    target_arch,
    use_backend,
)

from .ops import *  # noqa: F403 - the public op surface
from .ops import __all__ as _ops_all

__version__ = "0.1.0"

__all__ = [
    "BACKENDS", "BackendUnavailableError", "MoonmathError", "NoKernelError", "emulated_arch", "get_backend",
    "live_arch", "set_backend", "target_arch", "use_backend", *_ops_all,
]
