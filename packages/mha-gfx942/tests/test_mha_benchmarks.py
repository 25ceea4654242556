"""The hardware benchmark skips cleanly (exit 0, a stated reason) on a machine without a gfx942 GPU."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_mha_hw.py"


def test_hardware_benchmark_skips_without_gpu():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_mha_hw
    finally:
        sys.path.pop(0)
    if bench_mha_hw.gpu_reason() is None:
        pytest.skip("a gfx942 GPU is present: the benchmark would time it")
    r = subprocess.run([sys.executable, str(BENCH)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("skipped: "), (r.stdout, r.stderr)
