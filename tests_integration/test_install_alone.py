"""Each package installs alone into a fresh venv (no ROCm) and holds a code object per declared arch.

"Alone" means the package plus what it declares: moonmath-common (the runtime every op package
imports) and torch (the local CPU build, installed first so pip never reaches for a CUDA build).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TORCH = os.environ.get("MOONMATH_TORCH_SPEC", "torch==2.13.0")
OP_PACKAGES = {
    "mha-gfx942": ("moonmath_mha_gfx942", ["gfx942"]),
    "attention-gfx950": ("moonmath_attention_gfx950", ["gfx950"]),
    "mla-decode": ("moonmath_mla_decode", ["gfx942", "gfx950"]),
    "mxfp4-moe": ("moonmath_mxfp4_moe", ["gfx942"]),
}
ALL_MICRO = [m for m, _ in OP_PACKAGES.values()] + ["moonmath_emu", "moonmath_amd"]


def _venv(tmp_path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    py = tmp_path / "venv" / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", TORCH], check=True)
    return py


def _declared_kernels(pkg: str) -> list[Path]:
    return sorted((REPO / "packages" / pkg / "csrc" / "device").glob("**/*.hip"))


@pytest.mark.parametrize("pkg", list(OP_PACKAGES))
def test_op_package_installs_alone_with_its_code_objects(pkg, tmp_path):
    module, archs = OP_PACKAGES[pkg]
    if not _declared_kernels(pkg):
        archs = []  # no device sources yet: its ops are reference-only (docs/api-status.md)
    py = _venv(tmp_path)
    env = dict(os.environ, GPU_ARCHS="")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(REPO / "common"), str(REPO / "packages" / pkg)], check=True, env=env)
    others = [m for m in ALL_MICRO if m != module]
    probe = textwrap.dedent(f"""
        import importlib.util, sys
        import {module}
        from moonmath_common.kernels import KernelSet
        ks = KernelSet("{module}")
        built = ks.archs_built()
        missing = [a for a in {archs!r} if a not in built]
        assert not missing, f"no code objects for {{missing}} (built: {{built}})"
        for a in {archs!r}:
            assert ks.code_objects(a), a
        assert ks.build_info().get("compiler"), ks.build_info()
        installed = [m for m in {others!r} if importlib.util.find_spec(m) is not None]
        assert not installed, f"other moonmath packages were pulled in: {{installed}}"
        print(built, [p.name for a in built for p in ks.code_objects(a)])
    """)
    r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_emulator_installs_alone(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    py = tmp_path / "venv" / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(REPO / "packages" / "emu")], check=True)
    r = subprocess.run([str(py), "-c", "import moonmath_emu, sys; print(moonmath_emu.__file__)"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
