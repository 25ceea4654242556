"""Error types shared by every moonmath package."""
from __future__ import annotations


class MoonmathError(Exception):
    """Base class of moonmath's own errors (validation raises plain TypeError/ValueError)."""


class NoKernelError(MoonmathError, RuntimeError):
    """This build, or this GPU, has no kernel for the op.

    The message names the op, the arch found, the archs this build holds, and the ways out.
    """

    def __init__(self, op: str, arch: str | None, archs_built: list[str] | tuple[str, ...], detail: str = ""):
        self.op, self.arch, self.archs_built = op, arch, tuple(archs_built)
        built = ", ".join(self.archs_built) if self.archs_built else "none"
        msg = (f"{op}: no kernel for arch {arch or 'unknown'} (this build holds: {built}). "
               f"Rebuild with GPU_ARCHS=\"{arch or 'gfx942;gfx950'}\", or run on another backend: "
               f"MOONMATH_BACKEND=emu (the CPU emulator, MOONMATH_EMU_ARCH=gfx942|gfx950) or "
               f"MOONMATH_BACKEND=reference (plain torch).")
        if detail:
            msg += f" {detail}"
        super().__init__(msg)


class BackendUnavailableError(MoonmathError, RuntimeError):
    """The selected backend cannot run here (no AMD GPU for hip, moonmath-emu not installed for emu)."""
