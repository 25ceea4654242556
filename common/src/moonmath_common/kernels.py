"""Code objects shipped in a package, and launching them on the current backend."""
from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .backend import get_backend
from .codeobject import CodeObject, KernelMeta, pack_explicit_args
from .errors import BackendUnavailableError, NoKernelError, emu_install_hint

Dim3 = tuple[int, int, int]


def _dim3(v: int | Sequence[int]) -> Dim3:
    t = (v,) if isinstance(v, int) else tuple(v)
    t = t + (1,) * (3 - len(t))
    if len(t) != 3 or any(int(x) < 1 for x in t):
        raise ValueError(f"launch dimensions must be 1 to 3 positive ints; got {v!r}")
    return int(t[0]), int(t[1]), int(t[2])


def hazards_checked() -> bool:
    """The emulator's hazard checker is on unless MOONMATH_EMU_HAZARDS=0."""
    return os.environ.get("MOONMATH_EMU_HAZARDS", "1").strip() not in ("0", "false", "off")


def _kernels_root(package: str) -> Path:
    """The first `kernels` directory on the package's search path (see KernelSet)."""
    import importlib

    mod = importlib.import_module(package)
    roots = [Path(p) for p in getattr(mod, "__path__", [])] or [Path(str(importlib.resources.files(package)))]
    for r in roots:
        if (r / "kernels").is_dir():
            return r / "kernels"
    return roots[0] / "kernels"


class KernelSet:
    """The code objects of one package: `<package>/kernels/<arch>/<name>.hsaco`.

    The kernels/ directory is looked up on every entry of the package's __path__: a regular install has
    one; an editable install (pip install -e) has the source tree first and the built files, installed
    beside it into site-packages, on another entry.
    """

    def __init__(self, package: str):
        self.package = package
        self._lock = threading.Lock()
        self._emu: dict[Path, Any] = {}
        self._hip: dict[Path, Any] = {}
        self.last_counters: dict | None = None
        self._root_cache: Path | None = None

    @property
    def _root(self) -> Path:
        if self._root_cache is None:
            self._root_cache = _kernels_root(self.package)
        return self._root_cache

    def archs_built(self) -> list[str]:
        if not self._root.is_dir():
            return []
        return sorted(p.name for p in self._root.iterdir() if p.is_dir() and any(p.glob("*.hsaco")))

    def build_info(self) -> dict:
        p = self._root / "build_info.json"
        return json.loads(p.read_text()) if p.exists() else {}

    def buildable(self, code_object: str) -> list[str]:
        """Archs whose sources hold `code_object` (the build records them, built or not)."""
        sources = self.build_info().get("sources", {})
        return sorted(a for a, stems in sources.items() if code_object in stems)

    def code_objects(self, arch: str) -> list[Path]:
        return sorted((self._root / arch).glob("*.hsaco"))

    def path(self, op: str, arch: str, code_object: str) -> Path:
        p = self._root / arch / f"{code_object}.hsaco"
        if not p.exists():
            built = [a for a in self.archs_built() if (self._root / a / f"{code_object}.hsaco").exists()]
            raise NoKernelError(op, arch, built, buildable=sorted(set(self.buildable(code_object)) | set(built)))
        return p

    @functools.cache  # noqa: B019 - one KernelSet per package, lives for the process
    def metadata(self, path: Path) -> CodeObject:
        return CodeObject.parse(path.read_bytes())

    def kernel_meta(self, op: str, arch: str, code_object: str, kernel: str) -> KernelMeta:
        co = self.metadata(self.path(op, arch, code_object))
        if kernel not in co.kernels:
            raise NoKernelError(op, arch, [], f"({code_object}.hsaco has no kernel {kernel!r})")
        return co.kernels[kernel]

    def launch(self, op: str, arch: str, code_object: str, kernel: str, grid: int | Sequence[int],
               block: int | Sequence[int], args: Sequence[Any], dynamic_lds: int = 0) -> dict | None:
        """Run `kernel` of `<arch>/<code_object>.hsaco` on the current backend.

        Returns the emulator's counters (emu) or None (hip: asynchronous on the current stream).
        """
        grid3, block3 = _dim3(grid), _dim3(block)
        backend = get_backend()
        path = self.path(op, arch, code_object)
        if backend == "emu":
            return self._launch_emu(path, kernel, grid3, block3, args, dynamic_lds)
        if backend == "hip":
            return self._launch_hip(op, arch, code_object, path, kernel, grid3, block3, args, dynamic_lds)
        raise ValueError(f"{op}: backend {backend!r} does not run kernels")

    def _launch_emu(self, path: Path, kernel: str, grid: Dim3, block: Dim3, args, dynamic_lds: int) -> dict:
        try:
            import moonmath_emu
        except ImportError as e:
            raise BackendUnavailableError(
                f"backend 'emu' needs moonmath-emu, which is not installed. {emu_install_hint()}") from e
        with self._lock:
            mod = self._emu.get(path)
            if mod is None:
                mod = self._emu[path] = moonmath_emu.Module(path.read_bytes())
        counters = mod.launch(kernel, grid=grid, block=block, args=list(args), dynamic_lds=dynamic_lds,
                              check_hazards=hazards_checked())
        self.last_counters = counters
        return counters

    def _launch_hip(self, op, arch, code_object, path: Path, kernel: str, grid: Dim3, block: Dim3, args,
                    dynamic_lds: int) -> None:
        import torch

        from . import hip

        meta = self.kernel_meta(op, arch, code_object, kernel)
        with self._lock:
            mod = self._hip.get(path)
            if mod is None:
                mod = self._hip[path] = hip.Module(path.read_bytes())
        stream = torch.cuda.current_stream().cuda_stream
        mod.launch(kernel, grid, block, pack_explicit_args(meta, list(args)), dynamic_lds, stream)
        return None
