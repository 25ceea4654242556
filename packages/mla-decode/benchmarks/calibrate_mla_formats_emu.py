"""Cost rows of the MLA KV-format kernels (a16w16 on gfx942 and gfx950; a8w8, mxfp4 on gfx950), from the emulator.

The planner (csrc/host/mla_planner.hpp) models a wave's time as  part_cycles + tiles * tile_cycles  (tiles of
16 KV tokens) and the split merge separately, from one row per (arch, kernel) of its table kKernelCosts. This
script measures the two numbers for each format kernel (perfmodel's issue weights, as calibrate_mla_planner_emu.py):
one request, every KV part the same length, at two part lengths, so the per-wave cycles of the decode launch
separate into a fixed term per part (Q load, prologue, the partials' epilogue) and a term per 16-token tile
(a8w8 runs 32-token tiles: its figure is half of one). Two kernels per format on gfx950: `<format>_w1`, the
one-wave kernel for one row tile (measured at H 16), and `<format>`, the 4-wave kernel (measured at H 64, four
row tiles: cycles per wave); gfx942 has the 4-wave kernel only. a8w8 also launches mla_q_amax once per call (the
decode quantises its own Q tile): that launch's cycles per query row are its row's call_row_cycles (at H 64).

    python benchmarks/calibrate_mla_formats_emu.py [--arch gfx950]   # the rows, the table's, and the rows to paste
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_mla_planner_emu import issue_cycles  # noqa: E402
from formats_mla_kernel_emu import inputs, run  # noqa: E402  (sets MOONMATH_EMU_ARCH=gfx950 on import)

from moonmath_mla_decode import formats  # noqa: E402

T_LO, T_HI, PARTS = 4, 12, 2  # 16-token tiles per part (whole 32-token tiles too), parts per request
KERNEL_HEADS = {"_w1": 16, "": 64}  # the kernel's suffix -> H it is measured at (one row tile, four)
KV_SPLIT_TILES = 4  # the _kv4 kernels' parts are 4x as long (each wave a quarter: whole 32-token tiles per wave)


def kernels(arch: str) -> list[tuple[str, int]]:
    """(cost-table kernel name, H it is measured at) of every format kernel on `arch`."""
    out = []
    for fmt, (archs, *_rest) in formats.FORMATS.items():
        if arch in archs:
            out += [(fmt + sfx, H) for sfx, H in KERNEL_HEADS.items()
                    if formats.cost_kernel(fmt, H, 1, arch) == fmt + sfx]
            out += [(k, 16) for w, k in formats.cost_kernels(fmt, 16, 1, arch).items() if w != 1]
    return out


def kv_waves(kernel: str) -> int:
    """The kernel's waves per part (formats.make_plan's kv_waves): 4 for `<format>_kv4`, else 1."""
    return formats.KV_SPLIT_WAVES if kernel.endswith(f"_kv{formats.KV_SPLIT_WAVES}") else 1


def decode_cycles(fmt: str, H: int, tiles: int, waves: int = 1) -> tuple[float, float]:
    """(issue cycles per wave of the decode launch, cycles per query row of a8w8's Q launch or 0)."""
    x = inputs(1, 16 * tiles * PARTS, H=H)
    cs = run(fmt, x, PARTS, kv_waves=waves)
    n_q = 1 if fmt == "a8w8" else 0  # a8w8 first launches mla_q_amax (the decode quantises its own Q tile)
    q_rows = sum(issue_cycles(c) for c in cs[:n_q]) / H
    dec = cs[n_q]
    return issue_cycles(dec) / dec["waves"], q_rows


def measured(arch: str | None = None) -> dict[str, dict[str, float]]:
    """{kernel: {tile_cycles, part_cycles, call_row_cycles}} of `arch`'s format kernels on the emulator now."""
    if arch is not None:
        os.environ["MOONMATH_EMU_ARCH"] = arch
    arch = os.environ["MOONMATH_EMU_ARCH"]
    out = {}
    for kernel, H in kernels(arch):
        fmt, w = kernel.split("_")[0], kv_waves(kernel)
        t_lo, t_hi = (T_LO * KV_SPLIT_TILES, T_HI * KV_SPLIT_TILES) if w != 1 else (T_LO, T_HI)
        lo, q_rows = decode_cycles(fmt, H, t_lo, w)
        hi, _ = decode_cycles(fmt, H, t_hi, w)
        tile = (hi - lo) / (t_hi - t_lo)  # per 16 tokens of the part (a _kv4 wave decodes a quarter of them)
        out[kernel] = {"tile_cycles": tile, "part_cycles": lo - t_lo * tile, "call_row_cycles": q_rows}
    return out


def main() -> None:
    from moonmath_mla_decode import _C

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="gfx950", choices=("gfx942", "gfx950"))
    arch = ap.parse_args().arch
    m = measured(arch)
    table = _C.mla_format_cost_rows(arch)
    print(f"{arch}, issue cycles per decode wave = part + tiles * tile (tiles of 16 KV tokens); emulator / planner")
    print(f"{'kernel':>10} {'tile_cycles':>17} {'part_cycles':>17} {'call_row_cycles':>17}")
    for k, r in m.items():
        t = table.get(k, {})
        cols = ("tile_cycles", "part_cycles", "call_row_cycles")
        cells = [f"{r[c]:8.0f}/{t.get(c, float('nan')):8.0f}" for c in cols]
        print(f"{k:>10} " + " ".join(f"{c:>17}" for c in cells))
    print("kKernelCosts rows ({tile, rowtile, part}; token bytes and Q launches as in the table):")
    for k, r in m.items():
        print(f'    {{"{arch}", "{k}", {{{r["tile_cycles"]:.1f}, 0.0, {r["part_cycles"]:.1f}, ...}}}},'
              + (f"  // call_row_cycles {r['call_row_cycles']:.1f}" if r["call_row_cycles"] else ""))


if __name__ == "__main__":
    main()
