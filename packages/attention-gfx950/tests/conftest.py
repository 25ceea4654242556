"""Fixtures of the gfx950 attention tests; helpers live in _attn_testing.py (this directory is put on sys.path)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def emu_gfx950(monkeypatch):
    """The emulator backend emulating gfx950 (the kernel tests' backend)."""
    pytest.importorskip("moonmath_emu", reason="the emulator backend needs moonmath-emu")
    from moonmath_common import use_backend

    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    with use_backend("emu"):
        yield
