"""The gfx942 MLA decode planner: its C++ unit test (built with the host compiler) and the binding."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
HOST = HERE.parent / "csrc" / "host"


def test_cpp_unit_test(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    exe = tmp_path / "mla_planner_test"
    src = HERE / "cpp" / "mla_planner_test.cpp"
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{HOST}", str(src), "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_binding_matches_shapes_only():
    from moonmath_mla_decode import _C

    p = _C.plan_mla_decode(8, 16, 4, 8192)
    assert p.n_rt == 4 and p.rows == 64 and p.nparts > 1 and p.variant in ("wave", "shared")
    assert p.grid * 4 == p.waves == 8 * p.nparts * 4
    assert p.ws_o_floats == 8 * 64 * p.nparts * 512
    # the same shapes give the same plan; a different hint may change the split only
    q = _C.plan_mla_decode(8, 16, 4, 8192)
    assert (q.nparts, q.grid) == (p.nparts, p.grid)
    with pytest.raises(ValueError, match="heads"):
        _C.plan_mla_decode(1, 129, 1)
    with pytest.raises(ValueError, match="heads"):
        _C.plan_mla_decode(1, 0, 1)
    assert _C.mla_plan_cost(8, 16, 4, 8192, p.nparts, variant=p.variant) == pytest.approx(p.cost_ns)
    assert _C.plan_mla_decode(2, 16, 1, 150000).variant == "wave"  # one row tile
