"""Each package installs alone into a fresh venv (no ROCm) and holds a code object per declared arch;
`pip install moonmath-amd` from the checkout runs the README's MLA example on kernels (the emulator).

"Alone" means the package plus what it declares: moonmath-common (the runtime every op package
imports) and torch (the local CPU build, installed first so pip never reaches for a CUDA build).
Every wheel is built once per test run (the `wheelhouse` fixture) and the venvs install from it.
"""
from __future__ import annotations

import importlib.util
import os
import re
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


DISTS = {"common": "common", "emu": "packages/emu", "moonmath-amd": "packages/moonmath-amd",
         **{p: f"packages/{p}" for p in OP_PACKAGES}}


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    """One wheel per distribution, built once for all the install tests (GPU_ARCHS unset: every arch)."""
    out = tmp_path_factory.mktemp("wheelhouse")
    have_build_deps = all(importlib.util.find_spec(m) for m in ("scikit_build_core", "pybind11", "ziglang"))
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps", "-w", str(out)]
    if have_build_deps:
        cmd.append("--no-build-isolation")
    env = dict(os.environ, GPU_ARCHS="")
    subprocess.run(cmd + [str(REPO / d) for d in DISTS.values()], check=True, env=env)
    return out


def _install(py: Path, wheelhouse: Path, *names: str) -> None:
    """Install distributions by name from the wheelhouse (torch is already in the venv)."""
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
                    "--find-links", str(wheelhouse), *names], check=True)


@pytest.fixture(scope="session")
def torch_venv(tmp_path_factory) -> Path:
    """A venv with torch and numpy only (from the usual index), made once: each test gets a hard-linked copy,
    so torch is installed once per run instead of once per test."""
    base = tmp_path_factory.mktemp("torch_venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(base)], check=True)
    subprocess.run([str(base / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", TORCH,
                    "numpy"], check=True)
    return base


def _venv(tmp_path: Path, torch_venv: Path) -> Path:
    """A fresh venv holding torch and numpy: a hard-linked copy of torch_venv (files shared read-only; pip
    only adds files to it). Always run it as `<venv>/bin/python -m ...` (script shebangs name the original)."""
    dst = tmp_path / "venv"
    subprocess.run(["cp", "-al", str(torch_venv), str(dst)], check=True)
    return dst / "bin" / "python"


def _declared_kernels(pkg: str) -> list[Path]:
    return sorted((REPO / "packages" / pkg / "csrc" / "device").glob("**/*.hip"))


@pytest.mark.parametrize("pkg", list(OP_PACKAGES))
def test_op_package_installs_alone_with_its_code_objects(pkg, tmp_path, wheelhouse, torch_venv):
    module, archs = OP_PACKAGES[pkg]
    # the archs that have device sources (a package's kernels are being written arch by arch)
    archs = [a for a in archs if any(p.parent.name in (a, "device") for p in _declared_kernels(pkg))]
    py = _venv(tmp_path, torch_venv)
    _install(py, wheelhouse, f"moonmath-{pkg}")
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


def test_emulator_installs_alone(tmp_path, wheelhouse):
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    py = tmp_path / "venv" / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "numpy"], check=True)
    _install(py, wheelhouse, "moonmath-emu")
    r = subprocess.run([str(py), "-c", "import moonmath_emu, sys; print(moonmath_emu.__file__)"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def _readme_mla_example() -> str:
    """The README's MLA decode example (the python block that calls mla_decode_a16w8)."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    mla = [b for b in blocks if "mla_decode_a16w8(" in b]
    assert mla, "README.md has no python example calling mla_decode_a16w8"
    return mla[0]


def test_metapackage_runs_the_readme_mla_example_on_kernels(tmp_path, wheelhouse, torch_venv):
    """pip install moonmath-amd in a CPU-only venv brings the emulator: the example runs the gfx942 kernel."""
    py = _venv(tmp_path, torch_venv)
    _install(py, wheelhouse, "moonmath-amd")
    probe = _readme_mla_example() + textwrap.dedent("""
        import moonmath_amd as ma
        from moonmath_mla_decode.kernel import KERNELS
        assert ma.get_backend() == "emu", ma.get_backend()
        assert KERNELS.last_counters and KERNELS.last_counters["wave_instructions"] > 0, KERNELS.last_counters
        print("ran on", ma.get_backend(), ma.target_arch())
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("MOONMATH_BACKEND", "MOONMATH_EMU_ARCH")}
    r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
