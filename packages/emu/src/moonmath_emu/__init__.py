"""moonmath-emu: run AMD CDNA3 (gfx942) / CDNA4 (gfx950) code objects on the CPU.

    import moonmath_emu as emu
    mod = emu.Module(open("k.hsaco", "rb").read())
    counters = mod.launch("vadd", grid=(4, 1, 1), block=(256, 1, 1), args=[a, b, c, n])

Arguments are torch CPU tensors or numpy arrays (their storage is the kernel's global memory and is
registered with the memory sanitizer), ``None`` (null pointer), Python ints and floats (packed to the
parameter's size from the code object metadata). See docs/emulator.md.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from . import _core
from ._core import EmuError, HazardError, LaneError, MemoryViolation, UnsupportedInstruction

__all__ = [
    "Module", "EmuError", "MemoryViolation", "HazardError", "LaneError", "UnsupportedInstruction",
    "disassemble", "supported_opcodes", "opcodes_in",
]
__version__ = "0.1.0"


def _dim3(v: Any, what: str) -> list[int]:
    if isinstance(v, int):
        v = (v,)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3:
        raise ValueError(f"{what} must have 1 to 3 dimensions, got {v!r}")
    v = v + (1,) * (3 - len(v))
    if any(x < 1 for x in v):
        raise ValueError(f"{what} dimensions must be >= 1, got {v!r}")
    return list(v)


def _tensor_extent(t: Any) -> tuple[int, int, int] | None:
    """(pointer, storage base, storage bytes) for a torch tensor or numpy array, else None."""
    if hasattr(t, "data_ptr") and hasattr(t, "untyped_storage"):
        dev = getattr(t, "device", None)
        if dev is not None and getattr(dev, "type", "cpu") != "cpu":
            raise ValueError(f"tensor arguments must be on the CPU, got device {dev}")
        st = t.untyped_storage()
        return int(t.data_ptr()), int(st.data_ptr()), int(st.nbytes())
    if hasattr(t, "__array_interface__") and hasattr(t, "ctypes"):
        import numpy as np

        base = t
        while isinstance(getattr(base, "base", None), np.ndarray):
            base = base.base
        ptr = int(t.__array_interface__["data"][0])
        bptr = int(base.__array_interface__["data"][0])
        return ptr, bptr, int(base.nbytes)
    return None


def _mode(value: bool | str, what: str) -> int:
    """0 off, 1 on (raise), 2 report-only, from True / False / "warn"."""
    if isinstance(value, str):
        if value != "warn":
            raise ValueError(f"{what} must be True, False or 'warn'; got {value!r}")
        return 2
    if isinstance(value, (bool, int)):
        return 1 if value else 0
    raise TypeError(f"{what} must be True, False or 'warn'; got {type(value).__name__}")


def _lanes_default() -> bool | str:
    """check_lanes when the caller does not say: MOONMATH_EMU_CHECK_LANES (1 / warn), else off."""
    v = os.environ.get("MOONMATH_EMU_CHECK_LANES", "")
    if v in ("", "0"):
        return False
    if v == "warn":
        return "warn"
    if v == "1":
        return True
    raise ValueError(f"MOONMATH_EMU_CHECK_LANES must be 0, 1 or warn; got {v!r}")


def _log_lanes(kernel: str, counters: dict) -> None:
    """MOONMATH_EMU_LANES_LOG=FILE: append every lane-checker finding (and partial-EXEC MFMA counts) to FILE,
    so a whole test run can be swept without changing its callers."""
    path = os.environ.get("MOONMATH_EMU_LANES_LOG")
    if not path:
        return
    with open(path, "a") as f:
        partial, found = counters["mfma_partial_exec"], len(counters["lanes"])
        f.write(f"launch {kernel} mfma_partial_exec={partial} findings={found}\n")
        for msg in counters["lanes"]:
            f.write(f"  {msg}\n")


def _pack_args(args: Sequence[Any]) -> list[tuple]:
    out: list[tuple] = []
    for i, a in enumerate(args):
        if a is None:
            out.append(("int", 0))
            continue
        if isinstance(a, bool):
            out.append(("int", int(a)))
            continue
        if isinstance(a, int):
            out.append(("int", a & 0xFFFFFFFFFFFFFFFF))
            continue
        if isinstance(a, float):
            out.append(("float", a))
            continue
        if hasattr(a, "__kernarg__"):
            # a by-value struct argument: its bytes, and the buffers its pointer fields address
            blob, buffers = a.__kernarg__()
            regions = []
            for t in buffers:
                e = _tensor_extent(t) if t is not None else None
                if e is not None:
                    regions.append((e[1], e[2]))
            out.append(("bytes", bytes(blob), regions))
            continue
        ext = _tensor_extent(a)
        if ext is not None:
            out.append(("ptr", ext[0], ext[1], ext[2]))
            continue
        # numpy scalars
        try:
            import numpy as np

            if isinstance(a, np.integer):
                out.append(("int", int(a) & 0xFFFFFFFFFFFFFFFF))
                continue
            if isinstance(a, np.floating):
                out.append(("float", float(a)))
                continue
        except ImportError:  # pragma: no cover
            pass
        raise TypeError(f"argument {i}: expected a CPU tensor, numpy array, None, int, float or a struct "
                        f"(an object with __kernarg__), got {type(a).__name__}")
    return out


class Module:
    """A loaded code object (ELF, code object v5) for gfx942 or gfx950."""

    def __init__(self, code_object: bytes | bytearray | memoryview):
        if isinstance(code_object, (str,)):
            raise TypeError("Module() takes the code object bytes, not a path (use open(path, 'rb').read())")
        self._m = _core.Module(bytes(code_object))

    @property
    def arch(self) -> str:
        return self._m.arch

    @property
    def kernels(self) -> list[str]:
        return list(self._m.kernels)

    def kernel_info(self, name: str) -> dict:
        return self._m.kernel_info(name)

    def disassemble(self) -> list[tuple[str, int, str]]:
        return self._m.disassemble()

    def launch(self, name: str, grid: Iterable[int] | int = (1, 1, 1), block: Iterable[int] | int = (64, 1, 1),
               args: Sequence[Any] = (), dynamic_lds: int = 0, check_hazards: bool | str = True,
               threads: int | None = None, check_lanes: bool | str | None = None) -> dict:
        """Run kernel `name` over `grid` workgroups of `block` work-items; returns the counters dict.

        check_hazards: True (a hazard raises HazardError), False (not checked) or "warn" (report-only,
        for foreign code: each distinct site once, in counters["hazards"], and the launch goes on).
        check_lanes: the lane checker (docs/emulator.md): True (a store of lanes whose values are undefined
        on hardware raises LaneError), False, or "warn" (findings in counters["lanes"]); None: the
        environment variable MOONMATH_EMU_CHECK_LANES (0, 1 or warn), else off.
        threads: workgroups run in parallel on this many threads (None: MOONMATH_EMU_THREADS, else all
        cores); results and counters are the same as on one thread. Kernels with global atomics or
        s_memtime always run on one thread.
        """
        g = _dim3(grid, "grid")
        b = _dim3(block, "block")
        if dynamic_lds < 0:
            raise ValueError("dynamic_lds must be >= 0")
        mode = _mode(check_hazards, "check_hazards")
        lane_mode = _mode(_lanes_default() if check_lanes is None else check_lanes, "check_lanes")
        if threads is None:
            nthreads = 0
        elif isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int or None; got {threads!r}")
        else:
            nthreads = threads
        counters = self._m._launch(name, g, b, _pack_args(args), int(dynamic_lds), mode, nthreads, lane_mode)
        if lane_mode:
            _log_lanes(name, counters)
        return counters


def disassemble(code_object: bytes) -> list[tuple[str, int, str]]:
    """[(kernel, pc, text)] for every instruction of every kernel (pc = virtual address in the object)."""
    return _core.Module(bytes(code_object)).disassemble()


def supported_opcodes(arch: str) -> set[str]:
    """Mnemonics the emulator executes for `arch` ("gfx942" or "gfx950")."""
    return set(_core.supported_opcodes(arch))


def opcodes_in(code_object: bytes) -> set[str]:
    """Mnemonics present in the kernels of a code object."""
    return set(_core.Module(bytes(code_object)).opcodes())
