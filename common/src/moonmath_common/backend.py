"""Backend selection: hip (AMD GPU), emu (moonmath-emu on the CPU) or reference (plain torch).

The default is hip when an AMD GPU is present, else emu when moonmath-emu is installed. The
reference backend runs only when chosen (set_backend/use_backend or MOONMATH_BACKEND=reference):
with neither a GPU nor the emulator, ops raise BackendUnavailableError naming the ways out, so a
result is never silently the reference computing itself.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from .arch import CU_COUNT, emulated_arch, live_arch
from .errors import BackendUnavailableError, emu_install_hint

BACKENDS = ("hip", "emu", "reference")

_state = threading.local()


def _validate(name: object) -> str:
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {name!r}")
    return name  # type: ignore[return-value]


def emulator_available() -> bool:
    try:
        import moonmath_emu  # noqa: F401
    except ImportError:
        return False
    return True


def default_backend() -> str | None:
    """hip when an AMD GPU is present, else emu when moonmath-emu is installed, else None (no kernel
    can run here; the reference backend must be chosen explicitly)."""
    if live_arch() is not None:
        return "hip"
    return "emu" if emulator_available() else None


def backend_choice() -> tuple[str | None, str]:
    """(backend, where it came from: "set_backend()", "MOONMATH_BACKEND" or "default"); the backend is
    None when nothing was chosen and no default can run kernels."""
    name = getattr(_state, "override", None)
    if name:
        return name, "set_backend()"
    env = os.environ.get("MOONMATH_BACKEND", "").strip()
    if env:
        return _validate(env), "MOONMATH_BACKEND"
    return default_backend(), "default"


def get_backend() -> str:
    """The backend ops run on now: set_backend()/use_backend(), else env MOONMATH_BACKEND, else default.

    Raises BackendUnavailableError when nothing was chosen and neither an AMD GPU nor moonmath-emu is
    present.
    """
    name, _ = backend_choice()
    if name is None:
        raise BackendUnavailableError(
            "no backend can run moonmath kernels here: no AMD GPU was found and moonmath-emu (the CPU "
            f"emulator that runs the real code objects) is not installed. {emu_install_hint()} To run the "
            "plain-torch reference instead (no kernel involved), choose it: MOONMATH_BACKEND=reference or "
            "moonmath_common.set_backend('reference').")
    return name


def set_backend(name: str | None) -> None:
    """Select the backend for this thread (None goes back to env / default)."""
    _state.override = _validate(name) if name is not None else None


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[str]:
    """`with use_backend("reference"): ...` runs the block on that backend."""
    prev = getattr(_state, "override", None)
    _state.override = _validate(name)
    try:
        yield name
    finally:
        _state.override = prev


def target_arch(backend: str | None = None) -> str:
    """The arch whose kernels and semantics apply under `backend` (default: the current backend):
    the live GPU's under hip, else the emulated arch (set_arch/use_arch, MOONMATH_EMU_ARCH)."""
    backend = backend or get_backend()
    if backend == "hip":
        arch = live_arch()
        if arch is None:
            raise BackendUnavailableError("backend 'hip' selected but no AMD GPU was found")
        return arch
    return emulated_arch()


def cu_count(arch: str) -> int:
    """Compute units of the live device for `arch` when on hip, else the arch's full part."""
    if get_backend() == "hip":
        from . import hip

        n = hip.device_cu_count(0)
        if n:
            return n
    return CU_COUNT[arch]
