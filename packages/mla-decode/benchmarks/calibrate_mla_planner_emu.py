"""Calibrate the MLA planner's cost constants (per arch: gfx942, gfx950) against the emulator (no timing claims).

The planner (csrc/host/mla_planner.hpp) models one ws workgroup's time per SIMD
as  issue_cycles(part) = kPartCycles + tiles * kTileCycles  and one merge wave's as
merge_cycles(wave) = kMergeWaveCycles + iterations * kMergeIterCycles (four parts per iteration). The cycles are the
emulator's instruction mix weighted by perfmodel's issue costs (MFMA 16, VALU 4, transcendental 16,
DS/VMEM 4, SALU/SMEM/waitcnt/barrier/branch 1). This script measures them: it runs
one request with every wave doing the same work at two tile counts per part (so the per-wave cycles
separate into a fixed and a per-tile term), and the merge at two part counts with one wave per row.

    python benchmarks/calibrate_mla_planner_emu.py [--arch gfx950]   # prints the fitted constants and the planner's
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx942")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import table_mla_kernel_emu as table  # noqa: E402  (the same inputs as the table)

from moonmath_common import target_arch, use_backend  # noqa: E402
from moonmath_common.perfmodel import ISSUE_CYCLES, MFMA  # noqa: E402
from moonmath_mla_decode import _C  # noqa: E402
from moonmath_mla_decode import kernel as mk  # noqa: E402


def issue_cycles(c: dict) -> float:
    """perfmodel's issue weights applied to one launch's counters (trans counted once, at 16)."""
    mf = sum(MFMA.get(op, (16, 0))[0] * n for op, n in c.get("mfma_by_opcode", {}).items())
    other = sum(ISSUE_CYCLES[k] * c.get(k, 0) for k in ISSUE_CYCLES if k != "trans")
    return mf + other + (ISSUE_CYCLES["trans"] - ISSUE_CYCLES["valu"]) * c.get("trans", 0)


def run(B, S, H, q_len, nparts, variant, balanced=None, quarters=False):
    q_lat, q_pe, pool, lens, idx, ip = table.make(B, S, H, q_len)
    o = torch.empty_like(q_lat)
    lse = torch.empty(B * q_len, H)
    plan = mk.make_plan(B, H, q_len, S, nparts=nparts, variant=variant, balanced=balanced)
    if nparts > 1 and quarters:  # one wave per (row, quarter), one-wave workgroups (spread_merge_shape's first rule)
        plan = dataclasses.replace(plan, merge_cs=4, merge_wpr=1, merge_waves=1, merge_grid=4 * B * q_len * H)
    elif nparts > 1:  # the merge in its by-nparts shape (whole rows, merge_waves_per_row waves each), whatever the
        # spread the plan would launch: merge_wave/iter_cycles are one such wave's, which merge_cost scales
        wpr = _C.merge_waves_per_row(nparts)
        plan = dataclasses.replace(plan, merge_cs=1, merge_wpr=wpr, merge_waves=0,
                                   merge_grid=-(-(B * q_len * H * wpr) // max(4, wpr)))
    with use_backend("emu"):
        return mk.run(q_lat, q_pe, pool, o, lens, idx, ip, 576 ** -0.5, 1 / 32, lse=lse, plan=plan)


def fit_balance(b_lo=4, b_hi=16):
    """Balanced split: the extra cycles per request, per SIMD of a decode workgroup (each locates its part
    from all B lengths)."""
    per = []
    for B in (b_lo, b_hi):
        c = run(B, 64, 16, 1, 2, "ws", balanced=True)
        per.append(issue_cycles(c[0]) / (B * 2 * 4))  # B * 2 workgroups of 4 SIMDs
    return (per[1] - per[0]) / (b_hi - b_lo)


def per_unit_cycles(variant, H, q_len, tiles, nparts):
    """Issue cycles per SIMD of the main launch's workgroups, every part with `tiles` tiles, and (if split)
    the merge's cycles per merge wave."""
    c = run(1, 16 * tiles * nparts, H, q_len, nparts, variant)
    n_rt = -(-q_len * H // 16)
    waves = nparts * -(-n_rt // 4) * 4  # per SIMD of the 8-wave workgroups (4 SIMDs each)
    main = issue_cycles(c[0]) / waves
    merge = issue_cycles(c[1]) / (q_len * H * _C.merge_waves_per_row(nparts)) if len(c) > 1 else 0.0
    return main, merge


def fit(variant, H, q_len, t_lo=2, t_hi=10, parts=2):
    lo, _ = per_unit_cycles(variant, H, q_len, t_lo, parts)
    hi, _ = per_unit_cycles(variant, H, q_len, t_hi, parts)
    tile = (hi - lo) / (t_hi - t_lo)
    return lo - t_lo * tile, tile


def fit_merge(H=16, q_len=1, p_lo=4, p_hi=16):
    """One merge wave per row (nparts <= 16): 1 and 4 iterations of four parts, of the ws kernel's partials
    (fp16 O / ln, the planner's variant)."""
    _, lo = per_unit_cycles("ws", H, q_len, 1, p_lo)
    _, hi = per_unit_cycles("ws", H, q_len, 1, p_hi)
    it = (hi - lo) / ((p_hi - p_lo) // 4)
    return lo - it, it


def fit_merge_quarters(H=16, q_len=1, p_lo=8, p_hi=32):
    """One merge wave per (row, quarter) (4 column blocks, one wave each): 1 and 2 iterations of sixteen parts
    (four lane groups of four steps), of the ws kernel's partials."""
    per = []
    for n in (p_lo, p_hi):
        c = run(1, 16 * n, H, q_len, n, "ws", quarters=True)
        per.append(issue_cycles(c[1]) / (q_len * H * 4))
    it = (per[1] - per[0]) / (-(-p_hi // 16) - -(-p_lo // 16))
    return per[0] - it * -(-p_lo // 16), it


def measured():
    """{name: value} of every constant the planner's model uses, as the emulator gives them now."""
    xf, xt = fit("ws", 16, 1)       # one row tile per workgroup
    xf4, xt4 = fit("ws", 16, 4)     # four row tiles: the per-row-tile increments (per tile and per part)
    mr, ms = fit_merge()
    qr, qs = fit_merge_quarters()
    return {"ws_part_cycles": xf, "ws_tile_cycles": xt, "ws_rowtile_cycles": (xt4 - xt) / 3,
            "ws_part_rowtile_cycles": (xf4 - xf) / 3,
            "merge_wave_cycles": mr, "merge_iter_cycles": ms, "merge_quarter_wave_cycles": qr,
            "merge_quarter_iter_cycles": qs, "balance_request_cycles": fit_balance()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default=os.environ["MOONMATH_EMU_ARCH"], choices=mk.ARCHS)
    os.environ["MOONMATH_EMU_ARCH"] = ap.parse_args().arch
    m = measured()
    k = _C.mla_cost_constants(target_arch())
    print(f"arch {target_arch()}")
    print(f"{'constant':>22} {'emulator':>10} {'planner':>10}")
    for name, v in m.items():
        print(f"{name:>22} {v:10.0f} {k[name]:10.0f}")


if __name__ == "__main__":
    main()
