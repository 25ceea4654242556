"""The causal / window feature kernel's dense work order on gfx942 under the timing model (issue 17).

The dense launch hands workgroup ids to the first free CU in order. Head-first items (the default kernels'
xcd_contiguous swizzle of w = head * nqb + q block) start each head's heaviest causal q block late, so CUs
idle at the end; the feature kernels read their items from `_C.dense_order` (most kv blocks first across all
heads). This script models one shape's dense launch both ways:

- the cost of one item = a + b * kv blocks, fitted from the timing model's cycles of two workgroups (the
  heaviest and the lightest item of a causal B1 H1 S`--fit-s` launch, each on its own CU of XCD 0);
- the launch = a list schedule of the items' costs in workgroup-id order over the chip's CUs (one workgroup
  per CU: the feature kernels hold 152 registers), as benchmarks/timing/ours.py does for gfx950.

The tail split's parts (the same items either way) are modeled with the same per-block fit; the merge and
the V transpose are not in the figures. Beside it,
AITER's gfx942 causal FMHA object (fwd_hd128_bf16_causal_<mode>.co, each workgroup two q tiles) as
benchmarks/timing/ours.py composes gfx950's: dispatch rounds x one sampled workgroup's cycles (the whole
forward; causal shapes only: AITER's gfx942 objects have no window). Modeled cycles, not hardware times.

--per-item replaces the fit by the timing model itself: every distinct item of the shape (each q block of one
head: the heads are alike) is simulated as its own workgroup on its own CU of XCD 0, and the dense launch is the
list schedule of those cycles in dense_order over the chip's CUs; the V transpose launch is added as the longer of
dispatch rounds x one sampled CU round and its HBM traffic at the model's clock. Shapes the planner splits are
skipped there (none of the three now).

    python packages/mha-gfx942/benchmarks/causal_order_timing.py [--mode rtne] [--aiter] [--per-item]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[3]
# (B, H, S, window): flash-attn's (left, right); causal = (-1, 0)
SHAPES = ((1, 32, 8192, (-1, 0)), (1, 32, 8192, (2048, 0)), (2, 16, 4096, (-1, 0)))


def item_fit(mode: str, fit_s: int, cfg: dict) -> dict:
    """cycles = a + b * blocks of one causal feature-kernel workgroup (the heaviest and the lightest item)."""
    from benchmarks.timing.ours import captured, simulate
    from moonmath_common import use_arch, use_backend
    from moonmath_mha_gfx942 import _C
    from moonmath_mha_gfx942 import kernel as K

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, fit_s, 128, generator=g).bfloat16() for _ in range(3))
    out = torch.empty_like(q)
    with use_backend("emu"), use_arch("gfx942"), captured(K.KERNELS, run_first=(K.TRANSPOSE_KERNEL,)) as seen:
        K.run(q, k, v, out, "bhsd", mode, tail=False, window=(-1, 0))
    L = next(s for s in seen if s["kernel"].startswith("mha_fwd_feat_"))
    nqb = -(-fit_s // _C.CTA_ROWS)
    order = K.dense_order(_C.plan_tail(fit_s, fit_s, 1, 304, False), nqb, fit_s, fit_s,
                          K.window_shifts((-1, 0), fit_s, fit_s))
    ids = (0, nqb - 1)  # workgroup ids of the heaviest and the lightest item (CUs of XCD 0 in the sample)
    rep = simulate(L, [[(i, 0, 0)] for i in ids], cfg)
    blocks = [_C.item_kv_blocks(order[i], fit_s, fit_s, *K.window_shifts((-1, 0), fit_s, fit_s)) for i in ids]
    (b0, b1), (c0, c1) = blocks, rep["cu_cycles"]
    b = (c0 - c1) / (b0 - b1)
    return {"a": c0 - b * b0, "b": b, "blocks": blocks, "cycles": list(rep["cu_cycles"])}


def dense_cycles(B: int, H: int, S: int, window: tuple[int, int], fit: dict, cus: int) -> dict:
    """The dense launch's modeled cycles with the head-first swizzle and with dense_order."""
    from benchmarks.timing.ours import list_schedule
    from moonmath_mha_gfx942 import _C
    from moonmath_mha_gfx942 import kernel as K

    shifts = K.window_shifts(window, S, S)
    nqb = -(-S // _C.CTA_ROWS)
    p = K.plan(S, S, B * H, cus, True, None, shifts)
    cost = [fit["a"] + fit["b"] * _C.item_kv_blocks(qb, S, S, *shifts) for qb in range(nqb)]
    xcd = _C.dense_order(p, nqb, S, S)  # no window: the default kernels' xcd swizzle of the head-first order
    heaviest = K.dense_order(p, nqb, S, S, shifts)
    # the tail's split parts (the same either way): part g of an item of b blocks runs ceil((b - g) / G)
    parts = [fit["a"] + fit["b"] * -(-(_C.item_kv_blocks(w % nqb, S, S, *shifts) - g) // p.parts)
             for w in range(p.n_dense, p.n_work) for g in range(p.parts)]
    nt = K.plan(S, S, B * H, cus, False, None, shifts)  # the planner's split off: every item dense
    return {"n_dense": p.n_dense, "tail": p.tail, "parts": p.parts,
            "head_first": list_schedule([cost[w % nqb] for w in xcd], cus),
            "heaviest_first": list_schedule([cost[w % nqb] for w in heaviest], cus),
            "ideal": sum(cost[w % nqb] for w in heaviest) / cus,
            "split": list_schedule(parts, cus) if parts else 0.0,
            "no_tail_head_first": list_schedule([cost[w % nqb] for w in _C.dense_order(nt, nqb, S, S)], cus),
            "no_tail_heaviest_first": list_schedule([cost[w % nqb] for w in K.dense_order(nt, nqb, S, S, shifts)],
                                                    cus)}


def per_item_cycles(B: int, H: int, S: int, window: tuple[int, int], mode: str, cfg: dict) -> dict:
    """The dense launch from every distinct item's simulated cycles (no fit), plus the V transpose launch."""
    from benchmarks.timing.ours import captured, list_schedule, mha_small_launch, simulate
    from moonmath_common import use_arch, use_backend
    from moonmath_mha_gfx942 import _C
    from moonmath_mha_gfx942 import kernel as K

    cus, shifts, nqb = cfg["cus_per_chip"], K.window_shifts(window, S, S), -(-S // _C.CTA_ROWS)
    p = K.plan(S, S, B * H, cus, True, None, shifts)
    if p.tail:
        return {"tail": p.tail}
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, S, 128, generator=g).bfloat16() for _ in range(3))
    out = torch.empty_like(q)
    with use_backend("emu"), use_arch("gfx942"), captured(K.KERNELS, run_first=(K.TRANSPOSE_KERNEL,)) as seen:
        K.run(q, k, v, out, "bhsd", mode, tail=False, window=window)
    L = next(s for s in seen if s["kernel"].startswith("mha_fwd_feat_"))
    one_head = K.dense_order(_C.plan_tail(S, S, 1, cus, False), nqb, S, S, shifts)
    rep = simulate(L, [[(i, 0, 0)] for i in range(nqb)], cfg)  # workgroup i runs item one_head[i]
    item = {one_head[i]: c for i, c in enumerate(rep["cu_cycles"])}
    dense = list_schedule([item[w % nqb] for w in K.dense_order(p, nqb, S, S, shifts)], cus)
    tr = mha_small_launch("transpose", mode, S, 0, cfg)
    ntr = -(-S // _C.KV_BLOCK) * B * H
    # the transpose's time: its dispatch rounds or its HBM traffic at the model's clock, whichever is longer
    rounds = math.ceil(ntr / (cus * tr["slots"])) * tr["round_cycles"]
    hbm = ntr * tr["hbm_per_wg"] / cfg["hbm_bytes_per_s"] * cfg["clock_mhz"] * 1e6
    return {"tail": 0, "dense": dense, "transpose": max(rounds, hbm), "transpose_rounds": rounds, "transpose_hbm": hbm,
            "item_cycles": [item[qb] for qb in range(nqb)]}


def aiter_causal_cycles(B: int, H: int, S: int, mode: str, cfg: dict) -> float:
    from benchmarks.timing.fmha import grid_workgroups, model_wg

    nwg = grid_workgroups("gfx942", B, H, S, causal=True)
    gx = math.ceil(math.ceil(S / 256) / 2)
    return math.ceil(nwg / cfg["cus_per_chip"]) * model_wg("gfx942", S, causal=True, round_mode=mode, sq_tiles=gx,
                                                             cfg=cfg)["wg_cycles"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="rtne", choices=("rtna", "rtne", "rtz"))
    ap.add_argument("--fit-s", type=int, default=4096, help="the causal launch whose two items give the fit")
    ap.add_argument("--aiter", action="store_true", help="also AITER's causal object (causal shapes)")
    ap.add_argument("--per-item", action="store_true", help="simulate every distinct item instead of the fit")
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from benchmarks.timing import clock

    cfg = clock.effective_config("gfx942")[0]  # every launch simulated at the effective clock
    fit = item_fit(a.mode, a.fit_s, cfg)
    print(f"item fit ({a.mode}, causal S {a.fit_s}): cycles = {fit['a']:.0f} + {fit['b']:.1f} * blocks "
          f"(blocks {fit['blocks']}: {[round(c) for c in fit['cycles']]} cycles)")
    for B, H, S, window in SHAPES:
        r = dense_cycles(B, H, S, window, fit, cfg["cus_per_chip"])
        line = (f"B{B} H{H} S{S} window {window}: dense {r['n_dense']} items (tail {r['tail']} x {r['parts']}): "
                f"head-first {r['head_first'] / 1e3:.0f}k cycles, heaviest-first {r['heaviest_first'] / 1e3:.0f}k "
                f"({r['head_first'] / r['heaviest_first']:.3f}x), balanced bound {r['ideal'] / 1e3:.0f}k; CU balance "
                f"{r['ideal'] / r['head_first']:.1%} -> {r['ideal'] / r['heaviest_first']:.1%}")
        if r["tail"]:
            line += (f"; + split launch {r['split'] / 1e3:.0f}k (merge not modeled); split off: head-first "
                     f"{r['no_tail_head_first'] / 1e3:.0f}k, heaviest-first {r['no_tail_heaviest_first'] / 1e3:.0f}k")
        if a.aiter and window == (-1, 0):
            line += f"; AITER causal {aiter_causal_cycles(B, H, S, a.mode, cfg) / 1e3:.0f}k cycles (whole forward)"
        print(line)
        if a.per_item:
            r = per_item_cycles(B, H, S, window, a.mode, cfg)
            if r["tail"]:
                print("  per item: the planner splits this shape; not simulated")
                continue
            line = (f"  per item (timing model, {len(r['item_cycles'])} items simulated): "
                    f"dense {r['dense'] / 1e3:.0f}k "
                    f"cycles + V transpose {r['transpose'] / 1e3:.0f}k (rounds {r['transpose_rounds'] / 1e3:.0f}k, HBM "
                    f"{r['transpose_hbm'] / 1e3:.0f}k) = {(r['dense'] + r['transpose']) / 1e3:.0f}k")
            if a.aiter and window == (-1, 0):
                ai = aiter_causal_cycles(B, H, S, a.mode, cfg)
                line += f"; AITER {ai / 1e3:.0f}k: ours {(r['dense'] + r['transpose']) / ai:.3f}x its time"
            print(line, flush=True)


if __name__ == "__main__":
    main()
