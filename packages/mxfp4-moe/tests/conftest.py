"""Fixtures shared by the MoE tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def planners_c():
    """The package's pybind11 module holding the pure C++ planners."""
    from moonmath_mxfp4_moe import _C

    return _C


@pytest.fixture
def planners_py(planners_c, monkeypatch):
    """The Python planner wrappers, bound to that module."""
    from moonmath_mxfp4_moe import planners

    monkeypatch.setattr(planners, "_c", lambda: planners_c)
    return planners


KERNEL_ARCHS = ("gfx942", "gfx950")


@pytest.fixture(params=KERNEL_ARCHS)
def kernel_arch(request, monkeypatch):
    """Each kernel test once per arch with MoE kernels: on the emulator by MOONMATH_EMU_ARCH, on a GPU only
    its own arch (the other is skipped)."""
    from moonmath_common import get_backend, target_arch

    if get_backend() == "hip":
        if target_arch() != request.param:
            pytest.skip(f"the GPU here is {target_arch()}")
    else:
        monkeypatch.setenv("MOONMATH_EMU_ARCH", request.param)
    return request.param
