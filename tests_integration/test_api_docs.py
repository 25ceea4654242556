"""Every public op of moonmath_amd has a row in docs/api-status.md and is documented on an op page."""
from __future__ import annotations

from pathlib import Path

import pytest

import moonmath_amd as ma

DOCS = Path(__file__).resolve().parents[1] / "docs"
RUNTIME = {"BACKENDS", "BackendUnavailableError", "MoonmathError", "NoKernelError", "emulated_arch", "get_backend",
           "live_arch", "set_arch", "set_backend", "target_arch", "use_arch", "use_backend", "ATTENTION_ARCHS",
           "ArchFeatureError"}
OPS = sorted(n for n in ma.__all__ if n not in RUNTIME)


@pytest.fixture(scope="module")
def pages():
    if not (DOCS / "api-status.md").exists():
        pytest.skip("docs/ not present (installed package without the repository)")
    return (DOCS / "api-status.md").read_text(), {p.name: p.read_text() for p in (DOCS / "ops").glob("*.md")}


@pytest.mark.parametrize("name", OPS)
def test_op_is_documented(pages, name):
    status, op_pages = pages
    short = name.removeprefix("mxfp4_moe_")
    assert f"`{name}`" in status or f"`_{short}`" in status or f"`{short}`" in status, f"{name} not in api-status"
    assert any(name in text for text in op_pages.values()), f"{name} has no op page"
