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


def _gen():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_op_docs", DOCS.parent / "tools" / "gen_op_docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


# page -> the callables whose signature and argument table it shows, generated from their docstrings
GENERATED = {
    "mla_decode_a16w8.md": ["moonmath_amd.mla_decode_a16w8"],
    "mla_decode_a16w16.md": ["moonmath_amd.mla_decode_a16w16"],
    "mla_decode_a8w8.md": ["moonmath_amd.mla_decode_a8w8"],
    "mla_decode_mxfp4.md": ["moonmath_amd.mla_decode_mxfp4"],
    "mla_dcp_lse_merge_ranks.md": ["moonmath_amd.mla_dcp_lse_merge_ranks"],
    "moe_align_block_size.md": ["moonmath_amd.moe_align_block_size"],
    "mxfp4_moe_planners.md": [f"moonmath_amd.{n}" for n in (
        "mxfp4_moe_gateup_block_m", "mxfp4_moe_gateup_supports_k", "mxfp4_moe_down_block_m", "mxfp4_moe_down_nt",
        "mxfp4_moe_down_n_steps", "mxfp4_moe_down_plan")],
    "repack_mxfp4.md": [f"moonmath_amd.{n}" for n in (
        "repack_mxfp4", "repack_mxfp4_scales", "unrepack_mxfp4", "unrepack_mxfp4_scales")],
    "mxfp4_moe_gateup.md": ["moonmath_amd.mxfp4_moe_gateup"],
    "mxfp4_moe_down.md": ["moonmath_amd.mxfp4_moe_down"],
    "mxfp4_moe_a4w4.md": [f"moonmath_amd.{n}" for n in (
        "mxfp4_quantize", "mxfp4_moe_gateup_a4w4", "mxfp4_moe_down_a4w4")] + [f"moonmath_mxfp4_moe.{n}" for n in (
        "mxfp4_moe_layer_a4w4", "mxfp8_quantize", "mxfp4_moe_gateup_a8w4", "mxfp4_moe_down_a8w4")],
    "fused_moe.md": ["moonmath_amd.fused_moe"],
    "forward.md": ["moonmath_amd.forward", "moonmath_mha_gfx942.forward", "moonmath_attention_gfx950.forward"],
    "forward_varlen.md": ["moonmath_amd.forward_varlen"],
    "forward_paged.md": ["moonmath_amd.forward_paged"],
    "VarlenPlan.md": ["moonmath_amd.VarlenPlan.plan", "moonmath_amd.VarlenPlan.run"],
}
# the attention ops document what they return and raise as well
WITH_RAISES = GENERATED["forward.md"] + GENERATED["forward_varlen.md"] + GENERATED["forward_paged.md"] \
    + GENERATED["VarlenPlan.md"]
TARGETS = [t for ts in GENERATED.values() for t in ts]


@pytest.mark.parametrize("page", sorted(GENERATED))
def test_op_page_tables_are_generated_from_the_docstring(pages, page):
    """Signature and argument table come from the docstring (tools/gen_op_docs.py), so they cannot drift."""
    gen = _gen()
    text = (DOCS / "ops" / page).read_text()
    blocks = gen.blocks(text)
    assert [m.group(2) for m in blocks] == GENERATED[page], f"{page}: generated blocks"
    for m in blocks:
        assert m.group(3) == gen.render(m.group(2)), f"{page}: stale {m.group(2)}: run python tools/gen_op_docs.py"


@pytest.mark.parametrize("target", TARGETS)
def test_docstring_documents_every_argument(target):
    """Each generated table has a row for every parameter of the signature and none that is not one."""
    gen = _gen()
    fn, _, _ = gen.resolve(target)
    documented = gen.documented_args(fn)
    assert sorted(documented) == sorted(gen.signature_params(fn)), f"{target}: Args section vs signature"
    if target in WITH_RAISES:
        doc = fn.__doc__ or ""
        assert gen._section(doc, "Returns") and gen._entries(gen._section(doc, "Raises")), target
        params = gen.signature_params(fn)
        assert all(("bf16" in t or "int32" in t or "fp32" in t) for n, t in gen.args_section(doc, params)
                   if n.strip() in ("q", "k", "v", "k_cache", "v_cache", "cu_seqlens_q, cu_seqlens_k",
                                    "cu_seqlens_q", "seqlens_k", "sinks")), f"{target}: a tensor without its dtype"


def test_a_changed_docstring_makes_the_docs_check_fail(monkeypatch, pages, capsys):
    """The guard works: with an op's docstring changed and the pages not regenerated, --check fails."""
    gen = _gen()
    assert gen.main(["--check"]) == 0
    import moonmath_attention_gfx950 as att

    monkeypatch.setattr(att.VarlenPlan.run, "__doc__", att.VarlenPlan.run.__doc__.replace("as planned", "as given"))
    assert gen.main(["--check"]) == 1
    assert "VarlenPlan.md" in capsys.readouterr().out
