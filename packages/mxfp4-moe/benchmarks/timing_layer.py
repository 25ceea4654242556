"""Modeled time (moonmath_emu.timing, docs/performance.md) of the a4w4 MoE layer on gfx950 at GPU MODE's
`amd-moe-mxfp4` shapes with d_expert 256 (DeepSeek-R1: dim 7168, 256 routed experts + 1 shared, top-8 + 1),
ours (mxfp4_quantize + mxfp4_moe_layer_a4w4) beside AITER's 1-stage a4w4 object (benchmarks/peers/moe.py)
on the same routing. MODELED, never a speed claim; task.yml's AITER reference latencies (152.7 / 239.0 /
336.5 us, measured on MI355X through AITER's 2-stage CK path) are printed beside as the bar.

Every launch, ours and AITER's, is simulated and composed at the repository's effective clock
(benchmarks/timing/clock.py: run.py's calibrated clock, HBM bytes per cycle = bandwidth / that clock; before
session 9 this script ran at the 2400 MHz peak clock). Per kernel: one CU is simulated with `slots`
co-resident workgroups (its occupancy, at most the launch's workgroups per CU) from the middle of the grid;
time = timing.kernel_time(workgroups, that round's cycles, slots, hbm_bytes) with hbm_bytes the weights of
every expert hit plus activations and output (the same for both: each reads every hit expert's gate/up and
down weights once). Weights are random bytes (the cycle model does not depend on values).

    python packages/mxfp4-moe/benchmarks/timing_layer.py [--bs 16 128 512] [--block-m 16|32|48] [--ours-only]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("MOONMATH_EMU_HAZARDS", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: benchmarks.peers, .timing

import moonmath_emu  # noqa: E402
import moonmath_emu.timing as timing  # noqa: E402
from benchmarks.peers import harness, moe  # noqa: E402
from benchmarks.timing import clock  # noqa: E402

DIM, INTER, ROUTED, TOP_K = 7168, 256, 256, 8
AITER_REF_US = {16: 152.7, 128: 239.0, 512: 336.5}  # task.yml, E 257, d_expert 256


def _routing(T: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(T, ROUTED, generator=g).softmax(-1)
    w, ids = torch.topk(scores, TOP_K, dim=-1)
    ids = torch.cat((ids.to(torch.int32), torch.full((T, 1), ROUTED, dtype=torch.int32)), 1).contiguous()
    return ids, torch.cat((w, torch.ones(T, 1)), 1).contiguous()


def _hbm_bytes(ids: torch.Tensor, T: int) -> float:
    hit = int(torch.unique(ids).numel())
    per_expert = 2 * INTER * DIM // 2 + 2 * INTER * DIM // 32 + DIM * INTER // 2 + DIM * INTER // 32
    return hit * per_expert + T * (DIM // 2 + DIM // 32) + T * ids.shape[1] * DIM * 2  # weights, A, C


def _round(mod, kernel, grid, block, args, cfg, rows_y: int, per_row: int = 1) -> tuple[float, int]:
    """Cycles of one round of `slots` co-resident workgroups (grid rows from the middle of the live blocks;
    per_row workgroups per row, x = 0 .. per_row - 1)."""
    # co-resident workgroups: the kernel's occupancy, but no more than the launch puts on one CU
    slots = min(timing.occupancy(mod.kernel_info(kernel), block, cfg), -(-(rows_y * per_row) // cfg["cus_per_chip"]))
    y0 = max(0, rows_y // 2 - slots // (2 * per_row))
    wgs = [(i % per_row, min(y0 + i // per_row, rows_y - 1), 0) for i in range(slots)]
    rep = timing.simulate(mod, kernel, grid, block, args, cus=[wgs], config=cfg, slots=slots)
    return float(rep["cu_cycles"][0]), slots


def ours(T: int, ids, tw, w13, s13, w2, s2, cfg, block_m: int | None = None, splits: int | None = None) -> dict:
    import moonmath_mxfp4_moe as mm
    from moonmath_mxfp4_moe import a4w4, kernel, quant

    E = ROUTED + 1
    nvt = T * ids.shape[1]
    x = torch.randn(T, DIM).to(torch.bfloat16)
    B13, Bs13 = mm.repack_mxfp4(w13), mm.repack_mxfp4_scales(s13)
    B2, Bs2 = mm.repack_mxfp4(w2), mm.repack_mxfp4_scales(s2)
    bm = mm.mxfp4_moe_layer_a4w4_block_m(ids, E, cfg["cus_per_chip"]) if block_m is None else block_m
    sp = mm.mxfp4_moe_layer_a4w4_down_splits(ids, E, bm, cfg["cus_per_chip"]) if splits is None else splits
    sid, eid, ntpp, nblk = mm.moe_align_block_size(ids, bm, E)
    live = -(-int(ntpp[0]) // bm)
    aq, as_ = mm.mxfp4_quantize_reference(x)
    y = torch.zeros(nvt, DIM, dtype=torch.bfloat16)
    name = f"mxfp4_moe_a4w4_layer_bm{bm}_i{INTER}_silu"
    mod = moonmath_emu.Module(kernel.KERNELS.path("bench", "gfx950", "mxfp4_moe_a4w4").read_bytes())
    A, a_stride = a4w4._a_operand(aq)
    args = [A, as_, B13, Bs13, B2, Bs2, y, tw.reshape(-1).float().contiguous(), sid, eid, ntpp, sid.numel(), nvt, T,
            ids.shape[1], DIM, DIM, E, 1, 1.0, 1.0, a_stride]
    cyc, slots = _round(mod, name, (sp, nblk, 1), INTER, args, cfg, live, sp)
    t = timing.kernel_time(live * sp, cyc, slots, cfg, hbm_bytes=_hbm_bytes(ids, T))
    # the quantiser: groups of 32 over workgroups of quant.THREADS lanes (as mxfp4_quantize launches it)
    qmod = moonmath_emu.Module(kernel.KERNELS.path("bench", "gfx950", "mxfp4_quant").read_bytes())
    qs, qb = torch.empty_like(as_), torch.empty_like(aq)
    groups, qthreads = T * DIM // 32, quant.THREADS
    qgrid = (-(-groups // qthreads), 1, 1)
    # co-resident on one CU: its occupancy, but no more than the launch puts there (as _round)
    qslots = min(timing.occupancy(qmod.kernel_info("mxfp4_quant_bf16"), qthreads, cfg),
                 -(-qgrid[0] // cfg["cus_per_chip"]))
    qrep = timing.simulate(qmod, "mxfp4_quant_bf16", qgrid, qthreads, [x, qb, qs, T, DIM, DIM],
                           cus=[[(i, 0, 0) for i in range(min(qslots, qgrid[0]))]], config=cfg)
    tq = timing.kernel_time(qgrid[0], float(qrep["cu_cycles"][0]), qslots, cfg, hbm_bytes=T * DIM * 2.5)
    return {"us": 1e6 * (t["seconds"] + tq["seconds"]), "layer": t, "quant_us": 1e6 * tq["seconds"],
            "workgroups": live * sp, "slots": slots, "round_cycles": cyc, "block_m": bm, "kernel": name,
            "down_splits": sp}


def aiter(T: int, ids, tw, w13, s13, w2, s2, cfg) -> dict:
    seen = {}

    def fake(arch, rel, fields, values, grid, block, check_hazards=False):
        seen.update(arch=arch, rel=rel, fields=fields, values=dict(values), grid=grid, block=block)
        return {}

    from moonmath_mxfp4_moe import quant

    x = torch.randn(T, DIM).to(torch.bfloat16)
    xq, xs = quant.quantize_reference(x)
    real = moe.launch
    moe.launch = fake
    try:
        moe.run_aiter_fmoe_a4w4(xq, xs, w13, s13, w2, s2, ids, tw)
    finally:
        moe.launch = real
    mod, kernel = harness.load(seen["arch"], seen["rel"])
    args = harness.pack_args(mod, kernel, seen["fields"], seen["values"])
    live = -(-int(seen["values"]["num_valid"][0]) // moe.BLOCK_M)
    cyc, slots = _round(mod, kernel, seen["grid"], seen["block"], args, cfg, live)
    t = timing.kernel_time(live, cyc, slots, cfg, hbm_bytes=_hbm_bytes(ids, T))
    return {"us": 1e6 * t["seconds"], "layer": t, "workgroups": live, "slots": slots, "round_cycles": cyc,
            "kernel": seen["rel"].split("/")[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bs", type=int, nargs="+", default=[16, 128, 512])
    ap.add_argument("--block-m", type=int, choices=(16, 32, 48), default=None,
                    help="force our layer's M tile (default: mxfp4_moe_layer_a4w4_block_m's plan)")
    ap.add_argument("--down-splits", type=int, default=None,
                    help="force our layer's workgroups per M block (default: mxfp4_moe_layer_a4w4_down_splits's plan)")
    ap.add_argument("--ours-only", action="store_true", help="skip AITER's row")
    a = ap.parse_args()
    os.environ["MOONMATH_EMU_ARCH"] = "gfx950"
    cfg, _, src = clock.effective_config("gfx950")
    E = ROUTED + 1
    g = torch.Generator().manual_seed(1)
    w13 = torch.randint(0, 256, (E, 2 * INTER, DIM // 2), generator=g, dtype=torch.uint8)
    s13 = torch.randint(118, 124, (E, 2 * INTER, DIM // 32), generator=g, dtype=torch.uint8)
    w2 = torch.randint(0, 256, (E, DIM, INTER // 2), generator=g, dtype=torch.uint8)
    s2 = torch.randint(118, 124, (E, DIM, INTER // 32), generator=g, dtype=torch.uint8)
    print(f"clock {cfg['clock_mhz']:.1f} MHz ({src}), {cfg['cus_per_chip']} CUs, "
          f"HBM {cfg['hbm_bytes_per_s'] / 1e12:.1f} TB/s "
          "(moonmath_emu.timing gfx950 constants)")
    print("| bs | kernel | workgroups | slots/CU | round cycles | rounds | bound | modeled us | task.yml AITER us |")
    print("|---|---|---|---|---|---|---|---|---|")
    for T in a.bs:
        ids, tw = _routing(T, seed=T)
        runs = [("ours", lambda *x: ours(*x, block_m=a.block_m, splits=a.down_splits))]
        if not a.ours_only:
            runs.insert(0, ("AITER", aiter))
        for who, f in runs:
            r = f(T, ids, tw, w13, s13, w2, s2, cfg)
            L = r["layer"]
            extra = f" (incl. quantise {r['quant_us']:.2f})" if "quant_us" in r else ""
            kname = r["kernel"] + (f" x{r['down_splits']}" if r.get("down_splits", 1) > 1 else "")
            print(f"| {T} | {who}: {kname} | {r['workgroups']} | {r['slots']} | {r['round_cycles']:.0f} | "
                  f"{L['rounds']} | {L['bound']} | {r['us']:.1f}{extra} | {AITER_REF_US[T]} |", flush=True)


if __name__ == "__main__":
    main()
