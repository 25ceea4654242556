"""The emu backend's device memory model: ``EmuDeviceTensor`` (index tensors, device scalars such as kv_scale).

On the emulator every tensor lives in host memory, so "cu_seqlens on the GPU" needs a marker. An
``EmuDeviceTensor`` (``as_emu_device(t)``) is a CPU tensor that the ops treat as device-resident
(planned on the device, never read by the host) and that *refuses* every host read: any torch
operation on it other than reading its metadata (dtype, shape, strides, device, data_ptr) raises
``HostReadError``. Kernels still reach its data through data_ptr(), as they would on a GPU. Tests use it
to prove a path makes no host read (no sync) of device values. It lives in moonmath-common so every
package's ops and tests share one model.
"""
from __future__ import annotations

import torch

_META_PROPERTIES = {"dtype", "shape", "device", "ndim", "is_cuda", "layout", "requires_grad", "is_sparse",
                    "is_quantized", "is_meta", "is_nested", "names"}
_META_METHODS = {"dim", "numel", "is_contiguous", "data_ptr", "stride", "size", "element_size", "storage_offset",
                 "nelement",
                 "untyped_storage"}   # the emulator (the device side) maps the tensor's storage for the kernel


class HostReadError(RuntimeError):
    """A host read of a tensor modelled as device memory (a device sync on a GPU)."""


class EmuDeviceTensor(torch.Tensor):
    """A CPU tensor modelling device memory on the emu backend: metadata only, no host reads."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if isinstance(func, torch._ops.OpOverload) and func.namespace == "moonmath":
            # Our own custom ops: the dispatcher hands the tensors on; what the op's body reads on the host is
            # not intercepted past this boundary (the ops take device index tensors by data_ptr only).
            ok = True
        elif name == "__get__":
            prop = getattr(getattr(func, "__self__", None), "__name__", "")
            ok = prop in _META_PROPERTIES
            name = prop or name
        else:
            ok = name in _META_METHODS
        if not ok:
            raise HostReadError(f"host read of a device-resident tensor: {name} (a device sync on a GPU)")
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def as_emu_device(t: torch.Tensor) -> EmuDeviceTensor:
    """View CPU tensor t as device-resident for the emu backend (shares t's memory)."""
    return t.as_subclass(EmuDeviceTensor)


def device_resident(t: torch.Tensor | None) -> bool:
    """True for tensors the host must not read: on a GPU, or modelled as device memory on the emulator."""
    return t is not None and (t.device.type != "cpu" or isinstance(t, EmuDeviceTensor))
