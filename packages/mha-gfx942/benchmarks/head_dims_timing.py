"""Issue 17 on gfx942: head dims 64, 96 and fp8 K/V under the frozen timing model, beside d128 (MODELED, no hardware).

    MOONMATH_EMU_THREADS=1 python packages/mha-gfx942/benchmarks/head_dims_timing.py [--skv 1024,2048] [--mode rtne]

For each variant (d128, d64 and d96, bf16 K/V: the default kernels; with sinks: the feature kernels that fp8 runs
on; with a soft-cap; fp8 K/V at d128 and d64) one dense work item (256 q rows of one head, unsplit) is simulated
on 2 CUs of XCD 0 at two Skv (benchmarks/timing/ours.py's method: round cycles = a + b * kv_blocks, one workgroup
per CU; with `timing.occupancy` > 1 also that many co-resident workgroups per CU, whose per-workgroup cost is
round / slots).
The pass before them (the V transpose; for fp8 the K and V widening) is simulated as one CU round and reported per
(head, 64-row kv block) with its HBM bytes: it runs once per head, the attention once per 256 q rows. Emulator
wave-instruction counts per kv block come from the same runs' counters. No AITER peer exists (docs/peers.md).
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import moonmath_emu.timing as timing  # noqa: E402
from benchmarks.timing.fmha import _own_copy  # noqa: E402
from benchmarks.timing.ours import _module, _xcd0_cus, captured  # noqa: E402
from moonmath_common import use_arch, use_backend  # noqa: E402
from moonmath_mha_gfx942 import _C  # noqa: E402
from moonmath_mha_gfx942 import kernel as K  # noqa: E402

# (label, head dim, fp8 K/V, softcap, sinks): the sinks rows are the feature kernels fp8 runs on, whose only other
# work is the epilogue's sink
VARIANTS = [("d128", 128, False, 0.0, False), ("d64", 64, False, 0.0, False), ("d96", 96, False, 0.0, False),
            ("d128 sinks (feature kernel)", 128, False, 0.0, True),
            ("d64 sinks (feature kernel)", 64, False, 0.0, True),
            ("d128 softcap", 128, False, 30.0, False), ("d64 softcap", 64, False, 30.0, False),
            ("fp8 d128", 128, True, 0.0, False), ("fp8 d64", 64, True, 0.0, False)]


def launches(sq, skv, d, fp8, cap, sinks, mode, seed=0):
    """ma.forward's launches of a (1, 1, sq, skv) problem, captured (the pre-pass runs: its outputs are real)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, s, d, generator=g).bfloat16() for s in (sq, skv, skv))
    extra = dict(softcap=cap, sinks=torch.zeros(1) if sinks else None)
    if fp8:
        k, v = k.to(torch.float8_e4m3fnuz), v.to(torch.float8_e4m3fnuz)
        extra.update(k_descale=torch.ones(1), v_descale=torch.ones(1))
    q, k, v = (_own_copy(t) for t in (q, k, v))
    out = _own_copy(torch.empty_like(q))
    pre = K.transpose_kernel(d, fp8)
    with use_backend("emu"), use_arch("gfx942"), captured(K.KERNELS, run_first=(pre,)) as seen:
        K.run(q, k, v, out, "bhsd", mode, tail=False, **extra)
    return {L["kernel"]: L for L in seen}, pre


def simulate(L, cus, cfg):
    args = [_own_copy(a.contiguous()) if isinstance(a, torch.Tensor) else a for a in L["args"]]
    return timing.simulate(_module(L["path"]), L["kernel"], L["grid"], L["block"], args, cus=cus, config=cfg,
                           dynamic_lds=L["dynamic_lds"])


def fit(d, fp8, cap, sinks, mode, skvs, cfg):
    xcds, rows = cfg["xcds"], _C.CTA_ROWS
    out = {"cycles": {}, "cycles_shared": {}}
    for skv in skvs:
        ls, pre = launches((4 * xcds + 1) * rows, skv, d, fp8, cap, sinks, mode)  # room for 2 CUs x 2 workgroups
        name = [n for n in ls if n.startswith("mha_fwd_")][0]
        L = ls[name]
        slots = timing.occupancy(_module(L["path"]).kernel_info(name), L["block"][0], cfg)
        rep = simulate(L, _xcd0_cus(2, 1, L["grid"][0], xcds), cfg)
        out["cycles"][skv // _C.KV_BLOCK] = sum(rep["cu_cycles"]) / len(rep["cu_cycles"])
        if slots > 1:  # `slots` co-resident workgroups per CU: the round, per workgroup
            rep2 = simulate(L, _xcd0_cus(2, slots, L["grid"][0], xcds), cfg)
            out["cycles_shared"][skv // _C.KV_BLOCK] = sum(rep2["cu_cycles"]) / len(rep2["cu_cycles"]) / slots
        out.update(kernel=name, slots=slots, counters=rep.get("counters"))
        # the pass before: one CU round of it (its occupancy's worth of (head, kv block) workgroups)
        P = ls[pre]
        pslots = timing.occupancy(_module(P["path"]).kernel_info(pre), P["block"][0], cfg)
        per = min(pslots, P["grid"][0])
        prep = simulate(P, [[(j, 0, 0) for j in range(per)]], cfg)
        out["pre"] = dict(kernel=pre, round=sum(prep["cu_cycles"]) / len(prep["cu_cycles"]), per=per,
                          hbm=_C.KV_BLOCK * d * (4 if not fp8 else 1 + 1 + 2 + 2))
    for key in ("cycles", "cycles_shared"):
        c = out[key]
        if len(c) == 2:
            n1, n2 = min(c), max(c)
            out[key + "_b"] = (c[n2] - c[n1]) / (n2 - n1)
            out[key + "_a"] = c[n1] - out[key + "_b"] * n1
    return out


def instructions(d, fp8, cap, sinks, mode, skvs):
    """Emulator wave-instructions per kv block of one 256-row workgroup (differential over the two Skv)."""
    per = {}
    for skv in skvs:
        g = torch.Generator().manual_seed(1)
        q, k, v = (torch.randn(1, 1, s, d, generator=g).bfloat16() for s in (256, skv, skv))
        extra = dict(softcap=cap, sinks=torch.zeros(1) if sinks else None)
        if fp8:
            k, v = k.to(torch.float8_e4m3fnuz), v.to(torch.float8_e4m3fnuz)
            extra.update(k_descale=torch.ones(1), v_descale=torch.ones(1))
        with use_backend("emu"), use_arch("gfx942"):
            c = K.run(q, k, v, torch.empty_like(q), "bhsd", mode, tail=False, **extra)
        per[skv // _C.KV_BLOCK] = (c[1]["wave_instructions"], c[1]["mfma"], c[1]["valu"], c[0]["wave_instructions"])
    n1, n2 = min(per), max(per)
    dn = n2 - n1
    return {"wave_instr_per_block": (per[n2][0] - per[n1][0]) / dn, "mfma_per_block": (per[n2][1] - per[n1][1]) / dn,
            "valu_per_block": (per[n2][2] - per[n1][2]) / dn, "pre_per_block": (per[n2][3] - per[n1][3]) / dn}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skv", default="1024,2048")
    ap.add_argument("--mode", default="rtne")
    ap.add_argument("--only", default="", help="comma-separated variant labels (default: all)")
    args = ap.parse_args()
    skvs = tuple(int(x) for x in args.skv.split(","))
    from benchmarks.timing import clock

    cfg = clock.effective_config("gfx942")[0]  # every launch simulated at the effective clock
    rows = {}
    for label, d, fp8, cap, sinks in VARIANTS:
        if args.only and label not in args.only.split(","):
            continue
        f = fit(d, fp8, cap, sinks, args.mode, skvs, cfg)
        f["instr"] = instructions(d, fp8, cap, sinks, args.mode, skvs)
        rows[label] = f
        print(f"{label:32s} {f['kernel']:26s} b {f['cycles_b']:7.0f} cyc/kv block (a {f['cycles_a']:7.0f}); slots "
              f"{f['slots']}" + (f", shared b {f['cycles_shared_b']:7.0f}" if "cycles_shared_b" in f else "")
              + f"; pre-pass {f['pre']['kernel']} {f['pre']['round'] / f['pre']['per']:.0f} cyc per (head, block), "
              f"{f['pre']['hbm']} HBM bytes; instr/block {f['instr']['wave_instr_per_block']:.0f} "
              f"(MFMA {f['instr']['mfma_per_block']:.0f}, VALU {f['instr']['valu_per_block']:.0f}), pre-pass instr/"
              f"block {f['instr']['pre_per_block']:.0f}", flush=True)
    base = rows.get("d128")
    print(f"\n| variant ({args.mode}) | attention kernel | modeled cycles / kv block (1 wg per CU) | vs d128 | "
          "co-resident wgs per CU: cycles / kv block per wg | wave-instr / kv block (MFMA, VALU) | "
          "pass before: kernel, modeled cycles / (head, kv block), HBM bytes |")
    print("|---|---|---|---|---|---|---|")
    for label, f in rows.items():
        rel = f"{f['cycles_b'] / base['cycles_b']:.2f}" if base else "-"
        sh = f"{f['slots']}: {f['cycles_shared_b']:.0f}" if "cycles_shared_b" in f else "1: -"
        i = f["instr"]
        p = f["pre"]
        print(f"| {label} | `{f['kernel']}` | {f['cycles_b']:.0f} | {rel} | {sh} | {i['wave_instr_per_block']:.0f} "
              f"({i['mfma_per_block']:.0f}, {i['valu_per_block']:.0f}) | `{p['kernel']}` {p['round'] / p['per']:.0f}, "
              f"{p['hbm']} |")


if __name__ == "__main__":
    main()
