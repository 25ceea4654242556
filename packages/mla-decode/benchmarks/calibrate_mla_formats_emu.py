"""Cost constants of the MLA KV-format kernels (a16w16, a8w8, mxfp4, mxfp4 with fp8 Q) on gfx950, from the emulator.

The planner (csrc/host/mla_planner.hpp) models a wave's time as  part_cycles + tiles * tile_cycles  (tiles of
16 KV tokens) and the split merge separately; its constants today are the a16w8 kernels'. This script measures
the same two numbers for each format kernel (perfmodel's issue weights, as calibrate_mla_planner_emu.py): one
request, every KV part the same length, at two part lengths, so the per-wave cycles of the decode launch
separate into a fixed term per part (Q load and quantisation, prologue, the partials' epilogue) and a term per
16-token tile (a8w8 runs 32-token tiles: its figure is half of one). Two row layouts: H 16 (one row tile: the
one-wave kernel `*_w1`) and H 64 (four row tiles: the 4-wave kernel, cycles per wave). a8w8 also quantises Q once
per call (mla_q_amax, then mla_q_quant): the two launches' total cycles are printed beside (per call, not per wave).

    python benchmarks/calibrate_mla_formats_emu.py
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["MOONMATH_EMU_ARCH"] = "gfx950"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_mla_planner_emu import issue_cycles  # noqa: E402
from formats_mla_kernel_emu import inputs, run  # noqa: E402

FORMATS = ("a16w16", "a8w8", "mxfp4")
T_LO, T_HI, PARTS = 4, 12, 2  # 16-token tiles per part (whole 32-token tiles too), parts per request


def decode_cycles(fmt: str, H: int, tiles: int) -> tuple[float, float]:
    """(issue cycles per wave of the decode launch, total cycles of a8w8's two Q launches or 0)."""
    x = inputs(1, 16 * tiles * PARTS, H=H)
    cs = run(fmt, x, PARTS)
    n_q = 2 if fmt == "a8w8" else 0  # a8w8 first launches mla_q_amax and mla_q_quant
    amax = sum(issue_cycles(c) for c in cs[:n_q])
    dec = cs[n_q]
    return issue_cycles(dec) / dec["waves"], amax


def measured() -> dict[tuple[str, int], tuple[float, float, float]]:
    """{(format, H): (part_cycles, tile_cycles per 16 tokens, Q launches' cycles)} on the emulator now."""
    out = {}
    for fmt in FORMATS:
        for H in (16, 64):
            lo, a = decode_cycles(fmt, H, T_LO)
            hi, _ = decode_cycles(fmt, H, T_HI)
            tile = (hi - lo) / (T_HI - T_LO)
            out[(fmt, H)] = (lo - T_LO * tile, tile, a)
    return out


def main() -> None:
    print("gfx950, issue cycles per decode wave = part + tiles * tile (tiles of 16 KV tokens)")
    print(f"{'format':>11} {'H':>3} {'part_cycles':>12} {'tile_cycles':>12} {'Q launches':>14}")
    for (fmt, H), (part, tile, amax) in measured().items():
        print(f"{fmt:>11} {H:3d} {part:12.0f} {tile:12.0f} {amax:14.0f}")


if __name__ == "__main__":
    main()
