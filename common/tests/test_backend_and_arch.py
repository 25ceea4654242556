"""Backend and arch selection: no silent reference fallback, set_arch/use_arch, NoKernelError's wording,
and arch.py not importing backend.py (the cycle is broken)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import moonmath_common as mc
from moonmath_common import arch, backend
from moonmath_common.errors import BackendUnavailableError, NoKernelError


@pytest.fixture
def no_gpu_no_emu(monkeypatch):
    monkeypatch.delenv("MOONMATH_BACKEND", raising=False)
    monkeypatch.setattr(backend, "live_arch", lambda: None)
    monkeypatch.setattr(backend, "emulator_available", lambda: False)


def test_no_gpu_no_emu_raises_instead_of_running_the_reference(no_gpu_no_emu):
    with pytest.raises(BackendUnavailableError) as e:
        mc.get_backend()
    msg = str(e.value)
    assert "pip install ./packages/emu" in msg and "MOONMATH_BACKEND=reference" in msg
    with mc.use_backend("reference"):          # chosen explicitly: fine
        assert mc.get_backend() == "reference"


def test_backend_choice_reports_its_source(monkeypatch):
    monkeypatch.setenv("MOONMATH_BACKEND", "reference")
    assert backend.backend_choice() == ("reference", "MOONMATH_BACKEND")
    with mc.use_backend("emu"):
        assert backend.backend_choice() == ("emu", "set_backend()")


def test_set_arch_and_use_arch(monkeypatch):
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx942")
    assert arch.arch_choice() == ("gfx942", "MOONMATH_EMU_ARCH")
    with mc.use_arch("gfx950"):
        assert mc.emulated_arch() == "gfx950"
        assert mc.target_arch("emu") == "gfx950" and mc.target_arch("reference") == "gfx950"
    assert mc.emulated_arch() == "gfx942"
    mc.set_arch("gfx950")
    try:
        assert arch.arch_choice() == ("gfx950", "set_arch()")
    finally:
        mc.set_arch(None)
    with pytest.raises(ValueError, match="arch must be one of gfx942, gfx950; got 'gfx90a'"):
        mc.set_arch("gfx90a")
    with pytest.raises(TypeError, match="arch must be a str"):
        mc.use_arch(950).__enter__()


def test_no_kernel_error_not_implemented_vs_not_built():
    e = NoKernelError("op", "gfx950", ["gfx942"], backend="emu")
    assert "not implemented for gfx950 yet" in str(e) and "GPU_ARCHS" not in str(e)
    assert "MOONMATH_BACKEND=emu" not in str(e)          # the user is already on emu
    assert "set_arch('gfx942')" in str(e)
    e = NoKernelError("op", "gfx950", ["gfx942"], buildable=["gfx942", "gfx950"], backend="emu")
    assert e.not_built and "not built for gfx950" in str(e) and 'GPU_ARCHS="gfx950"' in str(e)
    e = NoKernelError("op", "gfx950", [], backend="hip")
    assert "not implemented for gfx950 yet" in str(e) and "MOONMATH_BACKEND=reference" in str(e)


def test_kernelset_knows_which_archs_a_code_object_can_be_built_for(tmp_path, monkeypatch):
    """build_info.json records every supported arch's code objects, so a missing one reads right."""
    import json

    from moonmath_common.kernels import KernelSet

    pkg = tmp_path / "fake_mm_pkg"
    (pkg / "kernels" / "gfx942").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kernels" / "gfx942" / "a.hsaco").write_bytes(b"")
    (pkg / "kernels" / "build_info.json").write_text(json.dumps(
        {"archs": ["gfx942"], "sources": {"gfx942": ["a", "b"], "gfx950": ["a"]}}))
    monkeypatch.syspath_prepend(str(tmp_path))
    ks = KernelSet("fake_mm_pkg")
    with pytest.raises(NoKernelError, match="not built for gfx950"):
        ks.path("op", "gfx950", "a")
    with pytest.raises(NoKernelError, match="not implemented for gfx950 yet"):
        ks.path("op", "gfx950", "b")


def test_kernelset_finds_kernels_on_a_later_path_entry(tmp_path, monkeypatch):
    """An editable install puts the source tree first on __path__ and the built kernels on another entry."""
    from moonmath_common.kernels import KernelSet

    src, built = tmp_path / "src" / "fake_mm_edit", tmp_path / "site" / "fake_mm_edit"
    src.mkdir(parents=True)
    (built / "kernels" / "gfx942").mkdir(parents=True)
    (built / "kernels" / "gfx942" / "k.hsaco").write_bytes(b"")
    (src / "__init__.py").write_text(f"__path__.append({str(built)!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    assert KernelSet("fake_mm_edit").archs_built() == ["gfx942"]


def test_arch_does_not_import_backend():
    tree = ast.parse(Path(arch.__file__).read_text())
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "backend" not in names and "moonmath_common.backend" not in names
