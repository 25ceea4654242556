"""The main job: the demo runs every op on the emulator and every kernel matches its reference."""
from __future__ import annotations

from moonmath_amd.demo import run_demo
from moonmath_common import use_backend


def test_demo_on_the_emulator_passes(capsys):
    with use_backend("emu"):
        assert run_demo() == 0
    out = capsys.readouterr().out
    # the kernels that exist today actually ran (not only the reference)
    for op in ("mla_dcp_lse_merge_ranks", "mla_decode_a16w8", "mxfp4_moe_gateup", "mxfp4_moe_down",
               "forward (gfx942", "forward (gfx942: window", "forward (gfx950: causal", "forward (gfx950: window",
               "forward (gfx950: fp8",
               "forward_varlen (gfx950)", "VarlenPlan.run (gfx950)",
               "forward_paged (gfx950)", "mla_decode_a16w16", "mla_decode_a8w8", "mla_decode_mxfp4",
               "mxfp4_quantize", "fused_moe (a16w4", "fused_moe (a4w4"):
        assert any(op in line and "PASS" in line for line in out.splitlines()), op
    assert "0 failed" in out
