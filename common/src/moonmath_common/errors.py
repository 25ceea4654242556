"""Error types shared by every moonmath package."""
from __future__ import annotations

from collections.abc import Sequence


class MoonmathError(Exception):
    """Base class of moonmath's own errors (validation raises plain TypeError/ValueError)."""


def emu_install_hint() -> str:
    """How to get moonmath-emu, in commands that work: the checkout path always, index names where an index
    carries the packages."""
    return ("Install the emulator: from a moonmath-amd checkout `pip install ./packages/emu` (the "
            "moonmath-amd metapackage depends on it; a single op package has it as its [emu] extra, e.g. "
            "`pip install './packages/mla-decode[emu]'`), or `pip install moonmath-emu` where your package "
            "index carries it.")


class NoKernelError(MoonmathError, RuntimeError):
    """No kernel for the op on this arch: either none exists yet in any build ("not implemented for <arch>
    yet"), or one exists but this build left it out ("not built for <arch>; rebuild with GPU_ARCHS=...").

    archs_built: archs this installed build holds the op's kernel for. buildable: archs some build of this
    source can hold it for (None: unknown, taken as archs_built, so a missing arch reads as not implemented).
    The message names the op, the arch, and only the ways out that apply on the current backend.
    """

    def __init__(self, op: str, arch: str | None, archs_built: Sequence[str] = (), detail: str = "", *,
                 buildable: Sequence[str] | None = None, backend: str | None = None):
        self.op, self.arch, self.archs_built = op, arch, tuple(archs_built)
        self.buildable = tuple(buildable) if buildable is not None else self.archs_built
        self.not_built = arch is not None and arch in self.buildable and arch not in self.archs_built
        if backend is None:
            # errors sits below backend in the import order, so ask for it at raise time only.
            from .backend import backend_choice

            try:
                backend = backend_choice()[0]
            except ValueError:
                backend = None
        self.backend = backend
        where = arch or "unknown arch"
        built = ", ".join(self.archs_built) or "none"
        if self.not_built:
            msg = (f"{op}: not built for {where} (this build holds it for: {built}); rebuild with "
                   f"GPU_ARCHS=\"{arch}\" (or unset GPU_ARCHS to build every arch), e.g. "
                   f"GPU_ARCHS=\"{arch}\" pip install ./packages/<package>.")
        else:
            exists = ", ".join(self.buildable) or "no arch yet"
            msg = f"{op}: not implemented for {where} yet (kernels exist for: {exists})."
        outs = []
        others = [a for a in self.archs_built if a != arch]
        if backend in ("emu", "reference") and others:
            outs.append(f"select an arch that has it: moonmath_amd.set_arch({others[0]!r}) or "
                        f"MOONMATH_EMU_ARCH={others[0]} (emu)")
        if backend == "hip" and others:
            outs.append(f"run {others[0]}'s kernel on the CPU emulator: MOONMATH_BACKEND=emu "
                        f"MOONMATH_EMU_ARCH={others[0]}")
        outs.append("run the plain-torch reference (no kernel): MOONMATH_BACKEND=reference")
        msg += " Ways out: " + "; ".join(outs) + "."
        if detail:
            msg += f" {detail}"
        super().__init__(msg)


class BackendUnavailableError(MoonmathError, RuntimeError):
    """The selected backend cannot run here (no AMD GPU for hip, moonmath-emu not installed for emu)."""
