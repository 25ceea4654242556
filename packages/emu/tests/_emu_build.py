"""Helpers for the moonmath-emu core tests: compile HIP test kernels with the product toolchain."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"


def _repo_root() -> Path:
    p = HERE
    for _ in range(6):
        if (p / "common" / "cmake" / "moonmath_hipcc.py").exists():
            return p
        p = p.parent
    raise RuntimeError("repository root (common/cmake/moonmath_hipcc.py) not found")


_CACHE = Path(os.environ.get("MOONMATH_EMU_TEST_CACHE", "/tmp/moonmath-emu-test-cache"))


def compile_hip(src: str, arch: str, extra: tuple[str, ...] = ()) -> bytes:
    """Compile HIP source text for `arch` with common/cmake/moonmath_hipcc.py (cached by content)."""
    _CACHE.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256((src + arch + " ".join(extra)).encode()).hexdigest()[:20]
    out = _CACHE / f"{key}-{arch}.hsaco"
    if not out.exists():
        sp = _CACHE / f"{key}.hip"
        sp.write_text(src)
        cmd = [sys.executable, str(_repo_root() / "common" / "cmake" / "moonmath_hipcc.py"), "--arch", arch,
               "-o", str(out) + ".tmp", str(sp)]
        if extra:
            cmd += ["--", *extra]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"compile failed for {arch}:\n{r.stdout}\n{r.stderr}")
        os.replace(str(out) + ".tmp", out)
    return out.read_bytes()


def kernel_source(name: str) -> str:
    return (KERNELS / name).read_text()




def compile_path(path: Path, arch: str, includes: tuple[str, ...] = ()) -> bytes:
    """Compile a HIP file in place (its own includes resolve), without caching."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "k.hsaco"
        cmd = [sys.executable, str(_repo_root() / "common" / "cmake" / "moonmath_hipcc.py"), "--arch", arch,
               "-o", str(out), str(path)]
        for inc in includes:
            cmd += ["-I", inc]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"compile failed for {arch}:\n{r.stdout}\n{r.stderr}")
        return out.read_bytes()
