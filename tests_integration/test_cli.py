"""The CLI tried as a new user would: --help on every verb, info says where the backend and arch came
from, and the demo never reports PASS for a row without a kernel."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import moonmath_amd as ma
from moonmath_amd import demo
from moonmath_amd.__main__ import main


@pytest.mark.parametrize("argv", [["--help"], ["info", "--help"], ["demo", "--help"]])
def test_help_on_every_verb(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out and len(out.splitlines()) >= 3


def _info(env_overrides):
    env = {k: v for k, v in os.environ.items() if k not in ("MOONMATH_BACKEND", "MOONMATH_EMU_ARCH")}
    env.update(env_overrides)
    r = subprocess.run([sys.executable, "-m", "moonmath_amd", "info"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_info_says_where_backend_and_arch_came_from():
    out = _info({"MOONMATH_BACKEND": "reference", "MOONMATH_EMU_ARCH": "gfx950"})
    assert "current:   reference (from MOONMATH_BACKEND)" in out
    assert "arch:      gfx950 (from MOONMATH_EMU_ARCH)" in out
    out = _info({})
    if ma.live_arch() is None:
        assert "current:   emu (from default: no AMD GPU, moonmath-emu installed)" in out
        assert "arch:      gfx942 (from default)" in out


def test_demo_on_reference_reports_no_pass(capsys):
    with ma.use_backend("reference"):
        assert demo.run_demo(["gfx942"]) == 0
    out = capsys.readouterr().out
    assert "PASS" not in out and "reference only" in out


def test_demo_reports_no_kernel_rows_for_what_the_packages_lack(capsys, monkeypatch):
    """Whatever the installed packages lack shows as "no kernel", never PASS (here: a case forced to lack it)."""
    def lacking():
        raise ma.NoKernelError("fake_op", ma.target_arch(), [], backend="emu")

    fake = demo.Case("fake_op", "-", ("gfx942",), lacking, lambda g, r: ("", True))
    monkeypatch.setattr(demo, "cases", lambda: [fake])
    with ma.use_backend("emu"):
        assert demo.run_demo(["gfx942"]) == 1      # nothing passed: not a success
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("fake_op"))
    assert "no kernel" in line and "not implemented for this arch yet" in line and "PASS" not in line


@pytest.mark.parametrize("module", ["moonmath_common", "moonmath_amd", "moonmath_emu", "moonmath_mha_gfx942",
                                    "moonmath_attention_gfx950", "moonmath_mla_decode", "moonmath_mxfp4_moe"])
def test_package_is_typed(module):
    """PEP 561: the installed package ships py.typed, so type checkers read its annotations."""
    import importlib
    from pathlib import Path

    mod = importlib.import_module(module)
    assert any((Path(p) / "py.typed").is_file() for p in mod.__path__), module
