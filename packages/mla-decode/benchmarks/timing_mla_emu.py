"""Modeled time of mla_decode_a16w8 beside AITER's a16w8 kernel under moonmath-emu's timing model (MODELED, no
hardware): B = 2, H = 16, the planner's split (every launch: decode, then merge) against AITER's
`mla_a16w8_qh16_m16x4_n16x1_coex0_mask1_ps.co` with one work item per request (the peer harness's launch).

Each launch is recorded, then one CU running its first workgroups (as many as one CU gets when the grid
is spread over every CU, at most the resident count) is simulated (`moonmath_emu.timing.simulate`) and the
grid composed in dispatch rounds (`timing.kernel_time`, HBM bytes
= 64 x the distinct lines the launch touched). The constants are the timing model's MI300X defaults at the
repository's effective clock (benchmarks/timing/clock.py: run.py's calibrated clock, HBM bytes per cycle at it;
before session 9 the nominal 2.1 GHz); the calibration is on attention kernels, so read the ratio, not the µs.

    python benchmarks/timing_mla_emu.py [--lengths 1024,8192] [--qlens 1,2,4]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx942")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: benchmarks.timing.clock
import table_mla_kernel_emu as table  # noqa: E402  (the same inputs as the table)

import moonmath_emu  # noqa: E402
import moonmath_emu.timing as timing  # noqa: E402
from benchmarks.timing import clock  # noqa: E402
from moonmath_common import use_backend  # noqa: E402
from moonmath_mla_decode import kernel as mk  # noqa: E402


def record(fn):
    """Run fn() and return [(module, kernel, grid, block, args, counters, dynamic LDS bytes)] of every emulator
    launch it made."""
    seen = []
    orig = moonmath_emu.Module.launch

    def spy(self, name, grid=(1, 1, 1), block=(64, 1, 1), args=(), **k):
        c = orig(self, name, grid=grid, block=block, args=args, **k)
        seen.append((self, name, grid, block, list(args), c, int(k.get("dynamic_lds", 0))))
        return c

    moonmath_emu.Module.launch = spy
    try:
        fn()
    finally:
        moonmath_emu.Module.launch = orig
    return seen


def modeled_seconds(launches, cfg) -> float:
    total = 0.0
    for mod, name, grid, block, args, c, dyn in launches:
        g, b = moonmath_emu._dim3(grid, "grid"), moonmath_emu._dim3(block, "block")
        n_wg = g[0] * g[1] * g[2]
        slots = timing.occupancy(mod.kernel_info(name), b[0] * b[1] * b[2], cfg)
        # the CU simulated runs what a CU gets: the grid spread over every CU, up to `slots` at a time
        per_cu = min(slots, -(-n_wg // cfg["cus_per_chip"]))
        first = [(i % g[0], (i // g[0]) % g[1], i // (g[0] * g[1])) for i in range(per_cu)]
        rep = timing.simulate(mod, name, g, b, args, cus=[first], slots=per_cu, config=cfg, dynamic_lds=dyn)
        t = timing.kernel_time(n_wg, rep["cu_cycles"][0], per_cu, cfg, hbm_bytes=64.0 * c.get("global_lines", 0))
        total += t["seconds"]
    return total


def ours_launches(args, q_len, nparts=None, variant=None):
    q_lat, q_pe, pool, lens, idx, ip = args
    o = torch.empty_like(q_lat)
    lse = torch.empty(q_lat.shape[0], q_lat.shape[1])

    def go():
        with use_backend("emu"):
            mk.run(q_lat, q_pe, pool, o, lens, idx, ip, table.SCALE, table.KV_SCALE, lse=lse, nparts=nparts,
                   variant=variant)
    return record(go)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="1024,8192")
    ap.add_argument("--qlens", default="1,2,4")
    ap.add_argument("--nparts", default="", help="comma list: also model these forced splits (ws)")
    a = ap.parse_args()
    # every launch, ours and AITER's, simulated and composed at the effective clock (clock.py)
    cfg = clock.effective_config("gfx942", kernel_launch_us=0.0)[0]
    runner, why = table.aiter_runner()
    B, H = 2, 16
    print("| q_len | S | ours (variant, parts) | ours modeled µs | AITER modeled µs | AITER / ours |")
    print("|---|---|---|---|---|---|")
    for S in (int(x) for x in a.lengths.split(",")):
        for q_len in (int(x) for x in a.qlens.split(",")):
            args = table.make(B, S, H, q_len)
            p = mk.plan(B, H, q_len, S)
            t_ai = float("nan")
            if runner is not None:
                t_ai = modeled_seconds(record(lambda a=args: runner(*a, table.SCALE, table.KV_SCALE, arch="gfx942")),
                                       cfg)
            rows = [(f"{p.variant}, {p.nparts}", ours_launches(args, q_len))]
            rows += [(f"ws, {n} (forced)", ours_launches(args, q_len, n, "ws"))
                     for n in (int(x) for x in a.nparts.split(",") if x)]
            for label, launches in rows:
                t = modeled_seconds(launches, cfg)
                print(f"| {q_len} | {S} | {label} | {t * 1e6:.1f} | {t_ai * 1e6:.1f} | {t_ai / t:.2f} |", flush=True)
    if runner is None:
        print(f"(AITER column empty: {why})")


if __name__ == "__main__":
    main()
