"""moonmath_common.emu_device: the emu backend's model of device memory refuses host reads."""
import numpy as np
import pytest
import torch

from moonmath_common.emu_device import EmuDeviceTensor, HostReadError, as_emu_device, device_resident


def test_metadata_is_readable_values_are_not():
    base = torch.tensor([0, 3, 5], dtype=torch.int32)
    t = as_emu_device(base)
    assert isinstance(t, EmuDeviceTensor) and device_resident(t) and not device_resident(base)
    assert (t.dtype, tuple(t.shape), t.numel(), t.data_ptr()) == (torch.int32, (3,), 3, base.data_ptr())
    for read in (lambda: t.tolist(), lambda: t[1], lambda: t.sum(), lambda: t.cpu(), lambda: float(t[0]),
                 lambda: t.item(), lambda: np.asarray(t)):
        with pytest.raises(HostReadError):
            read()


def test_scalar_device_tensor_refuses_float():
    s = as_emu_device(torch.tensor([0.5], dtype=torch.float32))
    with pytest.raises(HostReadError):
        float(s)
    assert device_resident(s) and not device_resident(None)
