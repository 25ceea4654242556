"""Fixtures for the moonmath-emu tests.

- `arch`: parametrised over gfx942 and gfx950.
- `build`: compile HIP source text for an arch (core tests, `_emu_build.compile_hip`).
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _emu_build import compile_hip  # noqa: E402


@pytest.fixture(params=["gfx942", "gfx950"])
def arch(request):
    return request.param


@pytest.fixture
def build():
    return compile_hip
