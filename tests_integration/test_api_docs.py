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


GENERATED = ["mla_decode_a16w8", "mla_decode_a16w16", "mla_decode_a8w8", "mla_decode_mxfp4", "mxfp4_moe_gateup",
             "mxfp4_moe_down"]


@pytest.mark.parametrize("name", GENERATED)
def test_op_page_tables_are_generated_from_the_docstring(pages, name):
    """Signature and argument table come from the docstring (tools/gen_op_docs.py), so they cannot drift."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_op_docs", DOCS.parent / "tools" / "gen_op_docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = (DOCS / "ops" / f"{name}.md").read_text()
    m = gen.BLOCK.search(text)
    assert m and m.group(2) == name, f"{name}.md has no generated block"
    assert m.group(3) == gen.render(name), "stale: run python tools/gen_op_docs.py"
