"""The peer families: for each, its cases (shapes), inputs, AITER's run, ours (None while our kernel
does not exist: the op raises NoKernelError), the float64 reference and the unit of work.

Adding our kernel to a family is its `ours` function: call our public op on the same inputs inside
`metrics.capture_launches()` and return a `Result`, or None on NoKernelError.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from . import metrics, mla
from .fmha_v3 import reference_fmha, run_aiter_fmha


@dataclass
class Result:
    out: torch.Tensor
    lse: torch.Tensor | None  # natural log
    counters: dict
    note: str = ""


@dataclass
class Case:
    label: str
    p: dict


@dataclass
class Family:
    name: str
    arch: str
    title: str
    unit: str
    cases: list[Case]
    inputs: Callable[[Case], dict]
    aiter: Callable[[dict, Case], Result]
    ours: Callable[[dict, Case], Result | None]
    reference: Callable[[dict, Case], dict[str, torch.Tensor]]  # name -> float64 reference output
    units: Callable[[Case], float]
    kv_tokens: Callable[[Case], int] | None = None
    notes: list[str] = field(default_factory=list)
    # further AITER kernels run on the same inputs, (row label, run): rows after "AITER", before "ours"
    more_aiter: list[tuple[str, Callable[[dict, Case], Result]]] = field(default_factory=list)


# ------------------------------------------------------------------------------------------- FMHA
def _fmha_inputs(c: Case) -> dict:
    g = torch.Generator().manual_seed(1)
    B, H, S, D = c.p["B"], c.p["H"], c.p["S"], c.p["D"]
    return {"q": torch.randn(B, H, S, D, generator=g).bfloat16(), "k": torch.randn(B, H, S, D, generator=g).bfloat16(),
            "v": torch.randn(B, H, S, 128, generator=g).bfloat16()}


def _fmha_aiter(arch: str) -> Callable[[dict, Case], Result]:
    def run(x: dict, c: Case) -> Result:
        out, lse, cnt = run_aiter_fmha(x["q"], x["k"], x["v"], causal=c.p["causal"], round_mode=c.p.get("round"),
                                       arch=arch, return_lse=True, check_hazards="warn")
        return Result(out, lse, cnt, cnt["kernel"])
    return run


def _fmha_ours(op: str) -> Callable[[dict, Case], Result | None]:
    def run(x: dict, c: Case) -> Result | None:
        from moonmath_common import NoKernelError

        arch = "gfx942" if op == "mha" else "gfx950"
        try:
            with metrics.emulated_arch(arch), metrics.capture_launches() as seen:
                if op == "mha":
                    if x["q"].shape[3] != 128:
                        return None  # our gfx942 MHA is built for head dim 128
                    from moonmath_mha_gfx942 import forward

                    out, lse = forward(x["q"], x["k"], x["v"], round_mode=c.p.get("round") or "rtna",
                                       causal=c.p["causal"]), None
                else:
                    from moonmath_attention_gfx950 import forward

                    out, lse = forward(x["q"], x["k"], x["v"], causal=c.p["causal"], return_lse=True)
        except NoKernelError:
            return None
        return Result(out, lse, metrics.sum_counters(seen), "moonmath")
    return run


def _fmha_ref(x: dict, c: Case) -> dict[str, torch.Tensor]:
    o, lse = reference_fmha(x["q"], x["k"], x["v"], causal=c.p["causal"])
    return {"fp64": o, "lse": lse}


def _fmha_units(c: Case) -> float:
    S = c.p["S"]
    pairs = S * (S + 1) / 2 if c.p["causal"] else S * S
    return c.p["B"] * c.p["H"] * pairs / (128 * 128)


def fmha_gfx942(quick: bool = False) -> Family:
    S = 256 if quick else 512
    cases = [Case(f"B1 H2 S{S} {r}", {"B": 1, "H": 2, "S": S, "D": 128, "causal": False, "round": r})
             for r in (("rtne",) if quick else ("rtna", "rtne", "rtz"))]
    if not quick:
        cases += [Case(f"B1 H2 S{S} causal rtne", {"B": 1, "H": 2, "S": S, "D": 128, "causal": True, "round": "rtne"}),
                  Case("B1 H2 S1024 rtna", {"B": 1, "H": 2, "S": 1024, "D": 128, "causal": False, "round": "rtna"}),
                  Case("B1 H8 S2048 causal rtna",
                       {"B": 1, "H": 8, "S": 2048, "D": 128, "causal": True, "round": "rtna"})]
    return Family("fmha_gfx942", "gfx942", "gfx942 FMHA v3 forward (MI300/fwd_hd128_bf16*)",
                  "128x128 tile of visible (query, key) pairs of one head", cases, _fmha_inputs, _fmha_aiter("gfx942"),
                  _fmha_ours("mha"), _fmha_ref, _fmha_units)


def fmha_gfx950(quick: bool = False) -> Family:
    S = 256 if quick else 512
    dims = (128,) if quick else (128, 192)
    cases = []
    for d in dims:
        for causal in ((False,) if quick else (False, True)):
            cases.append(Case(f"B1 H2 S{S} hd{d}{' causal' if causal else ''}",
                              {"B": 1, "H": 2, "S": S, "D": d, "causal": causal}))
    if not quick:
        cases.append(Case("B1 H8 S2048 hd128 causal", {"B": 1, "H": 8, "S": 2048, "D": 128, "causal": True}))
    return Family("fmha_gfx950", "gfx950", "gfx950 FMHA v3 forward (fwd_hd128_bf16*, fwd_hd192_hd128_bf16*)",
                  "128x128 tile of visible (query, key) pairs of one head", cases, _fmha_inputs, _fmha_aiter("gfx950"),
                  _fmha_ours("attention"), _fmha_ref, _fmha_units)


# -------------------------------------------------------------------------------------------- MLA
def _mla_inputs(arch: str) -> Callable[[Case], dict]:
    def make(c: Case) -> dict:
        names = ("q_lat", "q_pe", "kv_pool", "seq_lens", "kv_indices", "kv_indptr", "scale", "kv_scale")
        x = dict(zip(names, mla.make_inputs(c.p["B"], c.p["S"], c.p["q_len"], arch=arch)))
        if arch == "gfx950":
            x["q8"], x["q_scale"] = mla.quantize_q_fp8(x["q_lat"], x["q_pe"])
        return x
    return make


def _mla_args(x: dict) -> tuple:
    return (x["kv_pool"], x["seq_lens"], x["kv_indices"], x["kv_indptr"], x["scale"], x["kv_scale"])


def _mla942_aiter(x: dict, c: Case) -> Result:
    out, cnt = mla.run_aiter_mla_a16w8(x["q_lat"], x["q_pe"], *_mla_args(x), check_hazards="warn")
    return Result(out, None, cnt, cnt["kernel"])


def _mla942_ours(x: dict, c: Case) -> Result | None:
    from moonmath_common import NoKernelError
    from moonmath_mla_decode import mla_decode_a16w8

    out = torch.zeros_like(x["q_lat"])
    try:
        with metrics.emulated_arch("gfx942"), metrics.capture_launches() as seen:
            mla_decode_a16w8(x["q_lat"], x["q_pe"], x["kv_pool"], out, x["seq_lens"], x["kv_indices"], x["kv_indptr"],
                             x["scale"], x["kv_scale"])
    except NoKernelError:
        return None
    return Result(out, None, metrics.sum_counters(seen), f"moonmath ({len(seen)} launches)")


def _mla942_ref(x: dict, c: Case) -> dict[str, torch.Tensor]:
    o, _ = mla.reference_mla(x["q_lat"], x["q_pe"], *_mla_args(x))
    return {"fp64": o}


def _mla950_aiter(x: dict, c: Case) -> Result:
    out, cnt = mla.run_aiter_mla_a8w8(x["q8"], x["q_scale"], *_mla_args(x), kv_splits=c.p.get("splits", 1),
                                      check_hazards="warn")
    return Result(out, None, cnt, cnt["kernel"])


def _mla950_ours(x: dict, c: Case) -> Result | None:
    # the same format as AITER's: our a8w8 (fp8 Q quantised per tensor on the device from the same bf16 Q, the
    # same fp8 KV); its launches (the |q| maxima, the decode, the split merge if any) are summed
    from moonmath_common import NoKernelError
    from moonmath_mla_decode import mla_decode_a8w8

    out = torch.zeros_like(x["q_lat"])
    try:
        with metrics.emulated_arch("gfx950"), metrics.capture_launches() as seen:
            mla_decode_a8w8(x["q_lat"], x["q_pe"], x["kv_pool"], out, x["seq_lens"], x["kv_indices"], x["kv_indptr"],
                            x["scale"], x["kv_scale"])
    except NoKernelError:
        return None
    return Result(out, None, metrics.sum_counters(seen), "moonmath (a8w8)")


def _mla950_ref(x: dict, c: Case) -> dict[str, torch.Tensor]:
    q8 = x["q8"]
    o, _ = mla.reference_mla(q8[..., :mla.LAT].float(), q8[..., mla.LAT:].float(), *_mla_args(x), q_scale=x["q_scale"])
    model = mla.reference_mla_fp8_p(q8, x["q_scale"], *_mla_args(x))
    return {"fp64": o, "fp64 fp8-P model": model}


def _mla_units(c: Case) -> float:
    return c.p["B"] * c.p["q_len"] * c.p["S"] / 16


def _mla_tokens(c: Case) -> int:
    return c.p["B"] * c.p["S"]


def mla_gfx942(quick: bool = False) -> Family:
    shapes = [(1, 256, 1)] if quick else [(2, 1024, 1), (2, 1024, 4), (2, 8192, 1)]
    cases = [Case(f"B{b} S{s} q_len {q}", {"B": b, "S": s, "q_len": q}) for b, s, q in shapes]
    return Family("mla_gfx942", "gfx942", "gfx942 MLA decode a16w8 (mla_a16w8_qh16_m16x4_n16x1_coex0_mask1_ps)",
                  "16 KV tokens of one query position (16 heads)", cases, _mla_inputs("gfx942"), _mla942_aiter,
                  _mla942_ours, _mla942_ref, _mla_units, _mla_tokens,
                  ["ours: the public op mla_decode_a16w8 with its planner's KV split (kernel + merge launches)"])


def mla_gfx950(quick: bool = False) -> Family:
    shapes = [(1, 256, 1)] if quick else [(2, 1024, 1), (2, 8192, 1)]
    cases = [Case(f"B{b} S{s} q_len {q}", {"B": b, "S": s, "q_len": q}) for b, s, q in shapes]
    return Family("mla_gfx950", "gfx950", "gfx950 MLA decode a8w8 (mla_a8w8_qh16_qseqlen1_gqaratio16)",
                  "16 KV tokens of one query position (16 heads)", cases, _mla_inputs("gfx950"), _mla950_aiter,
                  _mla950_ours, _mla950_ref, _mla_units, _mla_tokens,
                  ["AITER: fp8 Q (per-tensor scale) and fp8 P; one KV split (the kernel writes bf16 itself)",
                   "'fp64 fp8-P model': the exact math with P rounded to fp8 per 64-row KV tile as the kernel does"])


FAMILIES = {"fmha_gfx942": fmha_gfx942, "fmha_gfx950": fmha_gfx950, "mla_gfx942": mla_gfx942,
            "mla_gfx950": mla_gfx950}


def _moe_gfx950(quick: bool = False) -> Family:
    from .moe_family import moe_gfx950  # its own file (issue 15); imported late: it imports this module

    return moe_gfx950(quick)


FAMILIES["moe_gfx950"] = _moe_gfx950


def _moe_gfx942(quick: bool = False) -> Family:
    from .moe_gfx942_family import moe_gfx942

    return moe_gfx942(quick)


FAMILIES["moe_gfx942"] = _moe_gfx942


def unit_count(f: Family, c: Case) -> float:
    u = f.units(c)
    if u <= 0 or not math.isfinite(u):
        raise ValueError(f"{f.name} {c.label}: bad unit count {u}")
    return u
