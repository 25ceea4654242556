"""The issue-rate model reproduces the published peaks it is built from."""
from __future__ import annotations

import pytest

from moonmath_common.perfmodel import model


@pytest.mark.parametrize("arch,op,peak_tflops", [("gfx942", "v_mfma_f32_16x16x16_bf16", 1307),
                                                 ("gfx950", "v_mfma_f32_16x16x32_bf16", 2500)])
def test_pure_mfma_stream_runs_at_the_dense_peak(arch, op, peak_tflops):
    m = model({"mfma_by_opcode": {op: 10**9}}, arch)
    assert m["bound"] == "compute"
    assert m["tflops"] == pytest.approx(peak_tflops, rel=0.02)


def test_memory_bound_launch_runs_at_hbm_bandwidth():
    m = model({"valu": 1000}, "gfx942", hbm_bytes=5.3e12)
    assert m["bound"] == "memory" and m["modeled_s"] == pytest.approx(1.0)
    assert m["tbps"] == pytest.approx(5.3)


def test_transcendentals_cost_more_than_plain_valu():
    plain = model({"valu": 1000}, "gfx942")["compute_s"]
    trans = model({"valu": 1000, "trans": 1000}, "gfx942")["compute_s"]
    assert trans == pytest.approx(4 * plain)
