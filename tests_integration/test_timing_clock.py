"""benchmarks/timing/clock.py and run.py's fixed-point calibration (session 9: every launch simulated at the
effective clock), on synthetic fits (no emulator run): the config at a clock, the composition at it, and the
calibration's iteration to a fixed point of a clock-dependent fit."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks.timing

timing = pytest.importorskip("moonmath_emu.timing")
from benchmarks.timing import clock  # noqa: E402
from benchmarks.timing import run as calib  # noqa: E402


def test_config_at_a_clock_charges_hbm_in_seconds_and_cycles_at_that_clock():
    cfg = timing.config("gfx942")
    c = clock.at_clock(cfg, 1.0e9)
    assert c["clock_mhz"] == 1000.0 and cfg["clock_mhz"] == 2100.0  # a copy; every other constant as it was
    assert {k: v for k, v in c.items() if k != "clock_mhz"} == {k: v for k, v in cfg.items() if k != "clock_mhz"}
    # cycles to seconds at the config's clock; an HBM-bound launch at the chip's bytes/s whatever the clock
    t = timing.kernel_time(304, 1.0e6, 1, c)
    assert t["seconds"] == pytest.approx(1.0e-3)
    t = timing.kernel_time(304, 1.0, 1, c, hbm_bytes=5.3e9)
    assert t["bound"] == "hbm" and t["seconds"] == pytest.approx(1.0e-3)
    with pytest.raises(ValueError):
        clock.at_clock(cfg, 0.0)
    # gfx950: the gfx942 fraction of the peak clock
    assert clock.arch_hz("gfx950", 1.05e9) == pytest.approx(1.05e9 / 2100 * 2400)


def _fake_fit(b_at):
    """A linear_fit stand-in whose per-key cycles depend on the simulated clock (as an HBM share would)."""
    def fit(arch, mode, cfg, dqk=128):
        return {"a": 0.0, "b": b_at(cfg["clock_mhz"] * 1e6)}
    return fit


def test_calibration_iterates_to_a_fixed_point(monkeypatch):
    # cycles per key 300 at any clock: one step from the peak clock, then the check step
    monkeypatch.setattr(calib, "linear_fit", _fake_fit(lambda f: 300.0))
    cal = calib.calibrate()
    assert cal["history"][0][0] == 2100e6 and len(cal["history"]) == 2
    f1 = cal["history"][0][1]
    assert cal["f_eff_hz"] == f1 and cal["residual"] == 0.0
    # cycles per key that fall with the clock (more HBM bytes per cycle): the fit moves again, then settles
    b_at = lambda f: 80.0 * (1 + 0.01 * f / 2.1e9)  # noqa: E731
    monkeypatch.setattr(calib, "linear_fit", _fake_fit(b_at))
    cal = calib.calibrate()
    f, f_next = cal["history"][-1]
    assert abs(f_next - f) / f < clock.TOL and len(cal["history"]) >= 3
    assert cal["f_eff_hz"] == f and f < cal["history"][0][1]  # below the first step's clock, fitted at the peak
    assert calib.rtne_clock({"a": 0.0, "b": b_at(f)}) == pytest.approx(f, rel=clock.TOL)
    # a fit that never settles is reported, not returned
    monkeypatch.setattr(calib, "linear_fit", _fake_fit(lambda f: 300.0 * (2.1e9 / f) ** 1.5))
    with pytest.raises(RuntimeError):
        calib.calibrate(max_steps=4)


def test_effective_hz_reads_only_a_fixed_point_calibration(tmp_path, monkeypatch):
    import json

    monkeypatch.setattr(calib, "linear_fit", _fake_fit(lambda f: 300.0))
    (tmp_path / "timing.json").write_text(json.dumps({"f_eff_hz": 1.0e9}))  # an old run.py's: recomputed
    f, src = clock.effective_hz(tmp_path)
    assert f != 1.0e9 and "re-checked" in src
    (tmp_path / "timing.json").write_text(json.dumps({"f_eff_hz": 1.0e9, "fixed_point": {}}))
    assert clock.effective_hz(tmp_path)[0] == 1.0e9
    cfg, f950, _ = clock.effective_config("gfx950", tmp_path, kernel_launch_us=0.0)
    assert cfg["clock_mhz"] == pytest.approx(1.0e3 / 2100 * 2400) and cfg["kernel_launch_us"] == 0.0
