"""Repository-wide pytest setup: hardware-only tests run only where an AMD GPU is present."""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
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
