"""The planner's merge cost against the timing model's merge (MODELED, emulator timing model, no hardware).

For each (arch, format, B, nparts) the merge launch is sampled as `benchmarks.timing.mla` / `mla_gfx950` sample it
(the real batch and plan, parts of 4 tiles, the op run first so the workspace holds real partials), and its
modeled time (rounds x the simulated CU round, at the effective clock) is set beside the planner's
`merge_cost` (`_C.mla_merge_cost` less its kMergeLaunchNs: the timing model has no launch cost). `--fit` also
fits merge_cost's constants (kMergeTiming: per round, per round shared by a SIMD's waves, per wave folded into a
row's first, per iteration of a wave after its first) over the sampled gfx942 rounds in the planner's cycles (see
`fit`): each round less the busier of the planner's issue cycles and the CU's bytes at its HBM share.

    python -m benchmarks.timing.mla_merge_cost [--fit] [--points gfx942:a16w8:512:4,...]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from moonmath_emu import timing

from . import clock
from . import mla as m942
from . import mla_gfx950 as m950

# (arch, format, B, nparts): gfx942 at q_len 4 (benchmarks.timing.mla), gfx950 at q_len 1 (mla_gfx950); H 16.
POINTS = [("gfx942", "a16w8", B, n) for B, n in
          ((2, 16), (2, 64), (2, 128), (8, 4), (8, 16), (8, 37), (16, 64), (32, 9), (32, 32), (64, 4), (64, 16),
           (128, 4), (256, 4), (512, 2), (512, 4), (512, 8),
           # the small batches' one-round merges, eight waves per row among them (ninth session: the fold grows
           # with the waves it folds; (1, 64) and (1, 128) were 32-34% low)
           (1, 64), (1, 128), (1, 171), (1, 293), (2, 22), (2, 32), (2, 147))] + \
         [("gfx950", f, B, n) for f, B, n in
          (("a16w8", 4, 22), ("a16w8", 4, 8), ("a16w8", 64, 4), ("a16w8", 256, 4), ("a16w8", 32, 16),
           ("a8w8", 4, 22), ("a8w8", 32, 6), ("a8w8", 64, 4))]
LAUNCH_NS = 4000.0  # the planner's kMergeLaunchNs (mla_planner.hpp)


def sample(arch: str, fmt: str, B: int, n: int, cfg: dict) -> tuple[dict, object, int]:
    """(the simulated merge round, the plan, the q_len) of the merge at batch B, n parts of 4 tiles; `cfg` at the
    effective clock (clock.effective_config)."""
    if arch == "gfx942":
        seen, plan = m942._ours_capture(B, n * m942.GRAN * 4, nparts=n, run=True)
        q_len = m942.Q_LEN
    else:
        plan = m950._plan(fmt, B, n * m950.GRAN * 4, n, "ws" if fmt == "a16w8" else "shared")
        seen = m950._capture(fmt, B, n * m950.GRAN * 4, plan, run=True)
        q_len = m950.Q_LEN
    return m942._ours_round(seen[-1], plan.merge_grid, cfg), plan, q_len


def measure(points, out: Path) -> list[dict]:
    from moonmath_mla_decode import _C

    cfgs = {arch: clock.effective_config(arch, out)[0] for arch in {p[0] for p in points}}
    rows = []
    for arch, fmt, B, n in points:
        cfg = cfgs[arch]
        rep, plan, q_len = sample(arch, fmt, B, n, cfg)
        kt = timing.kernel_time(plan.merge_grid, rep["wg_cycles"], rep["per_cu"], cfg)
        total_rows = B * q_len * 16
        o_bytes = 2.0 if fmt == "a16w8" and _C.ws_half_partials(n) else 4.0
        terms = _C.mla_merge_round(total_rows, n, o_bytes, 0, arch)
        planner_us = (_C.mla_merge_cost(total_rows, n, o_bytes, 0, arch) - LAUNCH_NS) / 1e3
        r = dict(arch=arch, fmt=fmt, B=B, nparts=n, grid=plan.merge_grid, cs=plan.merge_cs, wpr=plan.merge_wpr,
                 per_cu=rep["per_cu"], rounds=kt["rounds"], round_cycles=rep["wg_cycles"], model_us=kt["seconds"] * 1e6,
                 planner_us=planner_us, terms=terms,
                 sim_bytes_per_cycle=cfg["hbm_bytes_per_s"] / cfg["cus_per_chip"] / (cfg["clock_mhz"] * 1e6))
        rows.append(r)
        print(f"{arch} {fmt} B {B:4d} nparts {n:4d}: grid {r['grid']:5d} (cs {r['cs']}, wpr {r['wpr']}), "
              f"{r['per_cu']} per CU x {r['rounds']} rounds of {r['round_cycles']:.0f} cycles: timing model "
              f"{r['model_us']:6.1f} us, planner {planner_us:6.1f} us ({planner_us / r['model_us'] - 1:+.1%})",
              flush=True)
    return rows


def fit(rows: list[dict]) -> list[float]:
    """kMergeTiming's (start, start_wave, fold, iter_latency) cycles over the gfx942 rounds (the arch that prices
    its merge in this form), in the planner's cycles (its clock_ghz; each simulated round's time at the effective
    clock, model_us / rounds, times that clock): for each iteration latency on a 10-cycle grid, least squares of the
    rounds' relative error over start, start_wave and fold (per folded wave, wpr - 1; held at 0 where it would fit
    negative), each round less the busier of the planner's issue cycles and the CU's bytes at its cu_bytes_per_ns,
    and (iterations - 1) x the latency; the latency whose fit has the smallest worst relative error."""
    rs = [r for r in rows if r["arch"] == "gfx942"]
    y = torch.tensor([r["model_us"] * 1e3 / r["rounds"] * r["terms"]["clock_ghz"] for r in rs], dtype=torch.float64)
    X3 = torch.tensor([[1.0, 1.0 / r["terms"]["simd_waves"], r["terms"]["fold_waves"]] for r in rs],
                      dtype=torch.float64)
    best = None
    for lat in range(0, 2001, 10):
        busy = torch.tensor([max(t["issue_cycles"], t["cu_bytes"] / t["cu_bytes_per_ns"] * t["clock_ghz"]) +
                             lat * (t["iters"] - 1) for t in (r["terms"] for r in rs)], dtype=torch.float64)
        for cols in ([0, 1, 2], [0, 1]):
            c = torch.linalg.lstsq(X3[:, cols] / y[:, None], (1 - busy / y)[:, None]).solution[:, 0]
            if len(cols) == 3 and c[2] < 0:
                continue
            c = torch.cat([c, torch.zeros(3 - len(cols), dtype=torch.float64)])
            worst = float(((X3 @ c + busy) / y - 1).abs().max())
            if best is None or worst < best[0]:
                best = (worst, [float(v) for v in c] + [float(lat)])
            break
    return best[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true", help="also fit kMergeTiming's start constants")
    ap.add_argument("--points", default="", help="arch:format:B:nparts,... (default: POINTS)")
    ap.add_argument("--out", default="build/timing", help="where run.py's timing.json (the effective clock) is")
    ap.add_argument("--json", default="", help="write the rows to this file")
    args = ap.parse_args()
    pts = POINTS if not args.points else [(a, f, int(b), int(n)) for a, f, b, n in
                                          (p.split(":") for p in args.points.split(","))]
    rows = measure(pts, Path(args.out))
    errs = [abs(r["planner_us"] / r["model_us"] - 1) for r in rows]
    print(f"planner vs timing model: median |error| {sorted(errs)[len(errs) // 2]:.1%}, worst {max(errs):.1%}")
    if args.fit:
        a, b, c, d = fit(rows)
        t = rows[0]["terms"]
        print(f"fitted kMergeTiming: start {a:.0f}, start_wave {b:.0f}, fold {c:.0f}, iter_latency {d:.0f} cycles "
              f"(planner: {t['start_cycles']:.0f}, {t['start_wave_cycles']:.0f}, {t['fold_cycles']:.0f}, "
              f"{t['iter_latency_cycles']:.0f})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
