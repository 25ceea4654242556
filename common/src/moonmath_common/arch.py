"""Which AMD arch applies: the live GPU's (hip backend) or the emulated one (emu, reference)."""
from __future__ import annotations

import functools
import os

SUPPORTED_ARCHS = ("gfx942", "gfx950")
DEFAULT_EMU_ARCH = "gfx942"

# Compute units per arch, for planners when no device can be asked (MI300X, MI355X).
CU_COUNT = {"gfx942": 304, "gfx950": 256}
LDS_BYTES_PER_CU = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}


def emulated_arch() -> str:
    """The arch the emulator (and the reference backend's semantics) use: env MOONMATH_EMU_ARCH."""
    arch = os.environ.get("MOONMATH_EMU_ARCH", DEFAULT_EMU_ARCH).strip() or DEFAULT_EMU_ARCH
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"MOONMATH_EMU_ARCH must be one of {', '.join(SUPPORTED_ARCHS)}; got {arch!r}")
    return arch


@functools.lru_cache(maxsize=1)
def live_arch() -> str | None:
    """The gcnArchName of AMD GPU 0 (e.g. 'gfx942'), or None when no AMD GPU is reachable."""
    from . import hip

    return hip.device_arch(0)


def target_arch(backend: str | None = None) -> str:
    """The arch whose kernels and semantics apply under `backend` (default: the current backend)."""
    from .backend import get_backend

    backend = backend or get_backend()
    if backend == "hip":
        arch = live_arch()
        if arch is None:
            from .errors import BackendUnavailableError

            raise BackendUnavailableError("backend 'hip' selected but no AMD GPU was found")
        return arch
    return emulated_arch()


def cu_count(arch: str) -> int:
    """Compute units of the live device for `arch` when present, else the arch's full part."""
    from .backend import get_backend

    if get_backend() == "hip":
        from . import hip

        n = hip.device_cu_count(0)
        if n:
            return n
    return CU_COUNT[arch]
