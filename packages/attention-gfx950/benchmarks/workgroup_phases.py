"""A whole workgroup's modeled cycles by barrier interval, ours beside AITER's v3 (timing model, MODELED).

    MOONMATH_AITER_CACHE=... MOONMATH_EMU_THREADS=1 python packages/attention-gfx950/benchmarks/workgroup_phases.py \
        [--skv 512] [--causal] [--windows 512,2048,4096,8192] [--code-objects DIR]

block_breakdown.py is differential (prologue and epilogue drop out); this script is not. It runs the sample of
benchmarks/timing/ours.py (2 CUs of XCD 0; d128; dense: q tiles 0 and 8 of one head, causal: the heaviest tile of
two q heads) at one Skv and prints, per wave group and per code region between two `s_barrier`s (prologue, block 0,
the two unrolled loop blocks, the last PV, the epilogue), the cycles a wave spends there by cause (`stall_by_pc`,
summed over the region's instructions, per wave and CU; a loop region's figures add up over its visits). AITER's
fwd_hd128_bf16.co at the same Skv gives its workgroup cycles and its waits before its first MFMA.

--windows S1,S2,S3,S4: per-block cycles over an early window (S1 -> S2) and a late one (S3 -> S4), and the issue
cycles per wave and block of the instructions that run only when a row's max moved (O's rescale: the v_pk_mul_f32
of the loop); with random inputs the running max moves often in the first blocks and rarely later, so this is the
data-dependent part of a block's cost (docs/kernels/attention_gfx950.md, "Session 7").
"""
from __future__ import annotations

import argparse
import collections
import os
import pathlib
import sys

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx950")
ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from benchmarks.timing import clock  # noqa: E402
from benchmarks.timing import ours as O  # noqa: E402
from benchmarks.timing.fmha import model_wg  # noqa: E402

CFG = clock.effective_config("gfx950")[0]  # cycles simulated at the effective clock (HBM bytes per cycle at it)
XCDS = CFG["xcds"]
CAUSES = ["issued", "dependency", "pipe_busy", "arbitration", "barrier", "waitcnt_lgkm", "waitcnt_vm", "branch", "nop"]


def ours(skv: int, causal: bool, code_objects: str | None):
    if causal:
        (L,) = O._attn_launch(1, 2 * XCDS, 1, skv, skv, 128, 128, True, num_cus=1)
        cus = [[(0, 0, 0)], [(XCDS, 0, 0)]]
    else:
        (L,) = O._attn_launch(1, 1, 1, (XCDS + 1) * 256, skv, 128, 128, False, num_cus=1)
        cus = O._xcd0_cus(2, 1, L["grid"][0], XCDS)
    if code_objects:
        L = dict(L)
        L["path"] = pathlib.Path(code_objects) / pathlib.Path(L["path"]).name
    rep = O.simulate(L, cus, CFG)
    text = {pc: t for k, pc, t in O._module(L["path"]).disassemble() if k == L["kernel"]}
    return rep, text


def per_wave(rep: dict, group: str) -> dict:
    """cycles per (pc, cause) of one wave of the group (0-3: A, 4-7: B), averaged over waves and CUs."""
    d: dict = collections.defaultdict(collections.Counter)
    scale = 1.0 / (len(rep["cu_cycles"]) * 4)
    for (w, pc), m in rep["stall_by_pc"].items():
        if (w < 4) == (group == "A"):
            for c, v in m.items():
                d[pc][c] += v * scale
    return d


def regions(text: dict) -> list:
    pcs = sorted(text)
    bars = [pc for pc in pcs if text[pc].startswith("s_barrier")]
    edges = [pcs[0]] + [b + 4 for b in bars] + [pcs[-1] + 8]
    return list(zip(edges, edges[1:]))


def print_regions(rep: dict, text: dict) -> None:
    for g in ("A", "B"):
        d = per_wave(rep, g)
        print(f"group {g} (per wave; region = code between two s_barrier)")
        for lo, hi in regions(text):
            s = collections.Counter()
            for pc in text:
                if lo <= pc < hi:
                    s.update(d[pc])
            if sum(s.values()) > 0:
                print(f"  {lo:5x}-{hi:5x} {sum(s.values()):8.0f}  " +
                      " ".join(f"{c} {s[c]:.0f}" for c in CAUSES if s[c] >= 0.5))


def windows(points: list, causal: bool, code_objects: str | None) -> None:
    reps = {s: ours(s, causal, code_objects) for s in points}
    text = reps[points[0]][1]
    rescale = [pc for pc, t in text.items() if t.startswith("v_pk_mul_f32")]
    for (a, b), name in (((points[0], points[1]), "early"), ((points[2], points[3]), "late")):
        blocks = (b - a) / 64
        ra, rb = reps[a][0], reps[b][0]
        cyc = (sum(rb["cu_cycles"]) - sum(ra["cu_cycles"])) / len(ra["cu_cycles"]) / blocks
        iss = 0.0
        for g in ("A", "B"):
            da, db = per_wave(ra, g), per_wave(rb, g)
            iss += sum(db[pc]["issued"] - da[pc]["issued"] for pc in rescale) / blocks / 2
        print(f"{name} Skv {a} -> {b}: {cyc:.0f} cycles per block; O-rescale v_pk_mul issue {iss:.1f} "
              f"cycles per wave and block (128 when a wave rescales every block)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skv", type=int, default=512)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--windows", default=None, help="S1,S2,S3,S4: early and late per-block windows")
    ap.add_argument("--code-objects", default=None, help="a directory with our attention_fwd.hsaco to use instead")
    args = ap.parse_args()
    rep, text = ours(args.skv, args.causal, args.code_objects)
    kind = "causal heaviest tile" if args.causal else "dense"
    print(f"ours d128 {kind}, Skv {args.skv}: workgroup cycles per CU {rep['cu_cycles']}")
    print_regions(rep, text)
    if not args.causal:
        a = model_wg("gfx950", args.skv, dqk=128, ncu=2, cfg=CFG)
        print(f"AITER {a['kernel']}, Skv {args.skv}: workgroup cycles per CU {a['cu_cycles']}")
    if args.windows:
        windows([int(x) for x in args.windows.split(",")], args.causal, args.code_objects)


if __name__ == "__main__":
    main()
