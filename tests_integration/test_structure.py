"""Shared things once: one CMake package finds moonmath-common for every op package."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OP_CMAKE = sorted(p for p in (REPO / "packages").glob("*/CMakeLists.txt")
                  if "moonmath_add_code_objects" in p.read_text())


def test_common_ships_the_cmake_package():
    cfg = REPO / "common" / "cmake" / "MoonmathCommonConfig.cmake"
    assert cfg.is_file() and "MoonmathCodeObjects.cmake" in cfg.read_text()
    assert '"cmake.prefix"' in (REPO / "common" / "pyproject.toml").read_text()


@pytest.mark.parametrize("path", OP_CMAKE, ids=lambda p: p.parent.name)
def test_op_package_finds_common_with_find_package(path):
    text = path.read_text()
    assert "find_package(MoonmathCommon CONFIG REQUIRED)" in text
    assert "execute_process" not in text and "common_dir()" not in text, "the old hand-written prologue is back"
