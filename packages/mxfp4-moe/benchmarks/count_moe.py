"""Emulator instruction counts of the MXFP4 MoE kernels (gfx942, or the gfx950 a16w4 build) at the seed's
Kimi-K3 TP8 shapes.

No timing: the emulator counts instructions (per class) for a launch, and this script turns them into
counts per 16-row x N-column output tile, bytes of weight read per useful FLOP, and the registers, LDS and
occupancy of the variant the planners pick.

Shapes (seed README): 896 routed experts, top-16 uniform distinct experts per token, K = 3584, expert
width I = 384 (the TP8 shard): gate/up [K -> 2I] with the SiLU-GLU epilogue, down [I -> K].
T = 8, 32, 8192, 16384 tokens.

Counting a representative subset: every m-block of a launch runs the same instruction stream (the
kernels have no data-dependent branches besides row liveness in the epilogue and the skip of empty
blocks), so the script runs `--blocks` evenly spaced live m-blocks of the real alignment and scales the
counts by live_blocks / blocks. The weight values do not change the counts either, so the experts are
folded onto 4 physical experts (the same code runs; the memory stays small).

    python packages/mxfp4-moe/benchmarks/count_moe.py                 # the four shapes, 16 blocks each
    python packages/mxfp4-moe/benchmarks/count_moe.py --tokens 8 --blocks 0   # all blocks of T = 8
    python packages/mxfp4-moe/benchmarks/count_moe.py --arch gfx950 --epilogue silu --tokens 8 32
    python packages/mxfp4-moe/benchmarks/count_moe.py --arch gfx950 --format a4w4 --epilogue silu --tokens 8
        # a4w4 (gfx950): gate/up with the fused MXFP4-output epilogue, down on the a4w4 kernel (EPI_NONE)
"""
from __future__ import annotations

import argparse
import math
import os

import torch

os.environ.setdefault("MOONMATH_EMU_HAZARDS", "0")  # counts do not depend on the checker; it is slower

import moonmath_mxfp4_moe as mm  # noqa: E402
from moonmath_common import use_backend  # noqa: E402
from moonmath_common.codeobject import CodeObject  # noqa: E402
from moonmath_mxfp4_moe import a4w4, kernel, quant  # noqa: E402

KEYS = ("mfma", "valu", "trans", "salu", "ds", "vmem", "smem", "waitcnt", "barrier", "branch", "wave_instructions")
PHYS = 4  # physical experts the routed ones are folded onto


def route(T: int, E: int, top_k: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(T, E, generator=g).argsort(dim=1)[:, :top_k].to(torch.int32)


def subset(sid, eid, ntpp, bm, blocks):
    live = math.ceil(int(ntpp[0]) / bm)
    live_ids = [i for i in range(live) if int(eid[i]) >= 0]
    if blocks and blocks < len(live_ids):
        step = len(live_ids) / blocks
        live_ids = [live_ids[int(i * step)] for i in range(blocks)]
    rows = torch.cat([sid[i * bm:(i + 1) * bm] for i in live_ids])
    experts = torch.tensor([int(eid[i]) % PHYS for i in live_ids], dtype=torch.int32)
    return rows, experts, torch.tensor([rows.numel()], dtype=torch.int32), len(live_ids), live


LDS_PER_CU = {"gfx942": 65536, "gfx950": 160 * 1024}
CUS = {"gfx942": 304, "gfx950": 256}


def occupancy(meta, arch="gfx942") -> int:
    """Waves per SIMD: VGPRs (512 per lane per SIMD, granule 8), LDS (64 KiB per CU on gfx942, 160 KiB on
    gfx950; a workgroup puts 2 waves on each of the 4 SIMDs), at most 8."""
    vg = max(8, math.ceil((meta.vgpr + meta.agpr) / 8) * 8)
    by_vgpr = 512 // vg
    by_lds = 2 * (LDS_PER_CU[arch] // meta.lds) if meta.lds else 8
    return min(8, by_vgpr - by_vgpr % 2, by_lds)


def measure(name, launch, nvt_rows, live_blocks, n_sub, bm, n_cols, K, meta, arch="gfx942"):
    c = launch()
    scale = live_blocks / n_sub
    tiles = live_blocks * bm // 16
    per_tile = {k: c[k] * scale / tiles for k in KEYS}
    w_bytes = live_blocks * n_cols * K * (1 / 2 + 1 / 32)
    flops = 2 * nvt_rows * n_cols * K
    return {"name": name, "kernel": meta.name, "blocks": live_blocks, "block_m": bm, "per_tile": per_tile,
            "w_bytes_per_flop": w_bytes / flops, "vgpr": meta.vgpr, "sgpr": meta.sgpr, "lds": meta.lds,
            "waves_per_simd": occupancy(meta, arch), "launch_wave_instr": c["wave_instructions"] * scale}


def run(T, blocks, E=896, top_k=16, K=3584, I=384, arch="gfx942", epilogue="situ"):
    cus = CUS[arch]
    epi = {"situ": kernel.EPI_SITU, "silu": kernel.EPI_SILU}[epilogue]
    ids = route(T, E, top_k, seed=T)
    nvt = T * top_k
    active = int(torch.unique(ids).numel())
    out = []
    co_g = CodeObject.parse(kernel.KERNELS.path("bench", arch, "mxfp4_moe_gateup").read_bytes())
    co_d = CodeObject.parse(kernel.KERNELS.path("bench", arch, "mxfp4_moe_down").read_bytes())

    # gate/up: [T, K] x [2I, K] -> SiLU-GLU -> [nvt, I]
    bm = mm.mxfp4_moe_gateup_block_m(nvt, active)
    sid, eid, ntpp, nblk = mm.moe_align_block_size(ids, bm, E)
    rows, experts, sub_ntpp, n_sub, live = subset(sid, eid, ntpp, bm, blocks)
    A = torch.randn(T, K).to(torch.bfloat16)
    B = torch.randint(0, 256, (PHYS, K // 32, 2 * I, 16), dtype=torch.uint8)
    Bs = torch.randint(120, 134, (PHYS, K // 32, 2 * I), dtype=torch.uint8)
    C = torch.zeros(nvt, I, dtype=torch.bfloat16)
    nt = kernel.gateup_nt(bm, I, epi, kernel.expected_live_blocks(E, nvt, nblk), cus)  # the full launch's choice
    meta = co_g.kernels[f"mxfp4_moe_gateup_bm{bm}_nt{nt}_{epilogue}"]
    out.append(measure("gate/up", lambda: kernel.launch_gateup(
        A, B, Bs, C, None, rows, experts, sub_ntpp, n_sub, bm, nvt, top_k, epi, False, 4.0, 25.0, nt=nt),
        nvt, live, n_sub, bm, 2 * I, K, meta, arch))

    # down: [nvt, I] x [K, I] -> [nvt, K]
    dbm, dnt, steps = mm.mxfp4_moe_down_plan(nvt, active, K, I, 0, num_cus=cus)
    sid, eid, ntpp, nblk = mm.moe_align_block_size(ids, dbm, E)
    steps = mm.mxfp4_moe_down_n_steps(math.ceil(int(ntpp[0]) / dbm), K, cus, dbm, dnt)
    rows, experts, sub_ntpp, n_sub, live = subset(sid, eid, ntpp, dbm, blocks)
    A2 = torch.randn(nvt, I).to(torch.bfloat16)
    B2 = torch.randint(0, 256, (PHYS, I // 32, K, 16), dtype=torch.uint8)
    Bs2 = torch.randint(120, 134, (PHYS, I // 32, K), dtype=torch.uint8)
    C2 = torch.zeros(nvt, K, dtype=torch.bfloat16)
    meta = co_d.kernels[f"mxfp4_moe_down_bm{dbm}_k{I}_nt{dnt}"]
    r = measure("down", lambda: kernel.launch_down(
        A2, B2, Bs2, C2, None, rows, experts, sub_ntpp, n_sub, dbm, steps, dnt, nvt, 1, False),
        nvt, live, n_sub, dbm, K, I, meta, arch)
    r["n_steps"] = steps
    out.append(r)
    return T, nvt, active, out


def run_a4w4(T, blocks, E=896, top_k=16, K=3584, I=384, epilogue="silu"):
    """The a4w4 pair on gfx950: MXFP4 activations, gate/up writing the MXFP4 intermediate, down on it."""
    epi = {"situ": kernel.EPI_SITU, "silu": kernel.EPI_SILU}[epilogue]
    ids = route(T, E, top_k, seed=T)
    nvt = T * top_k
    active = int(torch.unique(ids).numel())
    co = CodeObject.parse(kernel.KERNELS.path("bench", "gfx950", "mxfp4_moe_a4w4").read_bytes())
    bm = mm.mxfp4_moe_gateup_block_m(nvt, active)
    sid, eid, ntpp, _ = mm.moe_align_block_size(ids, bm, E)
    rows, experts, sub_ntpp, n_sub, live = subset(sid, eid, ntpp, bm, blocks)
    aq, as_ = quant.quantize_reference(torch.randn(T, K).to(torch.bfloat16))
    B = torch.randint(0, 256, (PHYS, K // 32, 2 * I, 16), dtype=torch.uint8)
    Bs = torch.randint(120, 134, (PHYS, K // 32, 2 * I), dtype=torch.uint8)
    Cq = torch.zeros(nvt, I // 2, dtype=torch.uint8)
    Cs = torch.zeros(nvt, I // 32, dtype=torch.uint8)
    meta = co.kernels[f"mxfp4_moe_a4w4_bm{bm}_nt2_{epilogue}_q"]
    out = [measure("gate/up", lambda: a4w4.launch_a4w4(
        aq, as_, B, Bs, Cq, Cs, None, rows, experts, sub_ntpp, n_sub, bm, nvt, top_k, epi, False, 4.0, 25.0),
        nvt, live, n_sub, bm, 2 * I, K, meta, "gfx950")]
    dbm = bm
    sid, eid, ntpp, _ = mm.moe_align_block_size(ids, dbm, E)
    rows, experts, sub_ntpp, n_sub, live = subset(sid, eid, ntpp, dbm, blocks)
    iq, is_ = quant.quantize_reference(torch.randn(nvt, I).to(torch.bfloat16))
    B2 = torch.randint(0, 256, (PHYS, I // 32, K, 16), dtype=torch.uint8)
    Bs2 = torch.randint(120, 134, (PHYS, I // 32, K), dtype=torch.uint8)
    C2 = torch.zeros(nvt, K, dtype=torch.bfloat16)
    nt, steps = a4w4.a4w4_down_plan(live, K, dbm)
    meta = co.kernels[f"mxfp4_moe_a4w4_down_bm{dbm}_nt{nt}"]
    r = measure("down", lambda: a4w4.launch_a4w4_down(
        iq, is_, B2, Bs2, C2, None, rows, experts, sub_ntpp, n_sub, dbm, nvt, 1, False, nt=nt, n_steps=steps),
        nvt, live, n_sub, dbm, K, I, meta, "gfx950")
    r["n_steps"] = steps
    out.append(r)
    return T, nvt, active, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[8, 32, 8192, 16384])
    ap.add_argument("--blocks", type=int, default=16, help="live m-blocks counted per launch (0 = all)")
    ap.add_argument("--arch", choices=sorted(CUS), default="gfx942")
    ap.add_argument("--epilogue", choices=("situ", "silu"), default="situ")
    ap.add_argument("--format", choices=("a16w4", "a4w4"), default="a16w4",
                    help="activation format (a4w4: gfx950 only)")
    args = ap.parse_args()
    if args.format == "a4w4" and args.arch != "gfx950":
        ap.error("--format a4w4 needs --arch gfx950")
    os.environ["MOONMATH_EMU_ARCH"] = args.arch
    hdr = ("| T | rows | experts hit | proj | kernel | live blocks | MFMA | VALU | trans | SALU | DS | VMEM | "
           "waitcnt | barrier | all | VALU/MFMA | W bytes/FLOP | VGPR | LDS | waves/SIMD |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    with use_backend("emu"):
        for T in args.tokens:
            if args.format == "a4w4":
                T, nvt, active, res = run_a4w4(T, args.blocks, epilogue=args.epilogue)
            else:
                T, nvt, active, res = run(T, args.blocks, arch=args.arch, epilogue=args.epilogue)
            for r in res:
                p = r["per_tile"]
                print(f"| {T} | {nvt} | {active} | {r['name']} | {r['kernel']} | {r['blocks']} | {p['mfma']:.0f} | "
                      f"{p['valu']:.0f} | {p['trans']:.0f} | {p['salu']:.0f} | {p['ds']:.0f} | {p['vmem']:.0f} | "
                      f"{p['waitcnt']:.0f} | {p['barrier']:.0f} | {p['wave_instructions']:.0f} | "
                      f"{p['valu'] / p['mfma']:.2f} | {r['w_bytes_per_flop']:.4f} | {r['vgpr']} | {r['lds']} | "
                      f"{r['waves_per_simd']} |", flush=True)


if __name__ == "__main__":
    main()
