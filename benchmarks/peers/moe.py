"""AITER's gfx950 a4w4 MXFP4 MoE assembly kernel on the emulator: `fmoe/silu/fmoe_bf16_pertokenMXfp4_g1u1_*`
(the 1-stage fused gate/up + SwiGLU + down that `aiter.fmoe_g1u1` launches for fp4x2 activations and
weights). The wheel's `fmoe_2stages/` holds no fp4 object for gfx950 (only fp8 / int8 stage-1 kernels), and
the GPU MODE reference's 2-stage a4w4 path runs CK kernels that AITER builds at run time (`ck_moe_stage1/2`),
not shipped code objects: this 1-stage object is the a4w4 MoE assembly AITER ships.

The argument struct and the input layouts below are our own restatement of AITER's host code
(`aiter_meta/csrc/py_itfs_cu/asm_fmoe.cu`, `aiter/fused_moe.py` `fused_moe_1stage`, `aiter/utility/fp4_utils.py`
`e8m0_shuffle` / `moe_mxfp4_sort`, `aiter/ops/shuffle.py` `shuffle_weight`, CK's moe_sorting id format):
every field in its own 16-byte slot; 256 threads; non-persistent grid (ceil(inter / sub_GU), m-blocks of 32).
"""
from __future__ import annotations

import torch

from .harness import Field, launch

_PTRS = ("out", "x", "gate_up", "num_valid", "down", "x_scale", "gate_up_scale", "down_scale", "smooth_scale",
         "sorted_ids", "sorted_weights", "sorted_experts")
_U32 = ("dim", "inter_dim", "tokens", "experts", "x_stride", "gate_up_stride", "down_stride", "out_stride",
        "expert_gate_up_stride", "expert_down_stride", "expert_gate_up_scale_stride", "expert_down_scale_stride",
        "expert_smooth_stride", "topk", "total_tgs", "ps_deno")
FMOE_ARGS: tuple[Field, ...] = tuple(Field(16 * i, n, "ptr") for i, n in enumerate(_PTRS)) + tuple(
    Field(16 * (len(_PTRS) + i), n, "u32") for i, n in enumerate(_U32))
BLOCK_M = 32


def fmoe_object(sub_gu: int = 256) -> str:
    tg = {256: "2tg_32x256", 512: "1tg_32x512"}[sub_gu]
    return f"fmoe/silu/fmoe_bf16_pertokenMXfp4_g1u1_novs_silu_{tg}.co"


def shuffle_weight(w: torch.Tensor) -> torch.Tensor:
    """AITER's shuffle_weight(layout=(16, 16)) of byte tensors [..., N, Kb]: 16-row x 32-byte tiles, each
    stored as 2 chunks of [16 rows x 16 bytes]."""
    *lead, N, Kb = w.shape
    x = w.reshape(-1, N // 16, 16, Kb // 32, 2, 16).permute(0, 1, 3, 4, 2, 5).contiguous()
    return x.reshape(*lead, N, Kb)


def e8m0_shuffle(s: torch.Tensor) -> torch.Tensor:
    """AITER's e8m0_shuffle of a 2-D scale matrix [m, n] (m padded to 256, n to 8): (m/32, 2, 16, n/8, 2, 4)
    permuted to (m/32, n/8, 4, 16, 2, 2)."""
    m, n = s.shape
    p = torch.zeros((m + 255) // 256 * 256, (n + 7) // 8 * 8, dtype=s.dtype)
    p[:m, :n] = s
    sm, sn = p.shape
    return p.view(sm // 32, 2, 16, sn // 8, 2, 4).permute(0, 3, 5, 2, 4, 1).contiguous().view(sm, sn)


def sorting(topk_ids: torch.Tensor, topk_weights: torch.Tensor, num_experts: int):
    """CK's moe_sorting output from our aligner: ids (token | k << 24, padding tokens | topk << 24), fp32
    weights per sorted row, the expert of each 32-row block, num_valid [padded total, tokens]."""
    from moonmath_mxfp4_moe import moe_align_block_size

    T, top_k = topk_ids.shape
    sid, eid, ntpp, nblk = moe_align_block_size(topk_ids, BLOCK_M, num_experts)
    slot = sid.long()
    live = slot < T * top_k
    tok = torch.where(live, slot // top_k, torch.full_like(slot, T))
    k = torch.where(live, slot % top_k, torch.full_like(slot, top_k))
    ids = (tok | (k << 24)).to(torch.int32)
    w = torch.where(live, topk_weights.reshape(-1).float()[slot.clamp(max=T * top_k - 1)], torch.zeros(()))
    return ids, w.contiguous(), eid.clone(), torch.tensor([int(ntpp[0]), T], dtype=torch.int32), nblk


def mxfp4_sort(scales: torch.Tensor, ids: torch.Tensor, num_valid: torch.Tensor, tokens: int) -> torch.Tensor:
    """AITER's moe_mxfp4_sort of per-token scales [T, n]: per 32 sorted rows and 8 scale columns one
    [4, 16] uint32 tile, byte i of (n, m) = scale[row(16 (i % 2) + m), 4 (i // 2) + n]."""
    rows = ids.numel()
    n = scales.shape[1]
    nb_m, nb_n = -(-rows // 32), -(-n // 8)
    tok = (ids.long() & 0xFFFFFF)
    idx = torch.arange(nb_m * 32)
    valid = idx < int(num_valid[0])
    tpad = torch.full((nb_m * 32,), tokens, dtype=torch.long)
    tpad[:rows] = tok
    tpad = torch.where(valid, tpad, torch.full_like(tpad, tokens))
    spad = torch.zeros(tokens + 1, nb_n * 8, dtype=torch.uint8)
    spad[:tokens, :n] = scales
    g = spad[tpad.clamp(max=tokens)].view(nb_m, 2, 16, nb_n, 2, 4).long()   # [pb, i%2, m, pn, i//2, n]
    out = torch.zeros(nb_m, nb_n, 4, 16, dtype=torch.long)
    for i in range(4):
        out |= g[:, i % 2, :, :, i // 2, :].permute(0, 2, 3, 1) << (8 * i)
    return out.to(torch.int64).to(torch.uint32).view(torch.uint8).view(nb_m * 32, nb_n * 8)


def run_aiter_fmoe_a4w4(x_codes, x_scales, w13, s13, w2, s2, topk_ids, topk_weights, *, sub_gu=256,
                        check_hazards=False):
    """AITER's 1-stage a4w4 MoE on our stock-layout inputs: x codes [T, dim/2] + scales [T, dim/32] (AITER's
    per-1x32 rule), weights [E, 2I, dim/2] / [E, dim, I/2] with scales [E, 2I, dim/32] / [E, dim, I/32].
    Returns (out bf16 [T, dim], counters)."""
    T, half = x_codes.shape
    dim = 2 * half
    E, two_i, _ = w13.shape
    inter = two_i // 2
    ids, sw, eid, num_valid, nblk = sorting(topk_ids, topk_weights, E)
    xs = mxfp4_sort(x_scales, ids, num_valid, T)
    gu = shuffle_weight(w13).contiguous()
    dn = shuffle_weight(w2).contiguous()
    if (E * two_i) % 256 or (E * dim) % 256 or (dim // 32) % 8 or (inter // 32) % 8:
        raise ValueError("AITER's scale shuffle pads rows to 256 and columns to 8: pick E * 2I and E * dim "
                         "multiples of 256 and dim, I multiples of 256 (no padding, contiguous experts)")
    gus = e8m0_shuffle(s13.reshape(E * two_i, -1))
    dns = e8m0_shuffle(s2.reshape(E * dim, -1))
    out = torch.zeros(T, dim, dtype=torch.bfloat16)
    vals = dict(out=out, x=x_codes.contiguous(), gate_up=gu, num_valid=num_valid, down=dn, x_scale=xs,
                gate_up_scale=gus, down_scale=dns, smooth_scale=None, sorted_ids=ids, sorted_weights=sw,
                sorted_experts=eid, dim=dim, inter_dim=inter, tokens=T, experts=E, x_stride=half,
                gate_up_stride=dim // 2, down_stride=inter // 2, out_stride=dim * 2,
                expert_gate_up_stride=dim // 2 * two_i, expert_down_stride=inter // 2 * dim,
                expert_gate_up_scale_stride=two_i * dim // 32, expert_down_scale_stride=dim * inter // 32,
                expert_smooth_stride=inter * 4, topk=topk_ids.shape[1], total_tgs=0,
                ps_deno=-(-inter // sub_gu))
    grid = (-(-inter // sub_gu), eid.numel(), 1)
    counters = launch("gfx950", fmoe_object(sub_gu), FMOE_ARGS, vals, grid, 256, check_hazards=check_hazards)
    return out, counters
