"""The HIP runtime, loaded at run time with ctypes (no link-time dependency on ROCm).

Only what the hip backend needs: find the device's arch, load code objects, launch kernels on a
stream. Nothing here runs unless an AMD GPU and libamdhip64 are present.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

hipSuccess = 0
HIP_LAUNCH_PARAM_BUFFER_POINTER = ctypes.c_void_p(0x01)
HIP_LAUNCH_PARAM_BUFFER_SIZE = ctypes.c_void_p(0x02)
HIP_LAUNCH_PARAM_END = ctypes.c_void_p(0x03)
# hipDeviceAttribute_t values (HIP 6.x).
hipDeviceAttributeMultiprocessorCount = 63


class HipError(RuntimeError):
    pass


@functools.lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL | None:
    names = [os.environ.get("MOONMATH_HIP_LIB", ""), "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7"]
    rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
    names += [os.path.join(rocm, "lib", "libamdhip64.so")]
    found = ctypes.util.find_library("amdhip64")
    if found:
        names.append(found)
    for n in names:
        if not n:
            continue
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    return None


def _check(rc: int, what: str) -> None:
    if rc != hipSuccess:
        lib = _lib()
        msg = ""
        if lib is not None:
            lib.hipGetErrorString.restype = ctypes.c_char_p
            msg = (lib.hipGetErrorString(rc) or b"").decode()
        raise HipError(f"{what} failed: hip error {rc} {msg}")


def device_count() -> int:
    lib = _lib()
    if lib is None:
        return 0
    n = ctypes.c_int(0)
    if lib.hipGetDeviceCount(ctypes.byref(n)) != hipSuccess:
        return 0
    return n.value


class _HipDeviceProp(ctypes.Structure):
    # hipDeviceProp_t is large and versioned; we only read gcnArchName by scanning a generous buffer.
    _fields_ = [("raw", ctypes.c_char * 8192)]


def device_arch(index: int = 0) -> str | None:
    """gcnArchName of device `index` without features (e.g. 'gfx942'), or None without a GPU."""
    if device_count() <= index:
        return None
    lib = _lib()
    prop = _HipDeviceProp()
    fn = getattr(lib, "hipGetDevicePropertiesR0600", None) or lib.hipGetDeviceProperties
    if fn(ctypes.byref(prop), index) != hipSuccess:
        return None
    raw = bytes(prop.raw)
    at = raw.find(b"gfx")
    if at < 0:
        return None
    name = raw[at:raw.find(b"\0", at)].decode(errors="replace")
    return name.split(":")[0]


def device_cu_count(index: int = 0) -> int | None:
    lib = _lib()
    if lib is None:
        return None
    n = ctypes.c_int(0)
    if lib.hipDeviceGetAttribute(ctypes.byref(n), hipDeviceAttributeMultiprocessorCount, index) != hipSuccess:
        return None
    return n.value


class Module:
    """A code object loaded on the current device (hipModuleLoadData)."""

    def __init__(self, data: bytes):
        self._lib = _lib()
        if self._lib is None:
            raise HipError("libamdhip64 not found")
        self._data = ctypes.create_string_buffer(data, len(data))  # keep alive
        self._mod = ctypes.c_void_p()
        _check(self._lib.hipModuleLoadData(ctypes.byref(self._mod), self._data), "hipModuleLoadData")
        self._funcs: dict[str, ctypes.c_void_p] = {}

    def function(self, name: str) -> ctypes.c_void_p:
        f = self._funcs.get(name)
        if f is None:
            f = ctypes.c_void_p()
            _check(self._lib.hipModuleGetFunction(ctypes.byref(f), self._mod, name.encode()),
                   f"hipModuleGetFunction({name})")
            self._funcs[name] = f
        return f

    def launch(self, name: str, grid, block, kernargs: bytes, dynamic_lds: int, stream: int) -> None:
        """Launch with the explicit argument bytes; the runtime appends the hidden arguments."""
        buf = ctypes.create_string_buffer(kernargs, max(len(kernargs), 1))
        size = ctypes.c_size_t(len(kernargs))
        extra = (ctypes.c_void_p * 5)(HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.cast(buf, ctypes.c_void_p),
                                      HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.cast(ctypes.byref(size), ctypes.c_void_p),
                                      HIP_LAUNCH_PARAM_END)
        _check(self._lib.hipModuleLaunchKernel(
            self.function(name), ctypes.c_uint(grid[0]), ctypes.c_uint(grid[1]), ctypes.c_uint(grid[2]),
            ctypes.c_uint(block[0]), ctypes.c_uint(block[1]), ctypes.c_uint(block[2]),
            ctypes.c_uint(dynamic_lds), ctypes.c_void_p(stream), None, extra), f"hipModuleLaunchKernel({name})")
