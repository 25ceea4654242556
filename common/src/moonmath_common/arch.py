"""Which AMD arch applies: the live GPU's (hip backend) or the emulated one (emu, reference).

This module knows archs only; it never asks which backend is selected (moonmath_common.backend
imports it, not the other way round). `target_arch()` and `cu_count()`, which depend on the backend,
live in moonmath_common.backend.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Iterator

SUPPORTED_ARCHS = ("gfx942", "gfx950")
DEFAULT_EMU_ARCH = "gfx942"

# Compute units per arch, for planners when no device can be asked (MI300X, MI355X).
CU_COUNT = {"gfx942": 304, "gfx950": 256}
LDS_BYTES_PER_CU = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}

_state = threading.local()


def _validate(arch: object, what: str) -> str:
    if not isinstance(arch, str):
        raise TypeError(f"{what} must be a str naming an arch ({', '.join(SUPPORTED_ARCHS)}); got "
                        f"{type(arch).__name__}")
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"{what} must be one of {', '.join(SUPPORTED_ARCHS)}; got {arch!r}")
    return arch


def emulated_arch() -> str:
    """The arch the emu and reference backends use: set_arch()/use_arch(), else env MOONMATH_EMU_ARCH,
    else gfx942."""
    return arch_choice()[0]


def arch_choice() -> tuple[str, str]:
    """(emulated arch, where it came from: "set_arch()", "MOONMATH_EMU_ARCH" or "default")."""
    override = getattr(_state, "override", None)
    if override:
        return override, "set_arch()"
    env = os.environ.get("MOONMATH_EMU_ARCH", "").strip()
    if env:
        return _validate(env, "MOONMATH_EMU_ARCH"), "MOONMATH_EMU_ARCH"
    return DEFAULT_EMU_ARCH, "default"


def set_arch(arch: str | None) -> None:
    """Select the arch the emu and reference backends run for this thread (None: back to env/default).

    The hip backend always runs the live GPU's arch; this choice does not apply there.
    """
    _state.override = _validate(arch, "arch") if arch is not None else None


@contextlib.contextmanager
def use_arch(arch: str) -> Iterator[str]:
    """`with use_arch("gfx950"): ...` runs the block's emu/reference ops with that arch's kernels."""
    prev = getattr(_state, "override", None)
    _state.override = _validate(arch, "arch")
    try:
        yield arch
    finally:
        _state.override = prev


@functools.lru_cache(maxsize=1)
def live_arch() -> str | None:
    """The gcnArchName of AMD GPU 0 (e.g. 'gfx942'), or None when no AMD GPU is reachable."""
    from . import hip

    return hip.device_arch(0)
