"""AITER's FMHA v3 forward (hand-written assembly, batch mode) on moonmath-emu.

    from benchmarks.peers.fmha_v3 import run_aiter_fmha
    out, lse, counters = run_aiter_fmha(q, k, v, causal=False, round_mode=None, arch="gfx942",
                                        return_lse=False, layout="bhsd")

`run_aiter_fmha(q, k, v, *, causal=False, round_mode=None, arch="gfx942", return_lse=False,
layout="bhsd", softmax_scale=None, check_hazards=False) -> (out, lse, counters)` — a stable signature,
meant to be called from our own attention tests to put AITER's kernel beside ours on the same inputs:

- q, k, v: bf16 CPU tensors in our ``forward``'s conventions: layout "bhsd" = ``[B, H, S, D]`` or
  "bshd" = ``[B, S, H, D]``, last dim contiguous (other strides are passed to the kernel as they are:
  no copies). k and v have the same B, Hk and Skv; Hq % Hk == 0 (GQA/MQA).
- head dims: gfx942 (128, 128); gfx950 (128, 128) or (192, 128) (q/k dim, v dim).
- causal: bottom-right aligned (row i sees keys j <= i + Skv - Sq), AITER's mask for batch mode.
- round_mode: the bf16 output rounding, which selects the code object. gfx942: "rtna" (default),
  "rtne", "rtz" (`MI300/fwd_hd128_bf16[_causal]_<mode>.co`); gfx950 ships one object per shape
  (`fwd_hd128_bf16[_causal].co`, `fwd_hd192_hd128_bf16[_causal].co`): "rtne" (default) only.
- softmax_scale: default 1/sqrt(Dqk).
- returns out (bf16, q's layout and shape with v's head dim), lse (fp32 ``[B, Hq, Sq]``, natural log,
  or None unless return_lse) and the emulator's counters dict of the launch.
- check_hazards: passed to the emulator (False, True or "warn").

Launch (read from AITER's host sources, restated): 512 threads (8 waves) per workgroup, 256 query rows
per workgroup (gfx950 hd192: 256 threads, 128 rows); grid (ceil(Sq/rows), Hq, B), the x extent halved,
rounded up, for causal (each workgroup then does two q tiles). Argument layout: `FMHA_V3_ARGS`.
"""
from __future__ import annotations

import math

import torch

from .harness import Field, launch

# The packed argument struct of the v3 forward kernels (each field in its own 16-byte slot). Strides
# are in bytes.
FMHA_V3_ARGS: tuple[Field, ...] = (
    Field(0, "o", "ptr", "output O, bf16"),
    Field(16, "q", "ptr", "Q, bf16"),
    Field(32, "k", "ptr", "K, bf16"),
    Field(48, "v", "ptr", "V, bf16"),
    Field(64, "lse", "ptr", "LSE, fp32 [B, Hq, Sq], natural log (null when not stored)"),
    Field(80, "scale", "f32", "softmax scale"),
    Field(96, "seqlen_q", "u32", "Sq"),
    Field(112, "q_row_stride", "u32", "Q row (token) stride"),
    Field(128, "q_tile_stride", "u32", "Q row stride times the rows of one workgroup tile"),
    Field(144, "q_head_stride", "u32", "Q head stride"),
    Field(160, "q_batch_stride", "u32", "Q batch stride"),
    Field(176, "gqa_ratio", "u32", "Hq / Hk"),
    Field(192, "k_row_stride", "u32", "K row stride"),
    Field(208, "k_head_stride", "u32", "K head stride"),
    Field(224, "k_batch_stride", "u32", "K batch stride"),
    Field(240, "tune_opt", "u32", "tuning option: 5; 3 for causal when Hq % 8 != 0 or Sq > 16384"),
    Field(256, "store_lse", "u32", "1: write LSE"),
    Field(272, "seqlen_k", "u32", "Skv"),
    Field(288, "qk_head_dim", "u32", "Dqk"),
    Field(304, "v_head_dim", "u32", "Dv"),
    Field(320, "nhead_q", "u32", "Hq"),
    Field(336, "v_row_stride", "u32", "V row stride"),
    Field(352, "v_head_stride", "u32", "V head stride"),
    Field(368, "v_batch_stride", "u32", "V batch stride"),
    Field(384, "o_row_stride", "u32", "O row stride"),
    Field(400, "o_head_stride", "u32", "O head stride"),
    Field(416, "o_batch_stride", "u32", "O batch stride"),
    Field(432, "seqstart_q", "ptr", "varlen (group mode) only: null in batch mode"),
    Field(448, "seqstart_k", "ptr", "varlen only: null"),
    Field(464, "lse_head_stride", "u32", "LSE head stride"),
    Field(480, "seqstart_q_padded", "ptr", "varlen only: null"),
    Field(496, "seqstart_k_padded", "ptr", "varlen only: null"),
)

ROUND_MODES = {"gfx942": ("rtna", "rtne", "rtz"), "gfx950": ("rtne",)}
LAYOUTS = ("bhsd", "bshd")


def kernel_for(arch: str, dqk: int, dv: int, causal: bool, round_mode: str) -> tuple[str, int, int]:
    """(code object path under aiter_meta/hsa/<arch>/, threads per workgroup, q rows per workgroup)."""
    c = "_causal" if causal else ""
    if arch == "gfx942":
        if (dqk, dv) != (128, 128):
            raise ValueError(f"gfx942 FMHA v3 forward has head dims (128, 128) only; got ({dqk}, {dv})")
        return f"fmha_v3_fwd/MI300/fwd_hd128_bf16{c}_{round_mode}.co", 512, 256
    if (dqk, dv) == (128, 128):
        return f"fmha_v3_fwd/fwd_hd128_bf16{c}.co", 512, 256
    if (dqk, dv) == (192, 128):
        return f"fmha_v3_fwd/fwd_hd192_hd128_bf16{c}.co", 256, 128
    raise ValueError(f"gfx950 FMHA v3 forward has head dims (128, 128) and (192, 128); got ({dqk}, {dv})")


def _bhsd_strides(t: torch.Tensor, layout: str) -> tuple[int, int, int]:
    """(row, head, batch) strides in bytes of a bf16 tensor in `layout`."""
    e = t.element_size()
    if layout == "bhsd":
        return t.stride(2) * e, t.stride(1) * e, t.stride(0) * e
    return t.stride(1) * e, t.stride(2) * e, t.stride(0) * e


def run_aiter_fmha(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                   round_mode: str | None = None, arch: str = "gfx942", return_lse: bool = False,
                   layout: str = "bhsd", softmax_scale: float | None = None,
                   check_hazards: bool | str = False) -> tuple[torch.Tensor, torch.Tensor | None, dict]:
    """AITER's FMHA v3 forward on the emulator; see the module docstring."""
    if arch not in ROUND_MODES:
        raise ValueError(f"arch must be 'gfx942' or 'gfx950'; got {arch!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}; got {layout!r}")
    if round_mode is None:
        round_mode = ROUND_MODES[arch][0]
    if round_mode not in ROUND_MODES[arch]:
        raise ValueError(f"round_mode on {arch} must be one of {ROUND_MODES[arch]}; got {round_mode!r}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool; got {type(causal).__name__}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor; got {type(t).__name__}")
        if t.dtype != torch.bfloat16 or t.dim() != 4 or t.device.type != "cpu":
            raise ValueError(f"{name} must be a 4-D bf16 CPU tensor; got {t.dtype} {list(t.shape)} on {t.device}")
        if t.stride(3) != 1:
            raise ValueError(f"{name} must have a contiguous last (head) dimension; got strides {t.stride()}")
    sdim, hdim = (2, 1) if layout == "bhsd" else (1, 2)
    B, Hq, Sq, Dqk = q.shape[0], q.shape[hdim], q.shape[sdim], q.shape[3]
    Hk, Skv = k.shape[hdim], k.shape[sdim]
    Dv = v.shape[3]
    if k.shape[0] != B or k.shape[3] != Dqk:
        raise ValueError(f"k must have q's batch and head dim; got q {list(q.shape)}, k {list(k.shape)}")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v must match k in all but the last dim; got k {list(k.shape)}, v {list(v.shape)}")
    if Hq < 1 or Hk < 1 or Hq % Hk:
        raise ValueError(f"q heads must be a positive multiple of k heads; got {Hq} and {Hk}")
    if min(B, Sq, Skv) < 1:
        raise ValueError(f"batch and sequence lengths must be >= 1; got q {list(q.shape)}, k {list(k.shape)}")
    rel, threads, rows = kernel_for(arch, Dqk, Dv, causal, round_mode)
    scale = 1.0 / math.sqrt(Dqk) if softmax_scale is None else float(softmax_scale)

    oshape = (B, Hq, Sq, Dv) if layout == "bhsd" else (B, Sq, Hq, Dv)
    out = torch.zeros(oshape, dtype=torch.bfloat16)
    lse = torch.zeros(B, Hq, Sq, dtype=torch.float32) if return_lse else None
    qs, ks, vs, os_ = (_bhsd_strides(t, layout) for t in (q, k, v, out))
    tiles = math.ceil(Sq / rows)
    gx = math.ceil(tiles / 2) if causal else tiles
    tune = 3 if causal and (Hq % 8 or Sq > 16384) else 5
    values = {
        "o": out, "q": q, "k": k, "v": v, "lse": lse, "scale": scale, "seqlen_q": Sq,
        "q_row_stride": qs[0], "q_tile_stride": qs[0] * rows, "q_head_stride": qs[1], "q_batch_stride": qs[2],
        "gqa_ratio": Hq // Hk, "k_row_stride": ks[0], "k_head_stride": ks[1], "k_batch_stride": ks[2],
        "tune_opt": tune, "store_lse": int(return_lse), "seqlen_k": Skv, "qk_head_dim": Dqk, "v_head_dim": Dv,
        "nhead_q": Hq, "v_row_stride": vs[0], "v_head_stride": vs[1], "v_batch_stride": vs[2],
        "o_row_stride": os_[0], "o_head_stride": os_[1], "o_batch_stride": os_[2],
        "seqstart_q": None, "seqstart_k": None, "lse_head_stride": Sq * 4,
        "seqstart_q_padded": None, "seqstart_k_padded": None,
    }
    counters = launch(arch, rel, FMHA_V3_ARGS, values, grid=(gx, Hq, B), block=threads,
                      check_hazards=check_hazards)
    counters["kernel"] = rel
    return out, lse, counters


def reference_fmha(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                   layout: str = "bhsd", softmax_scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 reference (out [q's layout], lse [B, Hq, Sq]) from the math, GQA by head repetition."""
    from moonmath_common.numerics import softmax_attention

    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    B, Hq, Sq, D = q.shape
    Hk, Skv, Dv = k.shape[1], k.shape[2], v.shape[3]
    rep = Hq // Hk
    kk = k.repeat_interleave(rep, dim=1).reshape(B * Hq, Skv, D)
    vv = v.repeat_interleave(rep, dim=1).reshape(B * Hq, Skv, Dv)
    key_end = None
    if causal:
        key_end = (torch.arange(Sq) + Skv - Sq + 1).view(1, Sq)
    scale = 1.0 / math.sqrt(D) if softmax_scale is None else softmax_scale
    o, lse = softmax_attention(q.reshape(B * Hq, Sq, D), kk, vv, scale, key_end, acc_dtype=torch.float64)
    o = o.view(B, Hq, Sq, Dv)
    if layout == "bshd":
        o = o.transpose(1, 2)
    return o, lse.view(B, Hq, Sq)
