"""Instruction mix of the gfx942 MHA forward on the emulator, ours beside AITER's fwd_hd128_bf16_<mode>.co.

Per unit of work = one 16 x 64 (q x kv) tile of one head: every emulator counter of all our launches
(V transpose, dense, split, merge) and of AITER's one launch, divided by B*H*Sq*Skv / (16*64); the
modeled time of the launch (moonmath_common.perfmodel's issue-rate model, compute only, MI300X). And the
figure the issue asks for: non-MFMA wave-instructions per 32x32x8-MFMA-equivalent of work (16384 MFMA
flops; one 32x32x8 = two 16x16x16). Runs the peer harness (benchmarks/peers at the repository root; it
fetches the pinned AITER wheel). Not a timing: no hardware speed claim.

    python packages/mha-gfx942/benchmarks/bench_mha_emu.py [--shape B H Sq Skv] [--modes rtna rtne rtz]
                                                           [--chart out.png]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[3]
MFMA_FLOPS = {"v_mfma_f32_16x16x16_bf16": 16 * 16 * 16 * 2, "v_mfma_f32_32x32x8_bf16": 32 * 32 * 8 * 2}
KEYS = ("wave_instructions", "mfma", "valu", "trans", "salu", "smem", "vmem", "ds", "waitcnt", "barrier", "branch")


def _sum(counters: list[dict]) -> dict:
    from moonmath_common.perfmodel import model

    tot = {k: 0 for k in KEYS}
    tot["mfma_flops"] = 0
    tot["modeled_us"] = sum(model(c, "gfx942")["compute_s"] for c in counters) * 1e6
    for c in counters:
        for k in KEYS:
            tot[k] += c.get(k, 0)
        for op, n in c.get("mfma_by_opcode", {}).items():
            if op not in MFMA_FLOPS:
                raise ValueError(f"unknown MFMA {op}: add its flops")
            tot["mfma_flops"] += n * MFMA_FLOPS[op]
    return tot


def mix(B: int, H: int, Sq: int, Skv: int, mode: str, seed: int = 0) -> tuple[dict, dict]:
    from benchmarks.peers.fmha_v3 import run_aiter_fmha
    from moonmath_common import use_backend
    from moonmath_mha_gfx942 import kernel

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, s, 128, generator=g).to(torch.bfloat16) for s in (Sq, Skv, Skv))
    with use_backend("emu"):
        out = torch.empty_like(q)
        ours = _sum(kernel.run(q, k, v, out, "bhsd", mode))
    _, _, theirs = run_aiter_fmha(q, k, v, round_mode=mode)
    theirs = _sum([theirs])
    units = B * H * Sq * Skv / (16 * 64)
    rows = {}
    for name, c in (("ours", ours), ("AITER", theirs)):
        r = {k: c[k] / units for k in KEYS}
        r["non-MFMA per 32x32x8"] = (c["wave_instructions"] - c["mfma"]) / (c["mfma_flops"] / 16384)
        r["modeled us (issue model)"] = c["modeled_us"]
        rows[name] = r
    return rows["ours"], rows["AITER"]


def hot_loop(B: int, H: int, Sq: int, Skv: int, mode: str) -> tuple[float, float, float]:
    """Steady-state main-loop cost, measured differentially: the same q with Skv and 2*Skv keys; the
    increase in non-MFMA wave-instructions over the increase in 32x32x8-equivalents of MFMA work. Ours:
    the attention kernel alone (no tail split: ``tail=False``), and separately the V-transpose kernel's
    share per 32x32x8-equivalent; AITER: its one kernel. Returns (ours, ours' V transpose, AITER)."""
    from benchmarks.peers.fmha_v3 import run_aiter_fmha
    from moonmath_common import use_backend
    from moonmath_mha_gfx942 import kernel

    g = torch.Generator().manual_seed(1)
    q = torch.randn(B, H, Sq, 128, generator=g).to(torch.bfloat16)
    res = {}
    for n in (Skv, 2 * Skv):
        k, v = (torch.randn(B, H, n, 128, generator=g).to(torch.bfloat16) for _ in range(2))
        with use_backend("emu"):
            launches = kernel.run(q, k, v, torch.empty_like(q), "bhsd", mode, tail=False)
        res[n] = (_sum(launches[1:]), _sum(launches[:1]), _sum([run_aiter_fmha(q, k, v, round_mode=mode)[2]]))
    out = []
    for i in range(3):
        a, b = res[Skv][i], res[2 * Skv][i]
        d_non = (b["wave_instructions"] - b["mfma"]) - (a["wave_instructions"] - a["mfma"])
        d_main = res[2 * Skv][i if i != 1 else 0]["mfma_flops"] - res[Skv][i if i != 1 else 0]["mfma_flops"]
        out.append(d_non / (d_main / 16384))
    return out[0], out[1], out[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs=4, default=[1, 2, 512, 2048], metavar=("B", "H", "SQ", "SKV"))
    ap.add_argument("--modes", nargs="+", default=["rtna", "rtne", "rtz"])
    ap.add_argument("--chart", type=Path, help="write a bar chart (PNG) of the per-unit mix")
    ap.add_argument("--loop-shape", type=int, nargs=4, default=[1, 1, 256, 1024], metavar=("B", "H", "SQ", "SKV"),
                    help="shape of the differential hot-loop measurement (Skv and 2*Skv)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    B, H, Sq, Skv = args.shape
    print(f"per 16x64 (q x kv) tile of one head, B={B} H={H} Sq={Sq} Skv={Skv} (emulator counters)\n")
    cols = list(KEYS) + ["non-MFMA per 32x32x8", "modeled us (issue model)"]
    print("| mode | kernel | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    results = {}
    for mode in args.modes:
        ours, theirs = mix(B, H, Sq, Skv, mode)
        results[mode] = (ours, theirs)
        for name, r in (("ours", ours), ("AITER", theirs)):
            print(f"| {mode} | {name} | " + " | ".join(f"{r[c]:.2f}" for c in cols) + " |")
    lb, lh, lsq, lskv = args.loop_shape
    print(f"\nsteady-state main loop (Skv {lskv} -> {2 * lskv}, B={lb} H={lh} Sq={lsq}): non-MFMA wave-instructions "
          "per 32x32x8-equivalent MFMA\n")
    print("| mode | ours (attention kernel) | ours (+ V transpose kernel) | AITER v3 |")
    print("|---|---|---|---|")
    for mode in args.modes:
        ours, vt, theirs = hot_loop(lb, lh, lsq, lskv, mode)
        print(f"| {mode} | {ours:.2f} | {ours + vt:.2f} | {theirs:.2f} |")
    if args.chart:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        cats = ["mfma", "valu", "trans", "salu", "vmem", "ds", "waitcnt", "barrier", "branch"]
        fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), sharey=True, squeeze=False)
        for ax, (mode, (ours, theirs)) in zip(axes[0], results.items()):
            x = range(len(cats))
            ax.bar([i - 0.2 for i in x], [ours[c] for c in cats], 0.4, label="ours")
            ax.bar([i + 0.2 for i in x], [theirs[c] for c in cats], 0.4, label="AITER v3")
            ax.set_xticks(list(x), cats, rotation=45)
            ax.set_title(f"{mode}: wave-instructions per 16x64 tile")
            ax.set_xlabel("mfma: ours 16x16x16, AITER 32x32x8 (same flops per tile)")
            ax.legend()
        fig.suptitle(f"gfx942 MHA forward, B={B} H={H} Sq={Sq} Skv={Skv} (moonmath-emu counters)")
        fig.tight_layout()
        fig.savefig(args.chart, dpi=110)
        print(f"\nchart: {args.chart}")


if __name__ == "__main__":
    main()
