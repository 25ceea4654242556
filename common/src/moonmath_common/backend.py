"""Backend selection: hip (AMD GPU), emu (moonmath-emu on the CPU) or reference (plain torch)."""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

BACKENDS = ("hip", "emu", "reference")

_state = threading.local()


def _validate(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {name!r}")
    return name


def emulator_available() -> bool:
    try:
        import moonmath_emu  # noqa: F401
    except ImportError:
        return False
    return True


def default_backend() -> str:
    """hip when an AMD GPU is present, else emu when moonmath-emu is installed, else reference."""
    from .arch import live_arch

    if live_arch() is not None:
        return "hip"
    return "emu" if emulator_available() else "reference"


def get_backend() -> str:
    """The backend ops run on now: set_backend()/use_backend(), else env MOONMATH_BACKEND, else default."""
    name = getattr(_state, "override", None)
    if name:
        return name
    env = os.environ.get("MOONMATH_BACKEND", "").strip()
    if env:
        return _validate(env)
    return default_backend()


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
