"""Issue 17: the head dims and fp8 K/V kernels under the frozen timing model, beside d128 (MODELED, no hardware).

    MOONMATH_EMU_THREADS=1 python packages/attention-gfx950/benchmarks/head_dims_timing.py [--skv 1024,2048]

For each kernel (head dims 64, 80, 96, 128, 256 = two column passes of the (256, 128) kernel, fp8 K/V d64 / d128 / d256)
one dense work item (a 256-row tile of one head, unsplit) is simulated on 2 CUs of XCD 0 at two Skv
(benchmarks/timing/ours.py's method: round cycles = a + b * kv_blocks, one workgroup per CU), with the LDS bank
cycles the model charged (lds_cycles) beside the conflict-free ideal (lds_ideal_cycles). Then the modeled time of
seed-like shapes (every item of the planner's grid list-scheduled on 256 CUs) at the effective gfx950 clock of
docs/performance.md (run.py's calibration on AITER's MI300X times carried to 2400 MHz: benchmarks/timing/clock.py;
every launch simulated at it; nothing re-fitted here).
No AITER peer exists for these kernels (docs/peers.md), so each is compared with our d128 kernel.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import moonmath_emu.timing as timing  # noqa: E402
from benchmarks.timing import clock  # noqa: E402
from benchmarks.timing.fmha import _own_copy  # noqa: E402
from benchmarks.timing.ours import _module, _xcd0_cus, captured, list_schedule  # noqa: E402
from moonmath_attention_gfx950 import _C, kernel  # noqa: E402
from moonmath_common import use_arch, use_backend  # noqa: E402

KERNELS = [("d64", 64, 64, False), ("d80", 80, 80, False), ("d96", 96, 96, False), ("d128", 128, 128, False),
           ("d256 (2 passes)", 256, 256, False), ("fp8 d64", 64, 64, True), ("fp8 d128", 128, 128, True),
           ("fp8 d256 (2 passes)", 256, 256, True)]
# seed-like MI355X shapes (B, Hq, Hkv, Sq = Skv), dense
SHAPES = [(2, 24, 24, 4096), (1, 32, 8, 16384)]


def launches(B, Hq, Hkv, Sq, Skv, dqk, dv, fp8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, Sq, dqk, generator=g).bfloat16()
    k = torch.randn(B, Hkv, Skv, dqk, generator=g).bfloat16()
    v = torch.randn(B, Hkv, Skv, dv, generator=g).bfloat16()
    descales = None
    if fp8:
        k, v = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
        descales = (torch.ones(Hkv), torch.ones(Hkv))
    out = torch.empty(B, Hq, Sq, dv).bfloat16()
    # every tensor in a storage of its own (reruns identical), copied here: the d256 passes' column views stay views
    q, k, v, out = (_own_copy(t) for t in (q, k, v, out))
    with use_backend("emu"), use_arch("gfx950"), kernel.planner_options(num_cus=1), captured(kernel.KERNELS) as seen:
        kernel.run_forward(q, k, v, out, None, "bhsd", False, 1.0 / math.sqrt(dqk), descales=descales)
    return seen


def fit(dqk, dv, fp8, skvs, cfg, code_objects=None):
    """a + b * kv_blocks of one dense work item (all its launches: 2 for d256), and the LDS cycles at the last Skv.
    code_objects: a directory of other builds of the code objects to time instead (a before/after comparison)."""
    tile, kvb = _C.TILE_ROWS, _C.KV_BLOCK
    cyc, lds = {}, None
    for skv in skvs:
        total, lds_c, lds_i = 0.0, 0.0, 0.0
        for L in launches(1, 1, 1, (cfg["xcds"] + 1) * tile, skv, dqk, dv, fp8):
            if code_objects:
                L["path"] = pathlib.Path(code_objects) / pathlib.Path(L["path"]).name
            rep = timing.simulate(_module(L["path"]), L["kernel"], L["grid"], L["block"], L["args"],
                                  cus=_xcd0_cus(2, 1, L["grid"][0], cfg["xcds"]), config=cfg,
                                  dynamic_lds=L["dynamic_lds"])
            total += sum(rep["cu_cycles"]) / len(rep["cu_cycles"])
            lds_c += rep["mem"]["lds_cycles"]
            lds_i += rep["mem"]["lds_ideal_cycles"]
        cyc[skv // kvb], lds = total, (lds_c, lds_i)
    n1, n2 = min(cyc), max(cyc)
    b = (cyc[n2] - cyc[n1]) / (n2 - n1)
    return {"a": cyc[n1] - b * n1, "b": b, "lds": lds}


def shape_seconds(f, B, Hq, Sq, f_hz):
    items = B * math.ceil(Sq / _C.TILE_ROWS) * Hq
    blocks = math.ceil(Sq / _C.KV_BLOCK)
    return list_schedule([f["a"] + f["b"] * blocks] * items, 256) / f_hz


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skv", default="1024,2048")
    ap.add_argument("--only", default="", help="comma-separated kernel labels (default: all)")
    ap.add_argument("--code-objects", default="", help="a directory of .hsaco files to time instead of the installed")
    args = ap.parse_args()
    skvs = tuple(int(x) for x in args.skv.split(","))
    cfg, f950, _ = clock.effective_config("gfx950")  # simulated and composed at the effective clock
    rows = {}
    for label, dqk, dv, fp8 in KERNELS:
        if args.only and label not in args.only.split(","):
            continue
        rows[label] = f = fit(dqk, dv, fp8, skvs, cfg, args.code_objects)
        print(f"{label:16s} a {f['a']:9.0f} cycles  b {f['b']:7.0f} cycles/KV block  "
              f"LDS {f['lds'][0]:9.0f} / ideal {f['lds'][1]:9.0f} cycles (x{f['lds'][0] / f['lds'][1]:.2f})",
              flush=True)
    base = rows.get("d128")
    print("\n| kernel | cycles / KV block | vs d128 | flops / block vs d128 | LDS cycles / ideal | "
          + " | ".join(f"B{B} H{Hq}/{Hk} S{S} ms" for B, Hq, Hk, S in SHAPES) + " |")
    print("|---|---|---|---|---|" + "---|" * len(SHAPES))
    for label, dqk, dv, _ in KERNELS:
        if label not in rows:
            continue
        f = rows[label]
        rel = f"{f['b'] / base['b']:.2f}" if base else "-"
        flops = f"{(dqk + dv) / 256:.2f}"
        ms = " | ".join(f"{shape_seconds(f, B, Hq, S, f950) * 1e3:.3f}" for B, Hq, Hk, S in SHAPES)
        print(f"| {label} | {f['b']:.0f} | {rel} | {flops} | {f['lds'][0] / f['lds'][1]:.2f} | {ms} |")


if __name__ == "__main__":
    main()
