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
