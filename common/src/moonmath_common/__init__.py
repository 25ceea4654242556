"""moonmath-common: the runtime every moonmath package shares (arch, backends, launch, checks)."""
from .arch import emulated_arch, live_arch, set_arch, use_arch
from .backend import BACKENDS, get_backend, set_backend, target_arch, use_backend
from .errors import BackendUnavailableError, MoonmathError, NoKernelError

__version__ = "0.1.0"


def common_dir() -> str:
    """Directory holding include/ and cmake/: inside the installed wheel, or common/ of a checkout."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "data")
    if os.path.isdir(os.path.join(installed, "cmake")):
        return installed
    return os.path.abspath(os.path.join(here, "..", ".."))

__all__ = [
    "BACKENDS", "BackendUnavailableError", "common_dir", "MoonmathError", "NoKernelError", "emulated_arch",
    "get_backend", "live_arch", "set_arch", "set_backend", "target_arch", "use_arch", "use_backend",
]
