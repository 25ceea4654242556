"""The MLA decode tests' helpers live in _mla_formats.py (this directory is put on sys.path)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest  # noqa: E402


@pytest.fixture
def gfx950(monkeypatch):
    """The emulator's target arch set to gfx950 (skips without moonmath-emu)."""
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    pytest.importorskip("moonmath_emu")
