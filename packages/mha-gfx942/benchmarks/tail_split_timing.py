"""Tail KV-split plans of the gfx942 MHA forward, each run through the timing model (modeled, not hardware).

For each of the seed's MI300X shapes and each rounding mode this composes `ma.forward`'s launches (V transpose,
dense, split, merge) exactly as `benchmarks/timing/ours.py` does, once per candidate plan: no split, and every
G of SWEEP within the planner's candidate range (2 .. min(MAX_SPLIT_ROUNDS * CUs / tail, nkb / 4)) -- those past
the range of the seed's tail-round formula (G <= 2 * CUs / tail) included -- and the two choices below.
Per shape it prints the modeled ms of each plan, marks the planner's choice (`_C.plan_tail`: list-schedule
makespans) and the seed formula's choice (ceil(tail * G / CUs) * ceil(nkb / G), G <= 2 * CUs / tail, no
per-workgroup overhead), and the speedup of each of the two against AITER's fwd_hd128_bf16_<mode>.co on the
same model.

    python packages/mha-gfx942/benchmarks/tail_split_timing.py [--modes rtz,rtne,rtna] [--shapes 2,7]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
SWEEP = (2, 3, 4, 5, 6, 8, 9, 10, 12, 14, 16, 19, 24, 32)  # the G tried within the planner's range (each a merge sim)


def seed_parts(tail: int, nkb: int, cus: int) -> int:
    """The seed's tail-round choice: G minimising ceil(tail * G / cus) * ceil(nkb / G) + 3, strictly below nkb + 3."""
    best, best_g = nkb, 1
    for g in range(2, min(2 * cus // tail, nkb // 4) + 1):
        span = -(-tail * g // cus) * -(-nkb // g)
        if span < best:
            best, best_g = span, g
    return best_g


def main() -> None:
    sys.path.insert(0, str(REPO))
    from benchmarks.timing import clock
    from benchmarks.timing import run as calib
    from benchmarks.timing.ours import MODES, aiter_gfx942, mha_fits, mha_shape, mha_small_launch
    from moonmath_mha_gfx942 import _C

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--shapes", default="all", help="'all' or comma-separated MI300X row indices")
    args = ap.parse_args()
    cfg, f_eff, _ = clock.effective_config("gfx942")  # every launch simulated at the effective clock
    cus = cfg["cus_per_chip"]
    aiter_cycles, _ = aiter_gfx942(cfg)
    rows = calib.MI300X_MHA if args.shapes == "all" else [calib.MI300X_MHA[int(i)] for i in args.shapes.split(",")]
    for mode in args.modes.split(","):
        fits = mha_fits(mode, cfg)
        small = {("transpose", mode): mha_small_launch("transpose", mode, 2048, 1, cfg)}
        print(f"\n## {mode} (effective clock {f_eff / 1e6:.0f} MHz)")
        print("| (B, H, S) | tail | G: modeled ms | planner G | seed G | speedup planner / seed |")
        print("|---|---|---|---|---|---|")
        for shape, _ in rows:
            B, H, S = shape
            nqb, nkb = -(-S // _C.CTA_ROWS), -(-S // _C.KV_BLOCK)
            n = nqb * B * H
            tail = n % cus
            chosen = _C.plan_tail(S, S, B * H, cus, True)
            guard = tail == 0 or tail * 20 > cus * 19
            seed = 1 if guard else seed_parts(tail, nkb, cus)
            g_max = 1 if guard else min(_C.MAX_SPLIT_ROUNDS * cus // tail, nkb // 4)
            cands = sorted({1, seed, chosen.parts} | {g for g in SWEEP if g <= g_max})
            ms = {}
            for g in cands:
                plan = SimpleNamespace(n_dense=n - tail if g > 1 else n, tail=tail if g > 1 else 0, parts=g,
                                       slots=tail * g if g > 1 else 0)
                if g > 1 and ("merge", mode, g) not in small:
                    small[("merge", mode, g)] = mha_small_launch("merge", mode, 2048, g, cfg)
                ms[g] = mha_shape(shape, mode, fits, small, cfg, f_eff, plan=plan)["seconds"] * 1e3
            aiter_ms = aiter_cycles(shape, mode) / f_eff * 1e3
            best = min(ms, key=ms.get)
            cells = ", ".join(f"{g}{'*' if g == best else ''}: {t:.3f}" for g, t in ms.items())
            print(f"| {shape} | {tail} | {cells} | {chosen.parts} | {seed} | "
                  f"{aiter_ms / ms[chosen.parts]:.3f} / {aiter_ms / ms[seed]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
