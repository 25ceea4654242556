"""Emulator measurements of the gfx950 attention forward beside AITER's gfx950 FMHA v3 forward (no timing).

For each shape both kernels run on moonmath-emu on the same inputs; printed per unit of work (one
16-row x 64-key block of *visible* scores, so causal and dense compare alike): wave-instructions,
MFMA, VALU, transcendental, SALU, DS, VMEM, SMEM, waitcnt, barrier; the rel. error of each against
float64 (Frobenius and max|d|/max|ref|); the common perfmodel's modeled MI355X time (an issue-rate
guide, not a speed claim); the code objects' registers/LDS. AITER's column needs the repository's
peer harness (benchmarks/peers) and its pinned wheel; without them only ours is printed.

    python packages/attention-gfx950/benchmarks/bench_attention_gfx950_emu.py            # default shapes
    python packages/attention-gfx950/benchmarks/bench_attention_gfx950_emu.py --shape 1:8:8:2048:2048:128:1
    (--shape B:Hq:Hkv:Sq:Skv:Dqk:causal; add --num-cus N to change the planner's CU count)
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx950")

from moonmath_attention_gfx950 import kernel as ak  # noqa: E402
from moonmath_common import perfmodel, use_backend  # noqa: E402

KEYS = ["wave_instructions", "mfma", "valu", "trans", "salu", "ds", "vmem", "smem", "waitcnt", "barrier"]
DEFAULT = ["1:2:2:1024:1024:128:0", "1:2:2:1024:1024:128:1", "1:2:2:1024:1024:192:0", "1:2:2:1024:1024:192:1"]


def peers():
    for root in Path(__file__).resolve().parents:
        if (root / "benchmarks" / "peers" / "fmha_v3.py").exists():
            sys.path.insert(0, str(root))
            from benchmarks.peers import fmha_v3, wheel

            why = wheel.available()
            return (fmha_v3, None) if why is None else (None, why)
    return None, "the peer harness (benchmarks/peers) is not beside this package"


def visible_pairs(Sq, Skv, causal):
    if not causal:
        return Sq * Skv
    return sum(min(Skv, max(0, i + 1 + Skv - Sq)) for i in range(Sq))


def add(total, c):
    for k in KEYS:
        total[k] = total.get(k, 0) + c.get(k, 0)
    for op, n in c.get("mfma_by_opcode", {}).items():
        total.setdefault("mfma_by_opcode", {})
        total["mfma_by_opcode"][op] = total["mfma_by_opcode"].get(op, 0) + n
    return total


def errors(o, ref):
    d = o.double() - ref
    return float(d.norm() / ref.norm()), float(d.abs().max() / ref.abs().max())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", help="B:Hq:Hkv:Sq:Skv:Dqk:causal")
    ap.add_argument("--num-cus", type=int, default=256)
    args = ap.parse_args()
    fmha, why = peers()
    if fmha is None:
        print(f"AITER column skipped: {why}")
    for dims, m in ak.FWD_KERNELS.items():
        km = ak.KERNELS.kernel_meta("bench", ak.ARCH, ak.fwd_code_object(ak.FWD_CODE_OBJECT, dims), m)
        print(f"{m}: VGPR {km.vgpr} AGPR {km.agpr} SGPR {km.sgpr} LDS {km.lds} scratch {km.scratch}")
    for spec in args.shape or DEFAULT:
        B, Hq, Hkv, Sq, Skv, D, causal = (int(x) for x in spec.split(":"))
        causal, Dv = bool(causal), 128 if D == 192 else D
        g = torch.Generator().manual_seed(0)
        q = torch.randn(B, Hq, Sq, D, generator=g).to(torch.bfloat16)
        k = torch.randn(B, Hkv, Skv, D, generator=g).to(torch.bfloat16)
        v = torch.randn(B, Hkv, Skv, Dv, generator=g).to(torch.bfloat16)
        units = B * Hq * visible_pairs(Sq, Skv, causal) / (16 * 64)
        rows = []
        out = torch.empty(B, Hq, Sq, Dv, dtype=torch.bfloat16)
        lse = torch.empty(B, Hq, Sq)
        with use_backend("emu"), ak.planner_options(num_cus=args.num_cus):
            t0 = time.time()
            cs = ak.run_forward(q, k, v, out, lse, "bhsd", causal, 1.0 / math.sqrt(D))
            t_ours = time.time() - t0
            plan = ak.plan_batch(B, Sq, Skv, Hq, Hkv, causal)
        ours = {}
        for c in cs:
            add(ours, c)
        rows.append((f"ours ({len(cs)} launch{'es' if len(cs) > 1 else ''}, {plan['n_items']} items)", ours, out,
                     t_ours))
        if fmha is not None and D in (128, 192):    # AITER's gfx950 v3 forward has these two head dims only
            t0 = time.time()
            o_a, _, c_a = fmha.run_aiter_fmha(q, k, v, causal=causal, arch="gfx950", return_lse=True)
            rows.append((f"AITER {c_a['kernel'].split('/')[-1]}", add({}, c_a), o_a, time.time() - t0))
            ref, _ = fmha.reference_fmha(q, k, v, causal=causal)
        else:
            from moonmath_common.numerics import softmax_attention

            rep = Hq // Hkv
            end = (torch.arange(Sq) + Skv - Sq + 1).view(1, Sq) if causal else None
            ref, _ = softmax_attention(q.reshape(B * Hq, Sq, D), k.repeat_interleave(rep, 1).reshape(B * Hq, Skv, D),
                                       v.repeat_interleave(rep, 1).reshape(B * Hq, Skv, Dv), 1.0 / math.sqrt(D), end,
                                       acc_dtype=torch.float64)
            ref = ref.view(B, Hq, Sq, Dv)
        print(f"\n### B={B} Hq={Hq} Hkv={Hkv} Sq={Sq} Skv={Skv} Dqk={D} causal={causal}: {units:.0f} units "
              f"(16 rows x 64 visible keys)\n")
        print("| kernel | " + " | ".join(KEYS) + " | rel. Frobenius | max rel. | modeled MI355X us | emu s |")
        print("|---" * (len(KEYS) + 5) + "|")
        for name, c, o, t in rows:
            fro, mx = errors(o, ref)
            mod = perfmodel.model(c, "gfx950")["modeled_s"] * 1e6
            print(f"| {name} | " + " | ".join(f"{c.get(k, 0) / units:.1f}" for k in KEYS)
                  + f" | {fro:.3e} | {mx:.3e} | {mod:.2f} | {t:.1f} |")


if __name__ == "__main__":
    main()
