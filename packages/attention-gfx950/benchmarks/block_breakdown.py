"""Where one 64-key block's cycles go, ours beside AITER's gfx950 v3 object (emulator counts + timing model).

    MOONMATH_EMU_THREADS=1 python packages/attention-gfx950/benchmarks/block_breakdown.py [o128 o128c o192 a128 a192]

o<D>[c]: our forward, Dqk D (Dv 128), dense or (c) causal; a<D>: AITER's fwd_hd<D>... .co (dense). Everything is
differential, so the prologue and epilogue drop out: a dense item against Skv = 2048 and 8192 (AITER: its own fit,
1024 and 2048, as benchmarks/timing/run.py), the causal heaviest tile at Sq = Skv = 2048 and 4096, divided by the
added key blocks. The timing model runs the sample of benchmarks/timing/ours.py (2 CUs of XCD 0: q tiles 0 and 8 of
one head, or item 0 of two GQA heads) and prints, per block and per 256 query rows (AITER's d192 workgroup has 128):
modeled cycles, wave issue windows by outcome, pipe busy per SIMD-cycle and LDS cycles (a conflict-free read moves
256 B per cycle); the emulator's counters give the hardware-independent instruction counts of one workgroup per
block (dense only). MODELED: the gfx950 timing constants are unsourced (docs/performance.md).
"""
from __future__ import annotations

import math
import os
import pathlib
import sys

import torch

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx950")
ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from benchmarks.peers import fmha_v3  # noqa: E402
from benchmarks.timing import clock  # noqa: E402
from benchmarks.timing import ours as O  # noqa: E402
from benchmarks.timing.fmha import model_wg  # noqa: E402
from moonmath_attention_gfx950 import kernel as K  # noqa: E402
from moonmath_common import use_arch, use_backend  # noqa: E402

KEYS = ["wave_instructions", "mfma", "valu", "trans", "salu", "ds", "vmem", "smem", "waitcnt", "barrier"]
CFG = clock.effective_config("gfx950")[0]  # cycles simulated at the effective clock (HBM bytes per cycle at it)
XCDS = CFG["xcds"]


def _inputs(sq, skv, dqk, dv=128, hq=1):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(1, hq, sq, dqk, generator=g).bfloat16(), torch.randn(1, 1, skv, dqk, generator=g).bfloat16(),
            torch.randn(1, 1, skv, dv, generator=g).bfloat16())


def ours_counts(skv, dqk):
    q, k, v = _inputs(256, skv, dqk)
    out = torch.empty(1, 1, 256, 128).bfloat16()
    with use_backend("emu"), use_arch("gfx950"), K.planner_options(num_cus=1):
        cs = K.run_forward(q, k, v, out, None, "bhsd", False, 1.0 / math.sqrt(dqk))
    return {n: sum(c.get(n, 0) for c in cs) for n in KEYS}


def aiter_counts(skv, dqk):
    rows = fmha_v3.kernel_for("gfx950", dqk, 128, False, "rtne")[2]
    q, k, v = _inputs(rows, skv, dqk)
    _, _, c = fmha_v3.run_aiter_fmha(q, k, v, arch="gfx950")
    return {n: c.get(n, 0) for n in KEYS}


def _per_cu(rep):
    n = len(rep["cu_cycles"])
    return {"cycles": sum(rep["cu_cycles"]) / n, "stall": {k: v / n for k, v in rep["stall"].items()},
            "pipe": {k: v / n for k, v in rep["pipe_busy"].items()}, "lds": rep["mem"]["lds_cycles"] / n,
            "lds_ideal": rep["mem"]["lds_ideal_cycles"] / n}


def ours_sim(skv, dqk, causal):
    if causal:  # item 0 of heads 0 and XCDS (workgroups 0 and XCDS: both on XCD 0), one kv head
        (L,) = O._attn_launch(1, 2 * XCDS, 1, skv, skv, dqk, 128, True, num_cus=1)
        cus = [[(0, 0, 0)], [(XCDS, 0, 0)]]
    else:
        (L,) = O._attn_launch(1, 1, 1, (XCDS + 1) * 256, skv, dqk, 128, False, num_cus=1)
        cus = O._xcd0_cus(2, 1, L["grid"][0], XCDS)
    return _per_cu(O.simulate(L, cus, CFG))


def report(name, r1, r2, nblk, rows, c1=None, c2=None):
    norm = 256 / rows
    cyc = (r2["cycles"] - r1["cycles"]) / nblk
    st = {k: (r2["stall"][k] - r1["stall"][k]) / nblk for k in r2["stall"]}
    tot = sum(st.values())
    pb = {k: (r2["pipe"][k] - r1["pipe"].get(k, 0)) / nblk for k in r2["pipe"]}
    print(f"\n## {name}: {cyc:.0f} modeled cycles per 64-key block of a {rows}-row workgroup "
          f"({cyc * norm:.0f} per 256 rows)")
    print("  issue windows: " + ", ".join(f"{k} {v / tot:.1%}" for k, v in st.items() if v))
    simd_cycles = CFG["simds_per_cu"] * cyc
    print("  pipe busy per SIMD-cycle: " + ", ".join(f"{k} {v / simd_cycles:.0%}" for k, v in pb.items()))
    lds, ideal = (r2["lds"] - r1["lds"]) / nblk, (r2["lds_ideal"] - r1["lds_ideal"]) / nblk
    print(f"  LDS cycles per block {lds:.0f} (conflict-free {ideal:.0f}: {ideal * 256 / 1024:.0f} KiB read by DS "
          "instructions)")
    if c1 is not None:
        cnt = {k: (c2[k] - c1[k]) / nblk for k in KEYS}
        mf = cnt["mfma"]
        print("  wave-instructions per block (whole workgroup): "
              + ", ".join(f"{k} {v:.0f}" for k, v in cnt.items()))
        per = {k: cnt[k] / mf for k in ("valu", "trans", "salu", "waitcnt")}
        print(f"  per MFMA (32x32x16): non-MFMA {(cnt['wave_instructions'] - mf) / mf:.2f}, "
              + ", ".join(f"{k} {v:.2f}" for k, v in per.items())
              + f"; barriers per wave and block {cnt['barrier'] / (rows / 32):.2f}")


def main():
    for w in sys.argv[1:] or ["o128", "o128c", "o192", "a128", "a192"]:
        dqk, causal = int(w[1:4]), w.endswith("c")
        if w[0] == "o":
            s1, s2 = (2048, 4096) if causal else O.SKV_DENSE_FIT
            c = (None, None) if causal else (ours_counts(s1, dqk), ours_counts(s2, dqk))
            report(f"ours attn_fwd d{dqk} {'causal, heaviest tile' if causal else 'dense'}", ours_sim(s1, dqk, causal),
                   ours_sim(s2, dqk, causal), (s2 - s1) // 64, 256, *c)
        else:
            s1, s2 = 1024, 2048
            rows = fmha_v3.kernel_for("gfx950", dqk, 128, False, "rtne")[2]
            r1, r2 = (_per_cu(model_wg("gfx950", s, dqk=dqk, ncu=2, cfg=CFG)) for s in (s1, s2))
            report(f"AITER {fmha_v3.kernel_for('gfx950', dqk, 128, False, 'rtne')[0].split('/')[-1]}", r1, r2,
                   (s2 - s1) // 64, rows, aiter_counts(s1, dqk), aiter_counts(s2, dqk))


if __name__ == "__main__":
    main()
