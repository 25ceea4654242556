from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HIPCC = REPO / "common" / "cmake" / "moonmath_hipcc.py"
INCLUDE = REPO / "common" / "include"


@pytest.fixture(scope="session")
def compile_hip(tmp_path_factory):
    """compile_hip(src, arch) -> code object bytes (cached per session)."""
    out_dir = tmp_path_factory.mktemp("hsaco")
    cache: dict = {}

    def build(src: Path, arch: str) -> bytes:
        key = (src, arch)
        if key not in cache:
            out = out_dir / f"{src.stem}_{arch}.hsaco"
            subprocess.run([sys.executable, str(HIPCC), "--arch", arch, "-I", str(INCLUDE), "-o", str(out), str(src)],
                           check=True)
            cache[key] = out.read_bytes()
        return cache[key]

    return build
