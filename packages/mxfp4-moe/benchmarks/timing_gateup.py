"""Modeled cycles of the a16w4 gate/up kernel on one CU (moonmath_emu.timing, docs/performance.md) at the
Kimi-K3 TP8 shapes of count_moe.py: a guide for pipeline changes, never a speed claim.

The sampled CU runs the first `--wgs` workgroups of the launch (1: decode, about one workgroup per CU;
4: a fuller CU); slots (resident workgroups) come from the kernel's occupancy. `--hsaco` times another
build of mxfp4_moe_gateup (e.g. a variant under study) with the same arguments.

    python packages/mxfp4-moe/benchmarks/timing_gateup.py --arch gfx942 --tokens 8 --wgs 1 4
    python packages/mxfp4-moe/benchmarks/timing_gateup.py --tokens 8192 --wgs 4 --hsaco build/variant.hsaco
"""
from __future__ import annotations

import argparse
import math
import os

import torch

os.environ.setdefault("MOONMATH_EMU_HAZARDS", "0")

from count_moe import PHYS, route, subset  # noqa: E402

import moonmath_emu  # noqa: E402
import moonmath_emu.timing as timing  # noqa: E402
import moonmath_mxfp4_moe as mm  # noqa: E402
from moonmath_mxfp4_moe import kernel  # noqa: E402


def run(T: int, wgs: int, arch: str, hsaco: str | None, E=896, top_k=16, K=3584, I=384) -> dict:
    ids = route(T, E, top_k, seed=T)
    nvt = T * top_k
    active = int(torch.unique(ids).numel())
    bm = mm.mxfp4_moe_gateup_block_m(nvt, active)
    sid, eid, ntpp, _ = mm.moe_align_block_size(ids, bm, E)
    rows, experts, sub_ntpp, n_sub, _ = subset(sid, eid, ntpp, bm, max(wgs, 8))
    A = torch.randn(T, K).to(torch.bfloat16)
    B = torch.randint(0, 256, (PHYS, K // 32, 2 * I, 16), dtype=torch.uint8)
    Bs = torch.randint(120, 134, (PHYS, K // 32, 2 * I), dtype=torch.uint8)
    C = torch.zeros(nvt, I, dtype=torch.bfloat16)
    nt = kernel.gateup_nt(bm, I, kernel.EPI_SILU)
    name = f"mxfp4_moe_gateup_bm{bm}_nt{nt}_silu"
    path = hsaco or kernel.KERNELS.path("bench", arch, "mxfp4_moe_gateup")
    mod = moonmath_emu.Module(open(path, "rb").read())
    args = [A, B, Bs, C, None, rows, experts, sub_ntpp, rows.numel(), nvt, T, top_k, K, 2 * I, PHYS, 0, 1.0, 1.0, K]
    grid = (math.ceil(I / (128 * nt)), n_sub, 1)
    order = [(x, y, 0) for y in range(n_sub) for x in range(grid[0])]
    rep = timing.simulate(mod, name, grid, kernel.THREADS, args, cus=[order[:wgs]])
    return {"kernel": name, "cycles": rep["cu_cycles"][0], "stall": rep["stall"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[8])
    ap.add_argument("--wgs", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--arch", choices=("gfx942", "gfx950"), default="gfx942")
    ap.add_argument("--hsaco", default=None)
    a = ap.parse_args()
    os.environ["MOONMATH_EMU_ARCH"] = a.arch
    print("| T | kernel | workgroups on the CU | modeled cycles | waitcnt_vm windows | barrier windows |")
    print("|---|---|---|---|---|---|")
    for T in a.tokens:
        for w in a.wgs:
            r = run(T, w, a.arch, a.hsaco)
            print(f"| {T} | {r['kernel']} | {w} | {r['cycles']:.0f} | {r['stall']['waitcnt_vm']:.0f} | "
                  f"{r['stall']['barrier']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
