"""AITER's gfx942 1-stage MoE assembly kernels on the emulator: the int4-weight x fp8-activation object
`fmoe_int4fp8_g1u1_subGU_{128,256,512}_gelu.co` (the 4-bit-weight MoE AITER ships for gfx942: gfx942 has no
fp4 MFMA, so no MXFP4 object exists) and the fp8 per-token object
`fmoe/silu/fmoe_bf16_pertokenFp8_g1u1_silu_1tg_32x{128,...}.co`
(the object AITER runs under AITER_ENABLE_VSKIP=0; its default `_vs_` twin uses `s_setvskip`, which the
emulator lacks). Both fuse gate/up, the gated activation and down (times the routing weight, summed into a
bf16 output) in one launch.

Argument struct and layouts: our restatement of AITER's host code (`aiter_meta/csrc/py_itfs_cu/asm_fmoe.cu`
`FMoeKernel::launch_kernel` / `fmoe_g1u1`, `aiter/fused_moe_bf16_asm.py` `asm_moe`, `aiter/int4_utils.py`,
`aiter/ops/shuffle.py` `shuffle_weight`, the int4 case of `csrc/cpp_itfs/moe/test_asm_moe.py`): the struct of
the gfx950 a4w4 object (moe.FMOE_ARGS: 12 pointers then 16 u32, each in its own 16-byte slot), 256 threads,
grid (ceil(I / sub_GU), m-blocks of 32), CK sorting ids (moe.sorting).
- int4: weights per output channel, symmetric (scale = amax / 7, fp32 [E, rows]); 8 codes per 32-bit word
  with nibble p holding k-element (0, 2, 4, 6, 1, 3, 5, 7)[p]; the words shuffled as 16-row x 32-word tiles
  of [16 rows x 4 words] chunks; activations fp8 (e4m3fnuz) per token, given as [top_k, T, dim] (AITER's
  moe_smoothquant output; with its all-ones smooth scale every k copy is the same) with fp32 scales
  [top_k * T]; a fp32 [E, I] smooth scale of ones for the down input (the host passes ones: "needed but not
  used"). Strides of the weights are halved (4 bits). Its struct ends after `topk` (416-byte segment).
- fp8: weights fp8 e4m3fnuz per output channel (scale = amax / 240), shuffled as 16-row x 32-byte tiles;
  activations fp8 per token [T, dim] with fp32 scales [T]; no smooth scale (smf 0).
"""
from __future__ import annotations

import torch

from . import moe
from .harness import launch

FP8 = torch.float8_e4m3fnuz
FP8_MAX = 240.0
INT4_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # k-element held by nibble p of a packed word
INT4_ARGS = moe.FMOE_ARGS[:-2]  # the int4 objects' struct stops at topk (no total_tgs / ps_deno)


def int4_object(sub_gu: int) -> str:
    if sub_gu not in (128, 256, 512):
        raise ValueError(f"sub_gu must be 128, 256 or 512; got {sub_gu}")
    return f"fmoe_int4fp8_g1u1_subGU_{sub_gu}_gelu.co"


def fp8_object(sub_gu: int) -> str:
    if sub_gu not in (128, 192, 256, 320, 384, 448, 512):
        raise ValueError(f"sub_gu must be a multiple of 64 in [128, 512]; got {sub_gu}")
    return f"fmoe/silu/fmoe_bf16_pertokenFp8_g1u1_silu_1tg_32x{sub_gu}.co"  # the AITER_ENABLE_VSKIP=0 object


def heuristic_tile(inter: int, tiles: tuple[int, ...]) -> int:
    """AITER's tile rule at decode (every tile fits one round on the CUs): the tile dividing I that leaves
    the fewest CUs empty, i.e. the smallest dividing tile."""
    fits = [t for t in tiles if inter % t == 0]
    if not fits:
        raise ValueError(f"I = {inter} is a multiple of none of AITER's tiles {tiles}")
    return min(fits)


def quantize_rows(w: torch.Tensor, qmax: float, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row quantisation: scale = amax / qmax (1 for an all-zero row); int4 codes rounded to
    nearest (AITER's pertoken_quant truncates toward zero: our inputs, the reference decodes what is
    stored either way) or fp8 e4m3fnuz. Returns (codes int8 or fp8, fp32 scales [..., 1])."""
    x = w.float()
    s = x.abs().amax(-1, keepdim=True) / qmax
    s[s == 0] = 1
    y = x / s
    q = y.round().clamp(-8, 7).to(torch.int8) if kind == "int4" else y.to(FP8)
    return q, s


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """int8 codes in [-8, 7], [..., K] -> uint8 bytes [..., K / 2] of 32-bit words in AITER's nibble order."""
    *lead, K = q.shape
    if K % 8:
        raise ValueError(f"K must be a multiple of 8; got {K}")
    nib = (q.to(torch.int32) & 0xF).reshape(*lead, K // 8, 8)
    word = torch.zeros(*lead, K // 8, dtype=torch.int64)
    for p, e in enumerate(INT4_ORDER):
        word |= nib[..., e].to(torch.int64) << (4 * p)
    return word.to(torch.uint32).view(torch.uint8).reshape(*lead, K // 2) if hasattr(torch, "uint32") else \
        word.to(torch.int32).view(torch.uint8).reshape(*lead, K // 2)


def shuffle_words(w: torch.Tensor) -> torch.Tensor:
    """shuffle_weight (16, 16) of a 32-bit-word tensor given as bytes [..., N, Kb]: 16-row x 128-byte
    tiles, each stored as 8 chunks of [16 rows x 16 bytes]."""
    *lead, N, Kb = w.shape
    if N % 16 or Kb % 128:
        raise ValueError(f"int4 weights need rows % 16 == 0 and K % 256 == 0; got rows {N}, K {2 * Kb}")
    x = w.reshape(-1, N // 16, 16, Kb // 128, 8, 16).permute(0, 1, 3, 4, 2, 5).contiguous()
    return x.reshape(*lead, N, Kb)


def fp8_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """AITER's dynamic per-token fp8 quantisation of bf16 rows (scale = amax / 240): codes [T, dim], fp32 [T]."""
    q, s = quantize_rows(x, FP8_MAX, "fp8")
    return q, s.reshape(-1)


def _sorted(topk_ids, topk_weights, E):
    ids, sw, eid, num_valid, _ = moe.sorting(topk_ids, topk_weights, E)
    return ids, sw, eid, num_valid


def _values(*, out, x, gu, dn, xs, gus, dns, sms, ids, sw, eid, num_valid, T, E, dim, inter, top_k, bits, sub_gu):
    div = 2 if bits == 4 else 1
    return dict(out=out, x=x, gate_up=gu, num_valid=num_valid, down=dn, x_scale=xs, gate_up_scale=gus,
                down_scale=dns, smooth_scale=sms, sorted_ids=ids, sorted_weights=sw, sorted_experts=eid, dim=dim,
                inter_dim=inter, tokens=T, experts=E, x_stride=dim, gate_up_stride=dim // div,
                down_stride=inter // div, out_stride=dim * 2, expert_gate_up_stride=dim // div * 2 * inter,
                expert_down_stride=inter // div * dim, expert_gate_up_scale_stride=2 * inter * 4,
                expert_down_scale_stride=dim * 4, expert_smooth_stride=inter * 4, topk=top_k, total_tgs=0,
                ps_deno=-(-inter // sub_gu))


def run_aiter_fmoe_int4fp8(x8, x8_scale, w13_q, s13, w2_q, s2, topk_ids, topk_weights, *, sub_gu=None,
                           check_hazards=False):
    """AITER's int4-weight x fp8-activation 1-stage MoE (gelu(gate) * up).

    x8: fp8 e4m3fnuz [T, dim] per-token codes, x8_scale fp32 [T]; w13_q int8 codes in [-8, 7] [E, 2I, dim]
    (gate rows then up rows) with fp32 per-row scales s13 [E, 2I]; w2_q [E, dim, I], s2 [E, dim].
    Returns (out bf16 [T, dim], counters, object name)."""
    T, dim = x8.shape
    E, two_i, _ = w13_q.shape
    inter = two_i // 2
    top_k = topk_ids.shape[1]
    sub_gu = sub_gu or heuristic_tile(inter, (512, 256, 128))
    ids, sw, eid, num_valid = _sorted(topk_ids, topk_weights, E)
    xk = x8.view(torch.uint8).unsqueeze(0).expand(top_k, T, dim).contiguous()  # [top_k, T, dim]
    xks = x8_scale.float().unsqueeze(0).expand(top_k, T).contiguous().reshape(-1)
    out = torch.zeros(T, dim, dtype=torch.bfloat16)
    vals = _values(out=out, x=xk.view(top_k * T, dim), gu=shuffle_words(pack_int4(w13_q)),
                   dn=shuffle_words(pack_int4(w2_q)), xs=xks, gus=s13.float().contiguous(),
                   dns=s2.float().contiguous(), sms=torch.ones(E, inter), ids=ids, sw=sw, eid=eid,
                   num_valid=num_valid, T=T, E=E, dim=dim, inter=inter, top_k=top_k, bits=4, sub_gu=sub_gu)
    grid = (-(-inter // sub_gu), eid.numel(), 1)
    obj = int4_object(sub_gu)
    del vals["total_tgs"], vals["ps_deno"]  # this older object's segment (416 bytes) ends after topk
    counters = launch("gfx942", obj, INT4_ARGS, vals, grid, 256, check_hazards=check_hazards)
    return out, counters, obj


def run_aiter_fmoe_fp8(x8, x8_scale, w13_q, s13, w2_q, s2, topk_ids, topk_weights, *, sub_gu=None,
                       check_hazards=False):
    """AITER's fp8 per-token 1-stage MoE (silu(gate) * up): x8 fp8 e4m3fnuz [T, dim] with fp32 [T] scales,
    w13_q fp8 [E, 2I, dim] with fp32 per-row scales [E, 2I], w2_q fp8 [E, dim, I] with [E, dim].
    Returns (out bf16 [T, dim], counters, object name)."""
    T, dim = x8.shape
    E, two_i, _ = w13_q.shape
    inter = two_i // 2
    sub_gu = sub_gu or heuristic_tile(inter, (128, 192, 256, 320, 384, 448, 512))
    ids, sw, eid, num_valid = _sorted(topk_ids, topk_weights, E)
    out = torch.zeros(T, dim, dtype=torch.bfloat16)
    vals = _values(out=out, x=x8.view(torch.uint8).contiguous(),
                   gu=moe.shuffle_weight(w13_q.view(torch.uint8)).contiguous(),
                   dn=moe.shuffle_weight(w2_q.view(torch.uint8)).contiguous(), xs=x8_scale.float().contiguous(),
                   gus=s13.float().contiguous(), dns=s2.float().contiguous(), sms=None, ids=ids, sw=sw, eid=eid,
                   num_valid=num_valid, T=T, E=E, dim=dim, inter=inter, top_k=topk_ids.shape[1], bits=8,
                   sub_gu=sub_gu)
    grid = (-(-inter // sub_gu), eid.numel(), 1)
    obj = fp8_object(sub_gu)
    counters = launch("gfx942", obj, moe.FMOE_ARGS, vals, grid, 256, check_hazards=check_hazards)
    return out, counters, obj
