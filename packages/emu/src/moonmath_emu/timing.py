"""The trace-driven timing model of moonmath-emu: modeled cycles for a launch on MI300X / MI355X.

    from moonmath_emu import timing
    rep = timing.simulate(mod, "kernel", grid, block, args, cus=[[(0, 0, 0)]])
    rep["cu_cycles"], rep["stall"], rep["pipe_busy"], rep["mem"]

The emulator runs the chosen workgroups (the others are skipped unless ``run_untraced``) and records
each wave's instruction stream with its LDS bank-conflict cycles and global lines; a cycle simulator
replays the streams on ``len(cus)`` compute units sharing one L2 (``cus[c]`` = the workgroups CU ``c``
runs, in order, ``slots`` resident at a time). `kernel_time` composes a whole grid from that. Every
constant is a field of the config (``ARCH_CONFIG``) and documented in docs/performance.md. It is a
model: no number here was measured on hardware.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from . import Module, _core, _dim3, _pack_args

__all__ = ["ARCH_CONFIG", "config", "occupancy", "simulate", "kernel_time", "defaults"]


def defaults() -> dict:
    """The simulator's built-in constants (the MI300X values before any per-arch override)."""
    return dict(_core.timing_config_defaults())


# Per-architecture machine constants (sources: docs/performance.md, "Timing model").
ARCH_CONFIG: dict[str, dict[str, Any]] = {
    "gfx942": dict(cus_per_chip=304, xcds=8, clock_mhz=2100.0, lds_bytes_per_cu=65536, lds_banks=32,
                   lds_bytes_per_clk=128, hbm_bytes_per_s=5.3e12, l2_bytes=4 << 20),
    "gfx950": dict(cus_per_chip=256, xcds=8, clock_mhz=2400.0, lds_bytes_per_cu=160 * 1024, lds_banks=64,
                   lds_bytes_per_clk=256, lds_b128_read_phases=2, hbm_bytes_per_s=8.0e12, l2_bytes=4 << 20),
}


def config(arch: str, **overrides: Any) -> dict:
    """The full constant set for `arch` with `overrides` applied."""
    if arch not in ARCH_CONFIG:
        raise ValueError(f"arch must be one of {sorted(ARCH_CONFIG)}; got {arch!r}")
    c = defaults()
    c.update(ARCH_CONFIG[arch])
    unknown = set(overrides) - set(c)
    if unknown:
        raise ValueError(f"unknown timing constants {sorted(unknown)}")
    c.update(overrides)
    return c


_arch_config = config  # `simulate`'s `config` argument shadows the function


def occupancy(info: dict, threads: int, cfg: dict) -> int:
    """Workgroups resident per CU, from the kernel's VGPRs (unified file, granule 8) and LDS."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1; got {threads}")
    waves = math.ceil(threads / 64)
    vg = info["vgpr"] if info.get("agpr", 0) == 0 else info["accum_offset"] + info["agpr"]
    vg = max(8, math.ceil(vg / 8) * 8)
    per_simd = min(cfg["max_waves_per_simd"], cfg["vgprs_per_simd_lane"] // vg)
    simds = cfg["simds_per_cu"]
    by_waves = (per_simd * simds) // waves
    lds = info["lds"]
    by_lds = cfg["lds_bytes_per_cu"] // lds if lds else by_waves
    n = min(by_waves, by_lds)
    if n < 1:
        raise ValueError(f"kernel does not fit one CU: {waves} waves of {vg} VGPRs, {lds} bytes of LDS")
    return n


def simulate(mod: Module, kernel: str, grid: Iterable[int] | int, block: Iterable[int] | int, args: Sequence[Any], *,
             cus: Sequence[Sequence[Sequence[int]]], slots: int | None = None, config: dict | None = None,
             run_untraced: bool = False, dynamic_lds: int = 0) -> dict:
    """Run `kernel`, record the workgroups named in `cus`, and simulate them; returns the report dict.

    cus: per simulated CU, the workgroup ids (x, y, z) it runs in order. slots: workgroups resident
    per CU (default: the kernel's occupancy). config: a full constant set (`config(arch)` by default).
    """
    if not isinstance(mod, Module):
        raise TypeError(f"mod must be a moonmath_emu.Module; got {type(mod).__name__}")
    g, b = _dim3(grid, "grid"), _dim3(block, "block")
    cus_l = [[tuple(int(v) for v in (tuple(w) + (0, 0))[:3]) for w in c] for c in cus]
    if not cus_l or not all(cus_l):
        raise ValueError("cus must list at least one CU, each with at least one workgroup")
    for c in cus_l:
        for w in c:
            if any(not 0 <= w[i] < g[i] for i in range(3)):
                raise ValueError(f"workgroup {w} is outside the grid {tuple(g)}")
    cfg = config if config is not None else _arch_config(mod.arch)
    info = mod.kernel_info(kernel)
    if slots is None:
        slots = occupancy(info, b[0] * b[1] * b[2], cfg)
    if slots < 1:
        raise ValueError(f"slots must be >= 1; got {slots}")
    rep = dict(_core.timed_launch(mod._m, kernel, g, b, _pack_args(args), int(dynamic_lds), cus_l, int(slots),
                                  dict(cfg), bool(run_untraced)))
    rep["slots"] = slots
    return rep


def kernel_time(workgroups: int, wg_cycles: float, slots: int, cfg: dict, *, round_cycles: float | None = None,
                hbm_bytes: float = 0.0) -> dict:
    """Whole-kernel time from dispatch rounds: `workgroups` over cus_per_chip * slots resident slots.

    wg_cycles: modeled cycles of one round of `slots` co-resident workgroups on a CU (the simulated
    CU's time); rounds = ceil(workgroups / (CUs * slots)), the last (tail) round as long as a full one.
    hbm_bytes: the kernel's total HBM traffic; the time is at least hbm_bytes / HBM bandwidth.
    """
    if workgroups < 1 or slots < 1:
        raise ValueError(f"workgroups and slots must be >= 1; got {workgroups}, {slots}")
    per_round = cfg["cus_per_chip"] * slots
    rounds = math.ceil(workgroups / per_round)
    cyc = rounds * (round_cycles if round_cycles is not None else wg_cycles)
    t_compute = cyc / (cfg["clock_mhz"] * 1e6)
    t_hbm = hbm_bytes / cfg["hbm_bytes_per_s"]
    t = max(t_compute, t_hbm) + cfg["kernel_launch_us"] * 1e-6
    return {"seconds": t, "rounds": rounds, "tail_fraction": workgroups / per_round - (rounds - 1),
            "compute_seconds": t_compute, "hbm_seconds": t_hbm, "bound": "hbm" if t_hbm > t_compute else "cu"}
