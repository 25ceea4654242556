"""Fixtures of the gfx942 MHA tests; helpers live in _mha_testing.py (this directory is put on sys.path)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def emu_backend():
    pytest.importorskip("moonmath_emu", reason="the emulator backend needs moonmath-emu")
    from moonmath_common import use_backend
    from moonmath_mha_gfx942.kernel import ARCH, KERNELS

    if ARCH not in KERNELS.archs_built():
        pytest.skip("this build has no gfx942 code objects")
    with use_backend("emu"):
        yield
