"""One version source per package (__version__, read by the build), and a torch requirement that names
the version CI actually installs."""
from __future__ import annotations

import importlib
import importlib.metadata as md
import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

REPO = Path(__file__).resolve().parents[1]
PYPROJECTS = sorted([REPO / "common" / "pyproject.toml", *(REPO / "packages").glob("*/pyproject.toml")])


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: p.parent.name)
def test_one_version_source(path):
    cfg = tomllib.loads(path.read_text())
    assert "version" not in cfg["project"], "a static version beside __version__ can drift"
    assert "version" in cfg["project"].get("dynamic", [])
    sk = cfg["tool"]["scikit-build"]["metadata"]["version"]
    assert sk["provider"] == "scikit_build_core.metadata.regex"
    init = path.parent / sk["input"]
    assert re.search(r'^__version__ = "[0-9][^"]*"$', init.read_text(), re.M), init


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: p.parent.name)
def test_torch_requirement_is_the_tested_one(path):
    nox = (REPO / "noxfile.py").read_text()
    tested = re.search(r'torch==(\d+\.\d+)', nox).group(1)
    cfg = tomllib.loads(path.read_text())
    reqs = cfg["project"].get("dependencies", []) + sum(cfg["project"].get("optional-dependencies", {}).values(), [])
    for r in (r for r in reqs if r.startswith("torch")):
        assert r == f"torch>={tested}", (r, tested)


@pytest.mark.parametrize("dist,module", [("moonmath-common", "moonmath_common"), ("moonmath-amd", "moonmath_amd"),
                                         ("moonmath-mla-decode", "moonmath_mla_decode"),
                                         ("moonmath-mxfp4-moe", "moonmath_mxfp4_moe")])
def test_installed_metadata_matches_version(dist, module):
    try:
        v = md.version(dist)
    except md.PackageNotFoundError:
        pytest.skip(f"{dist} not installed")
    assert importlib.import_module(module).__version__ == v
