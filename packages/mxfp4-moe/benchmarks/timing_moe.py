"""Modeled time of the a16w4 MoE kernels (gfx942, or the gfx950 a16w4 build) at the Kimi-K3 TP8 shapes of
count_moe.py: gate/up [3584 -> 2 x 384] with SwiGLU and down [384 -> 3584] (moonmath_emu.timing,
docs/performance.md). A guide for pipeline changes, never a speed claim.

Per projection and token count it prints, for the variant the planners pick:
- one-CU modeled cycles with 1 workgroup on the CU and with `--wgs` co-resident workgroups;
- whole-kernel modeled time: the launch's workgroups spread over the chip's CUs in dispatch order, so
  the busiest CU runs ceil(workgroups / CUs) of them (each of another m-block), the kernel's occupancy
  resident at a time: that CU is simulated at the repository's effective clock (benchmarks/timing/clock.py:
  HBM bytes per cycle and cycles to seconds at run.py's calibrated clock; before session 9 the peak clock),
  and the time is at least the hit experts' weight bytes / HBM bandwidth;
- per wave of the 1-workgroup run: waitcnt_vm stall windows (issue windows spent in s_waitcnt vmcnt),
  and from the emulator's counters per workgroup: waitcnt per MFMA, VALU per MFMA, VMEM instructions;
- VGPRs (code-object metadata) and the workgroups resident per CU they and the LDS allow.

The sampled workgroups get distinct physical experts (so no weight line is shared that would not be),
the activations and scale bytes are random. `--hsaco-gateup` / `--hsaco-down` time another build of
either code object (e.g. a variant under study) with the same arguments.

    python packages/mxfp4-moe/benchmarks/timing_moe.py --tokens 8 32
    python packages/mxfp4-moe/benchmarks/timing_moe.py --proj down --tokens 8 --hsaco-down build/variant.hsaco
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("MOONMATH_EMU_HAZARDS", "0")

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: benchmarks.timing
from count_moe import route  # noqa: E402

import moonmath_emu  # noqa: E402
import moonmath_emu.timing as timing  # noqa: E402
import moonmath_mxfp4_moe as mm  # noqa: E402
from benchmarks.timing.clock import effective_config  # noqa: E402
from moonmath_mxfp4_moe import kernel  # noqa: E402

E, TOP_K, DIM, INTER = 896, 16, 3584, 384  # Kimi-K3 TP8 (seed README)


def _sample(sid, eid, ntpp, bm, n):
    """The first n live m-blocks (rows, expert ids renumbered 0..n-1 so each has its own weights)."""
    live = math.ceil(int(ntpp[0]) / bm)
    ids = [i for i in range(live) if int(eid[i]) >= 0][:n]
    rows = torch.cat([sid[i * bm:(i + 1) * bm] for i in ids])
    return rows, torch.arange(len(ids), dtype=torch.int32), torch.tensor([rows.numel()], dtype=torch.int32), live


def _case(proj: str, T: int, arch: str, max_wgs: int, gateup_nt: int | None = None):
    torch.manual_seed(T)
    """Kernel name, code object stem, grid x, the sampled launch's arguments, block_m, live blocks, K walk."""
    ids = route(T, E, TOP_K, seed=T)
    nvt = T * TOP_K
    active = int(torch.unique(ids).numel())
    cus = timing.ARCH_CONFIG[arch]["cus_per_chip"]
    if proj == "gateup":
        K, N = DIM, 2 * INTER
        bm = mm.mxfp4_moe_gateup_block_m(nvt, active)
        sid, eid, ntpp, nblk = mm.moe_align_block_size(ids, bm, E)
        rows, experts, sub_ntpp, live = _sample(sid, eid, ntpp, bm, max_wgs)
        # The launcher's choice (kernel.launch_gateup) for the real expert count.
        rows_est = kernel.expected_live_blocks(E, nvt, nblk)
        nt = kernel.gateup_nt(bm, INTER, kernel.EPI_SILU, rows_est, cus) if gateup_nt is None else gateup_nt
        A = torch.randn(T, K).to(torch.bfloat16)
        C = torch.zeros(nvt, INTER, dtype=torch.bfloat16)
        n_exp = len(experts)
        B = torch.randint(0, 256, (n_exp, K // 32, N, 16), dtype=torch.uint8)
        Bs = torch.randint(120, 134, (n_exp, K // 32, N), dtype=torch.uint8)
        args = [A, B, Bs, C, None, rows, experts, sub_ntpp, rows.numel(), nvt, T, TOP_K, K, N, n_exp, 0, 1.0, 1.0,
                K]
        return dict(name=f"mxfp4_moe_gateup_bm{bm}_nt{nt}_silu", stem="mxfp4_moe_gateup",
                    gx=math.ceil(INTER / kernel.gateup_cols(nt)), args=args, bm=bm, live=live, K=K, N=N, active=active,
                    chunks=1)
    K, N = INTER, DIM
    bm, nt, _ = mm.mxfp4_moe_down_plan(nvt, active, N, K, 0, num_cus=cus)
    sid, eid, ntpp, _ = mm.moe_align_block_size(ids, bm, E)
    live = math.ceil(int(ntpp[0]) / bm)
    steps = mm.mxfp4_moe_down_n_steps(live, N, cus, bm, nt)
    rows, experts, sub_ntpp, live = _sample(sid, eid, ntpp, bm, max_wgs)
    n_exp = len(experts)
    A = torch.randn(nvt, K).to(torch.bfloat16)
    B = torch.randint(0, 256, (n_exp, K // 32, N, 16), dtype=torch.uint8)
    Bs = torch.randint(120, 134, (n_exp, K // 32, N), dtype=torch.uint8)
    C = torch.zeros(nvt, N, dtype=torch.bfloat16)
    args = [A, B, Bs, C, None, rows, experts, sub_ntpp, rows.numel(), nvt, nvt, 1, N, n_exp, 0, steps, K]
    return dict(name=f"mxfp4_moe_down_bm{bm}_k{K}_nt{nt}", stem="mxfp4_moe_down",
                gx=math.ceil(math.ceil(N / (128 * nt)) / steps), args=args, bm=bm, live=live, K=K, N=N,
                active=active, chunks=steps)


def run(proj: str, T: int, arch: str, wgs: int, hsaco: str | None, gateup_nt: int | None = None,
        cfg: dict | None = None) -> dict:
    """cfg: the constants to simulate and compose at (default: the repository's effective clock, clock.py)."""
    if cfg is None:
        cfg = effective_config(arch)[0]
    c = _case(proj, T, arch, max(wgs, 16), gateup_nt)
    path = hsaco or kernel.KERNELS.path("bench", arch, c["stem"])
    mod = moonmath_emu.Module(open(path, "rb").read())
    info = mod.kernel_info(c["name"])
    n_sub = c["args"][6].numel()
    grid = (c["gx"], n_sub, 1)
    slots = timing.occupancy(info, kernel.THREADS, cfg)
    one = timing.simulate(mod, c["name"], grid, kernel.THREADS, c["args"], cus=[[(0, 0, 0)]], config=cfg)
    counts = mod.launch(c["name"], (1, 1, 1), kernel.THREADS, c["args"])  # one workgroup's counters
    # Whole kernel: the busiest CU runs ceil(W / CUs) workgroups (dispatch order gives it workgroups of
    # different m-blocks, so different experts), `slots` of them resident at a time; simulated as such.
    total = c["gx"] * c["live"]
    per_cu = math.ceil(total / cfg["cus_per_chip"])
    if per_cu > n_sub:
        raise ValueError(f"T={T}: the busiest CU runs {per_cu} workgroups, more than the {n_sub} sampled m-blocks "
                         f"(this script models decode shapes)")
    busy_wgs = [(i % c["gx"], i, 0) for i in range(per_cu)]
    busy = timing.simulate(mod, c["name"], grid, kernel.THREADS, c["args"], cus=[busy_wgs], slots=slots, config=cfg)
    nw = min(wgs, n_sub)
    full = timing.simulate(mod, c["name"], grid, kernel.THREADS, c["args"], cus=[[(i % c["gx"], i, 0)
                                                                                   for i in range(nw)]], config=cfg)
    hbm = c["active"] * c["N"] * c["K"] * (0.5 + 1 / 32)  # every hit expert's weights and scales, once
    t_cu = busy["cu_cycles"][0] / (cfg["clock_mhz"] * 1e6)
    t_hbm = hbm / cfg["hbm_bytes_per_s"]
    waves = kernel.THREADS // 64
    return dict(kernel=c["name"], vgpr=info["vgpr"], slots=slots, one=one["cu_cycles"][0],
                full=full["cu_cycles"][0], wgs=nw, total=total, per_cu=per_cu,
                us=max(t_cu, t_hbm) * 1e6, bound="hbm" if t_hbm > t_cu else "cu",
                vm_wait=one["stall"]["waitcnt_vm"] / waves,
                waitcnt_mfma=counts["waitcnt"] / counts["mfma"], valu_mfma=counts["valu"] / counts["mfma"],
                vmem=counts["vmem"] / waves, chunks=c["chunks"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--proj", nargs="+", choices=("gateup", "down"), default=["gateup", "down"])
    ap.add_argument("--wgs", type=int, default=4, help="co-resident workgroups of the fuller one-CU run")
    ap.add_argument("--arch", choices=("gfx942", "gfx950"), default="gfx942")
    ap.add_argument("--hsaco-gateup", default=None)
    ap.add_argument("--hsaco-down", default=None)
    ap.add_argument("--gateup-nt", type=int, default=None, help="gate/up column tiles per wave (default: planner)")
    ap.add_argument("--inter", type=int, default=INTER, help="expert width I (benchmarks.timing.moe_gfx942 uses 512)")
    a = ap.parse_args()
    globals()["INTER"] = a.inter
    os.environ["MOONMATH_EMU_ARCH"] = a.arch
    print("| T | kernel | VGPR | WGs/CU (occupancy) | cycles, 1 WG | cycles, N WGs | launch WGs (busiest CU) | "
          "whole kernel µs (bound) | waitcnt_vm windows / wave | waitcnt/MFMA | VALU/MFMA | VMEM / wave |")
    print("|" + "---|" * 12)
    for T in a.tokens:
        for proj in a.proj:
            r = run(proj, T, a.arch, a.wgs, a.hsaco_gateup if proj == "gateup" else a.hsaco_down, a.gateup_nt)
            print(f"| {T} | {r['kernel']} | {r['vgpr']} | {r['slots']} | {r['one']:.0f} | "
                  f"{r['full']:.0f} ({r['wgs']}) | "
                  f"{r['total']} ({r['per_cu']}) | {r['us']:.2f} ({r['bound']}) | {r['vm_wait']:.0f} | "
                  f"{r['waitcnt_mfma']:.3f} | {r['valu_mfma']:.2f} | {r['vmem']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
