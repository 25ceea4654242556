"""Where the split-KV merge launch's modeled cycles go (MODELED, emulator timing model, no hardware).

Samples the merge exactly as `benchmarks.timing.mla` / `mla_gfx950` do (the real batch and plan, parts of 4
tiles, the op run first so the workspace holds real partials) and prints, per wave: the round's cycles, the
stall classes, the instructions issued before the wave's first (m, l, ln) load (the prologue: kernel
arguments, block order, `mla::locate`), the top waits by PC, and the HBM floor of the simulated CUs (their
HBM bytes at their share of the chip's bandwidth, per simulated cycle at the simulated clock). It simulates at
the effective clock, as the timing scripts do (clock.py); `--sim-mhz F` simulates at clock F instead (the
sensitivity of a bandwidth-bound round to the clock at which HBM bytes per cycle are computed).

    python -m benchmarks.timing.mla_merge_where --arch gfx942 --shape 8:8192
    python -m benchmarks.timing.mla_merge_where --arch gfx950 --shape 4:1024
"""
from __future__ import annotations

import argparse
from collections import Counter

from moonmath_emu import timing

from . import clock
from . import mla as m942
from . import mla_gfx950 as m950
from .ours import _module


def capture(arch: str, B: int, S: int):
    """The merge launch at (B, S) under the planner's plan, sampled as the timing scripts sample it."""
    if arch == "gfx942":
        from moonmath_common import use_arch
        from moonmath_mla_decode import kernel as K

        with use_arch("gfx942"):
            real = K.make_plan(B, m942.mla.HEADS, m942.Q_LEN, S, arch="gfx942")
        seen, _ = m942._ours_capture(B, real.nparts * m942.GRAN * 4, nparts=real.nparts, variant=real.variant,
                                     run=True)
        return real, seen[1]
    real = m950._plan("a8w8", B, S)
    return real, m950._capture("a8w8", B, real.nparts * m950.GRAN * 4, real, run=True)[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=("gfx942", "gfx950"), default="gfx942")
    ap.add_argument("--shape", default="8:8192", help="B:S")
    ap.add_argument("--sim-mhz", type=float, default=None, help="simulate at this clock (default: the effective clock)")
    args = ap.parse_args()
    B, S = (int(v) for v in args.shape.split(":"))
    cfg = (clock.at_clock(timing.config(args.arch), args.sim_mhz * 1e6) if args.sim_mhz
           else clock.effective_config(args.arch)[0])
    real, L = capture(args.arch, B, S)
    if real.nparts < 2:
        raise SystemExit(f"({B}, {S}) is not split on {args.arch}: no merge launch")
    rep = m942._ours_round(L, real.merge_grid, cfg)
    waves = sum(len(c) for c in rep["wg_spans"]) * (L["block"][0] // 64)
    hbm_per_clk = cfg["hbm_bytes_per_s"] / (cfg["clock_mhz"] * 1e6) * len(rep["cu_cycles"]) / cfg["cus_per_chip"]
    print(f"{args.arch} ({B}, {S}): {real.nparts} parts, merge grid {L['grid'][0]} x {L['block'][0]} threads, "
          f"{rep['per_cu']} workgroups per CU; round {rep['wg_cycles']:.0f} cycles at {cfg['clock_mhz']:.0f} MHz; "
          f"HBM floor {rep['mem']['hbm_bytes'] / hbm_per_clk:.0f} cycles ({rep['mem']['hbm_bytes']:.0f} B)")
    print("stalls:", {k: round(v, 3) for k, v in rep["where"].items()})
    dis = [d for d in _module(L["path"]).disassemble() if d[0] == L["kernel"]]
    base = dis[0][1]
    text = {pc - base: t for _, pc, t in dis}
    by = Counter()
    for (_, pc), v in rep["stall_by_pc"].items():
        for k, x in v.items():
            by[(pc - base, k)] += x
    # the first 16-byte buffer load is the (m, l, ln) load: everything issued before it is the prologue
    first = min(off for off, t in text.items() if t.startswith("buffer_load_dwordx4"))
    issued = {k: x for k, x in by.items() if k[1] == "issued"}
    per = cfg["issue_period"] if "issue_period" in cfg else 4
    pre = sum(x for (off, _), x in issued.items() if off < first) / per / waves
    print(f"instructions per wave {rep['instructions'] / waves:.0f}, of which before the first load {pre:.0f}")
    for (off, k), x in sorted(((k, x) for k, x in by.items() if k[1] != "issued"), key=lambda kv: -kv[1])[:8]:
        print(f"  +{off:5d} {k:13s} {x / waves:7.0f} cycles/wave  {text.get(off, '')}")


if __name__ == "__main__":
    main()
