"""The hardware benchmark script exits cleanly, saying why, on a machine without a gfx950 GPU."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_attention_gfx950.py"


@pytest.mark.skipif(not BENCH.exists(), reason="benchmarks/ is not beside the tests (installed package)")
def test_hardware_bench_skips_without_gpu():
    from moonmath_common.arch import live_arch

    if live_arch() == "gfx950":
        pytest.skip("a gfx950 GPU is present: the script would time for real")
    r = subprocess.run([sys.executable, str(BENCH), "--shape", "1:2:2:128:128:128:0"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "skipped (" in r.stdout and "nothing timed" in r.stdout
