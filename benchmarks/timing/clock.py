"""The clock every timing script simulates and composes at: the calibrated effective clock.

    from benchmarks.timing import clock
    cfg, f_hz, src = clock.effective_config("gfx942")   # run.py's calibration, its fixed point re-checked
    timing.simulate(..., config=cfg); timing.kernel_time(..., cfg)

The simulator turns the chip's HBM bandwidth into bytes per simulated cycle at ``cfg["clock_mhz"]``
(timing.cpp, ``hbm_rate``), and `timing.kernel_time` turns cycles into seconds at the same field. The
effective clock is read as the clock the chip runs at under load (docs/performance.md, "Session 9: HBM at
the effective clock"), and HBM bandwidth belongs to the memory, not the core clock, so HBM bytes per core
cycle are BW / f_eff: the config "at the effective clock" is the config with ``clock_mhz`` = f_eff, for
ours and AITER's objects alike. Latencies and the L2, LDS and vector-memory rates stay in cycles (the
core's clock domain). gfx950's effective clock is gfx942's fraction of its peak clock carried over.

Because the simulation now depends on the clock, run.py's calibration is a fixed point (`run.calibrate`):
simulate at f, fit f' (the median over AITER's MI300X RTNE rows of modeled cycles / published seconds),
repeat until |f' - f| / f < TOL. `effective_hz` takes f from run.py's timing.json in --out when that was
written by the fixed-point calibration; otherwise it starts the iteration at SEED_MHZ (the fixed point run.py
found), which re-checks it in one step of two simulations.
"""
from __future__ import annotations

import json
from pathlib import Path

import moonmath_emu.timing as timing

SEED_MHZ = 1037.8417  # the fixed point run.py found (session 9, from 2100 MHz in three steps); re-checked on use
TOL = 1e-3            # the fixed point's tolerance (0.1 %)


def at_clock(cfg: dict, f_hz: float) -> dict:
    """`cfg` simulated and composed at f_hz (a copy): HBM bytes per cycle = hbm_bytes_per_s / f_hz, seconds =
    cycles / f_hz."""
    if not f_hz > 0:
        raise ValueError(f"clock must be > 0 Hz; got {f_hz}")
    return dict(cfg, clock_mhz=f_hz / 1e6)


def arch_hz(arch: str, f942_hz: float) -> float:
    """The effective clock of `arch` from gfx942's: the same fraction of its peak clock (run.py's rule)."""
    return f942_hz / timing.config("gfx942")["clock_mhz"] * timing.config(arch)["clock_mhz"]


def effective_hz(out: Path | str | None = None) -> tuple[float, str]:
    """gfx942's effective clock (Hz) and where it came from: run.py's timing.json in `out` if the fixed-point
    calibration wrote it, else run.py's calibration started at SEED_MHZ."""
    if out is not None:
        p = Path(out) / "timing.json"
        if p.exists():
            d = json.loads(p.read_text())
            if "fixed_point" in d:  # written by a run.py that simulates at the effective clock
                return d["f_eff_hz"], f"{p} (run.py's fixed point)"
    from . import run as calib
    cal = calib.calibrate(SEED_MHZ * 1e6)
    steps = " -> ".join(f"{f / 1e6:.2f}" for f, _ in cal["history"]) + f" -> {cal['history'][-1][1] / 1e6:.2f}"
    return cal["f_eff_hz"], f"run.py's RTNE calibration, fixed point re-checked ({steps} MHz)"


def effective_config(arch: str, out: Path | str | None = None, **overrides) -> tuple[dict, float, str]:
    """(the config of `arch`, with `overrides`, at its effective clock; that clock in Hz; its source)."""
    f942, src = effective_hz(out)
    f = arch_hz(arch, f942)
    if arch != "gfx942":
        src += f", x {timing.config(arch)['clock_mhz']:.0f} / {timing.config('gfx942')['clock_mhz']:.0f}"
    return at_clock(timing.config(arch, **overrides), f), f, src
