"""Repository-wide pytest setup.

- `gpu`-marked tests run only where an AMD GPU is present.
- `slow`-marked tests (long emulator sweeps) run only when asked: `MOONMATH_RUN_SLOW=1` or `-m slow`.
"""
from __future__ import annotations

import os

import pytest


def _slow_requested(config) -> bool:
    return os.environ.get("MOONMATH_RUN_SLOW") == "1" or "slow" in (config.getoption("-m") or "")


def pytest_collection_modifyitems(config, items):
    if not _slow_requested(config):
        skip_slow = pytest.mark.skip(reason="slow emulator sweep (MOONMATH_RUN_SLOW=1 or -m slow runs it)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip_slow)
    try:
        from moonmath_common.arch import live_arch

        gpu = live_arch()
    except Exception:  # noqa: BLE001 - no runtime installed means no GPU either
        gpu = None
    if gpu:
        return
    skip = pytest.mark.skip(reason="needs an AMD GPU (marker gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def lanes_checked(monkeypatch):
    """Every emulator launch of the test under the lane checker (docs/emulator.md, "Lane checker"): a store of
    lanes whose values depend on register lanes an MFMA read while never written or stale raises
    moonmath_emu.LaneError. Set through MOONMATH_EMU_CHECK_LANES, so launches through the ops are checked too."""
    monkeypatch.setenv("MOONMATH_EMU_CHECK_LANES", "1")
