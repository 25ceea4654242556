"""Cost of the causal / sliding-window feature kernel of the gfx942 MHA forward on the emulator.

One 256-row item (B = H = 1, Sq = 256) against a long Skv, causal with windows of growing `left`: the item
runs only the kv blocks of its rows' windows (`_C.item_kv_blocks`). Prints, per window, the blocks run and
the attention launch's emulator counters (wave-instructions, MFMAs, VALU), the least-squares fit
wave-instructions = fixed + per_block * blocks, and beside it the default kernel and the feature kernel
without a window over all of Skv. With --model, also the timing model's cycles of that one workgroup on one
CU (moonmath_emu.timing with the frozen constants of docs/performance.md; modeled, not measured). Not a
hardware speed claim.

    python packages/mha-gfx942/benchmarks/bench_mha_window_emu.py [--skv 8192] [--mode rtne] [--model]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[3]
LEFTS = (0, 256, 512, 1024, 2048)


def run_one(skv: int, mode: str, window: tuple[int, int], model: bool, seed: int = 0) -> dict:
    from moonmath_common import use_arch, use_backend
    from moonmath_mha_gfx942 import _C
    from moonmath_mha_gfx942 import kernel as K

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, s, 128, generator=g).to(torch.bfloat16) for s in (256, skv, skv))
    out = torch.empty_like(q)
    with use_backend("emu"), use_arch("gfx942"):
        c = K.run(q, k, v, out, "bhsd", mode, tail=False, window=window)[1]
    blocks = -(-skv // 64)
    if max(window) >= 0:
        blocks = _C.item_kv_blocks(0, 256, skv, *K.window_shifts(window, 256, skv))
    r = {"blocks": blocks, "wave_instructions": c["wave_instructions"], "mfma": c["mfma"], "valu": c["valu"]}
    if model:
        sys.path.insert(0, str(REPO))
        from benchmarks.timing import clock
        from benchmarks.timing.ours import captured, simulate

        with use_backend("emu"), use_arch("gfx942"), captured(K.KERNELS, run_first=(K.TRANSPOSE_KERNEL,)) as seen:
            K.run(q, k, v, out, "bhsd", mode, tail=False, window=window)
        L = next(s for s in seen if s["kernel"].startswith("mha_fwd_"))
        r["cycles"] = simulate(L, [[(0, 0, 0)]], clock.effective_config("gfx942")[0])["wg_cycles"]
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skv", type=int, default=8192)
    ap.add_argument("--mode", default="rtne", choices=("rtna", "rtne", "rtz"))
    ap.add_argument("--model", action="store_true", help="also the timing model's cycles of the workgroup")
    a = ap.parse_args()
    rows = [("default kernel, no window", run_one(a.skv, a.mode, (-1, -1), a.model)),
            ("feature kernel, window over every key", run_one(a.skv, a.mode, (a.skv, 256), a.model))]
    rows += [(f"causal, window_size=({left}, 0)", run_one(a.skv, a.mode, (left, 0), a.model)) for left in LEFTS]
    keys = ["blocks", "wave_instructions", "mfma", "valu"] + (["cycles"] if a.model else [])
    print(f"Sq = 256, Skv = {a.skv}, {a.mode}: the attention launch (one workgroup)\n")
    print("| case | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for name, r in rows:
        print(f"| {name} | " + " | ".join(f"{r[k]:.0f}" for k in keys) + " |")
    win = [r for _, r in rows[2:]]
    for key in ["wave_instructions"] + (["cycles"] if a.model else []):
        xs, ys = [r["blocks"] for r in win], [r[key] for r in win]
        n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"\nwindowed fit: {key} = {my - b * mx:.0f} + {b:.1f} * blocks (n = {n})")


if __name__ == "__main__":
    main()
