"""The `moe_gfx950` peer family: a DeepSeek-R1 style a4w4 MXFP4 MoE layer (routed top-k + one shared expert,
SwiGLU), AITER's 1-stage a4w4 assembly kernel (moe.py) beside ours (mxfp4_quantize -> mxfp4_moe_layer_a4w4, the
one-launch layer, -> top-k sum, the public ops), same inputs.

Reference: AITER's a4w4 fused_moe semantics (the GPU MODE problem's) in float64 over exactly decoded
operands: activations quantised by AITER's per-1x32 rule, SwiGLU rounded to bf16 and quantised again, the
down projection times the routing weight, summed. Unit of work: one routed row (token x expert) through
the whole layer (gate/up 2I x dim and down dim x I).
"""
from __future__ import annotations

import math

import torch

from . import metrics, moe
from .families import Case, Family, Result


def _decode(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    from moonmath_common.numerics import e8m0_to_f32, unpack_e2m1

    return unpack_e2m1(codes).double() * e8m0_to_f32(scales).double().repeat_interleave(32, -1)


def _inputs(c: Case) -> dict:
    from moonmath_mxfp4_moe import quant

    p = c.p
    g = torch.Generator().manual_seed(7)
    T, dim, inter, routed, k = p["T"], p["dim"], p["I"], p["routed"], p["top_k"]
    E = routed + 1
    x = torch.randn(T, dim, generator=g).to(torch.bfloat16)
    scores = torch.randn(T, routed, generator=g).softmax(-1)
    w, ids = torch.topk(scores, k, dim=-1)
    ids = torch.cat((ids.to(torch.int32), torch.full((T, 1), routed, dtype=torch.int32)), 1).contiguous()
    tw = torch.cat((w, torch.ones(T, 1)), 1).contiguous()
    w13 = (torch.randn(E * 2 * inter, dim, generator=g) / math.sqrt(dim)).to(torch.bfloat16)
    w2 = (torch.randn(E * dim, inter, generator=g) / math.sqrt(inter)).to(torch.bfloat16)
    q13, s13 = quant.quantize_reference(w13)
    q2, s2 = quant.quantize_reference(w2)
    xq, xs = quant.quantize_reference(x)
    return {"x": x, "xq": xq, "xs": xs, "ids": ids, "tw": tw, "E": E,
            "w13": q13.view(E, 2 * inter, dim // 2), "s13": s13.view(E, 2 * inter, dim // 32),
            "w2": q2.view(E, dim, inter // 2), "s2": s2.view(E, dim, inter // 32)}


def _aiter(x: dict, c: Case) -> Result:
    out, cnt = moe.run_aiter_fmoe_a4w4(x["xq"], x["xs"], x["w13"], x["s13"], x["w2"], x["s2"], x["ids"], x["tw"],
                                       check_hazards="warn")
    return Result(out, None, cnt, moe.fmoe_object().split("/")[-1])


def _ours(x: dict, c: Case) -> Result | None:
    import os

    import moonmath_mxfp4_moe as mm
    from moonmath_common import NoKernelError
    from moonmath_mxfp4_moe.a4w4 import LAYER_INTERS

    # MOONMATH_MOE_THREE_LAUNCHES=1: the gate/up + down ops instead of the one-launch layer (before/after figures)
    three_launches = os.environ.get("MOONMATH_MOE_THREE_LAUNCHES", "0") == "1"

    T, dim = x["x"].shape
    top_k, inter = x["ids"].shape[1], x["w2"].shape[2] * 2
    nvt = T * top_k
    B13, Bs13 = mm.repack_mxfp4(x["w13"]), mm.repack_mxfp4_scales(x["s13"])
    B2, Bs2 = mm.repack_mxfp4(x["w2"]), mm.repack_mxfp4_scales(x["s2"])
    bm = mm.mxfp4_moe_gateup_block_m(nvt, min(x["E"], nvt))
    sid, eid, ntpp, nblk = mm.moe_align_block_size(x["ids"], bm, x["E"])
    try:
        with metrics.emulated_arch("gfx950"), metrics.capture_launches() as seen:
            aq, as_ = mm.mxfp4_quantize(x["x"])
            y = torch.zeros(nvt, dim, dtype=torch.bfloat16)
            if inter in LAYER_INTERS and not three_launches:
                mm.mxfp4_moe_layer_a4w4(aq, as_, B13, Bs13, B2, Bs2, y, x["tw"], sid, eid, ntpp, nblk, bm, nvt, top_k)
            else:
                hq = torch.empty(nvt, inter // 2, dtype=torch.uint8)
                hs = torch.empty(nvt, inter // 32, dtype=torch.uint8)
                mm.mxfp4_moe_gateup_a4w4(aq, as_, B13, Bs13, hq, None, sid, eid, ntpp, nblk, bm, nvt, top_k,
                                         mm.EPI_SILU, C_scales=hs)
                mm.mxfp4_moe_down_a4w4(hq, hs, B2, Bs2, y, x["tw"], sid, eid, ntpp, nblk, bm, nvt, 1,
                                       mul_routed_weight=True)
    except NoKernelError:
        return None
    out = y.view(T, top_k, dim).float().sum(1).to(torch.bfloat16)
    return Result(out, None, metrics.sum_counters(seen), f"moonmath a4w4 ({len(seen)} launches, block_m {bm})")


def _reference(x: dict, c: Case) -> dict[str, torch.Tensor]:
    from moonmath_mxfp4_moe import quant

    T, dim = x["x"].shape
    inter = x["w2"].shape[2] * 2
    a1 = quant.dequantize(x["xq"], x["xs"]).double()
    out = torch.zeros(T, dim, dtype=torch.float64)
    for e in range(x["E"]):
        tok, kk = (x["ids"] == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        acc = a1[tok] @ _decode(x["w13"][e], x["s13"][e]).T
        h = (acc[:, :inter] * torch.sigmoid(acc[:, :inter]) * acc[:, inter:]).to(torch.bfloat16)
        a2 = quant.dequantize(*quant.quantize_reference(h)).double()
        out.index_add_(0, tok, (a2 @ _decode(x["w2"][e], x["s2"][e]).T) * x["tw"][tok, kk].double()[:, None])
    return {"fp64 a4w4": out}


def _units(c: Case) -> float:
    return c.p["T"] * (c.p["top_k"] + 1)


def moe_gfx950(quick: bool = False) -> Family:
    shapes = [(8, 512, 256, 7, 2)] if quick else [(8, 2048, 256, 31, 8), (32, 2048, 512, 15, 4)]
    cases = [Case(f"T{t} dim {d} I {i} E {r}+1 top-{k}+1", {"T": t, "dim": d, "I": i, "routed": r, "top_k": k})
             for t, d, i, r, k in shapes]
    return Family("moe_gfx950", "gfx950", f"gfx950 a4w4 MXFP4 MoE layer ({moe.fmoe_object().split('/')[-1]})",
                  "one routed row (token x expert) through gate/up + SwiGLU + down", cases, _inputs, _aiter, _ours,
                  _reference, _units, None,
                  ["AITER: its 1-stage a4w4 kernel (fmoe_g1u1 for fp4x2): gate/up, SwiGLU and down in one launch, "
                   "the down output accumulated into bf16 (no fmoe_2stages fp4 object ships for gfx950)",
                   "ours: mxfp4_quantize + mxfp4_moe_layer_a4w4 (gate/up, SwiGLU, MXFP4 intermediate in LDS, down: "
                   "2 launches; MOONMATH_MOE_THREE_LAUNCHES=1: gate/up + down ops, 3), then the top-k sum on the host "
                   "side of the test",
                   "weights and activations quantised by AITER's per-1x32 rule; the reference is AITER's 2-stage "
                   "a4w4 semantics (GPU MODE's)"])
