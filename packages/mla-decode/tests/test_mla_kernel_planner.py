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


def _calibration():
    import importlib.util

    path = HERE.parent / "benchmarks" / "calibrate_mla_planner_emu.py"
    spec = importlib.util.spec_from_file_location("calibrate_mla_planner_emu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cost_constants_match_the_emulator(monkeypatch):
    """The planner's per-tile, per-part and merge issue cycles are the emulator's (within 10%): a
    kernel change that moves them must re-calibrate the planner (benchmarks/calibrate_mla_planner_emu.py)."""
    pytest.importorskip("moonmath_emu")
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx942")
    from moonmath_mla_decode import _C

    measured = _calibration().measured()
    constants = _C.mla_cost_constants()
    assert set(measured) == set(constants)
    for name, v in measured.items():
        assert abs(constants[name] - v) <= 0.10 * v, f"{name}: planner {constants[name]:.0f}, emulator {v:.0f}"


def test_split_stops_where_the_fixed_cost_outweighs_it():
    """With the measured per-part and merge costs in the model, the planner takes the fewest parts
    (with no empty part) within 10% of the modelled minimum; a longer request gets longer parts, a full
    batch no split."""
    from moonmath_mla_decode import _C

    for q_len in (1, 2, 4):
        for S in (1024, 8192):
            p = _C.plan_mla_decode(2, 16, q_len, S)
            costs = {(v, n): _C.mla_plan_cost(2, 16, q_len, S, n, variant=v)
                     for v in (("shared", "wave") if q_len > 1 else ("wave",)) for n in range(1, S // 16 + 1)
                     if -(-(S // 16) // -(-(S // 16) // n)) == n}  # no empty part
            best = min(costs.values())
            assert p.cost_ns <= 1.10 * best
            assert all(c > 1.10 * best for (v, n), c in costs.items() if n < p.nparts)
    # a longer request: more tiles per part (the fixed cost is spread thinner)
    assert 512 / _C.plan_mla_decode(2, 16, 1, 8192).nparts > 64 / _C.plan_mla_decode(2, 16, 1, 1024).nparts
    assert _C.plan_mla_decode(1, 16, 1, 150000).nparts >= 64
    assert _C.plan_mla_decode(512, 16, 4, 4096).nparts == 1
