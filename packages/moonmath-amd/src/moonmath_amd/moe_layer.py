"""fused_moe: a whole MXFP4 MoE layer in one call, composed only from the public MoE ops (align, gate/up with
the gated epilogue, down with the routed weight, the sum over top-k). Nothing here launches a kernel itself."""
from __future__ import annotations

import torch

from moonmath_common import checks
from moonmath_mxfp4_moe import (
    EPI_SILU,
    EPI_SITU,
    moe_align_block_size,
    mxfp4_moe_down,
    mxfp4_moe_down_a4w4,
    mxfp4_moe_down_n_steps,
    mxfp4_moe_down_plan,
    mxfp4_moe_gateup,
    mxfp4_moe_gateup_a4w4,
    mxfp4_moe_gateup_block_m,
    mxfp4_moe_layer_a4w4,
    mxfp4_moe_layer_a4w4_block_m,
    mxfp4_moe_layer_a4w4_down_splits,
    mxfp4_quantize,
)
from moonmath_mxfp4_moe.a4w4 import LAYER_INTERS

ACTIVATIONS = ("bf16", "mxfp4")


def fused_moe(hidden_states: torch.Tensor, w13: torch.Tensor, w13_scales: torch.Tensor, w2: torch.Tensor,
              w2_scales: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, *,
              epilogue: int = EPI_SILU, activations: str = "bf16", situ_beta: float = 1.0,
              situ_linear_beta: float = 1.0, out: torch.Tensor | None = None) -> torch.Tensor:
    """One MXFP4 MoE layer: ``out[t] = sum_k topk_weights[t, k] * down_e(act(gate_e(x_t), up_e(x_t)))`` with
    e = topk_ids[t, k]; returns bf16 ``[T, H]`` (written into ``out`` when given).

    Args:
        hidden_states: bf16 ``[T, H]``, contiguous k (H % 32 == 0; % 128 for activations="mxfp4").
        w13, w13_scales: gate/up weights repacked (repack_mxfp4 / repack_mxfp4_scales of stock
            ``[E, 2I, H/2]`` / ``[E, 2I, H/32]``): gate rows [0, I), up rows [I, 2I).
        w2, w2_scales: down weights repacked from stock ``[E, H, I/2]`` / ``[E, H, I/32]``.
        topk_weights: fp32 or bf16 ``[T, top_k]``, contiguous: applied in the down projection (stage 2), as
            AITER's fused_moe does (doweight_stage1=False). Shared experts are ordinary columns of the routing.
        topk_ids: int32 / int64 ``[T, top_k]``: expert ids; ids outside [0, E) are routed nowhere (contribute 0).
        epilogue: EPI_SILU (SwiGLU, default) or EPI_SITU (SituGLU with situ_beta, situ_linear_beta).
        situ_beta, situ_linear_beta: b and L of EPI_SITU's (b tanh(g/b) sigmoid(g)) * (L tanh(u/L)); finite,
            > 0 (unused under EPI_SILU).
        activations: "bf16" (a16w4, both archs: exact bf16 activations, the intermediate rounded to bf16) or
            "mxfp4" (a4w4, gfx950: AITER's per_1x32 numerics: the hidden states and the intermediate quantised
            to MXFP4 by AITER's rule, see docs/numerics.md; for I = 256 or 512 one launch of
            mxfp4_moe_layer_a4w4, else gate/up then down).
        out: optional bf16 ``[T, H]`` output.

    The planners see min(E, T * top_k) active experts and the aligner's static block capacity, so the call
    makes no host sync beyond what the ops themselves do. The tile choices never change the result.
    """
    checks.tensor("hidden_states", hidden_states, dtype=torch.bfloat16, ndim=2, last_dim_contiguous=True)
    checks.tensor("w13", w13, dtype=torch.uint8, ndim=4)
    checks.tensor("w2", w2, dtype=torch.uint8, ndim=4)
    checks.tensor("topk_ids", topk_ids, dtype=(torch.int32, torch.int64), ndim=2)
    checks.tensor("topk_weights", topk_weights, dtype=(torch.float32, torch.bfloat16), ndim=2, contiguous=True)
    checks.choice("epilogue", epilogue, (EPI_SILU, EPI_SITU))
    checks.choice("activations", activations, ACTIVATIONS)
    T, H = hidden_states.shape
    E, _, two_i, _ = w13.shape
    if two_i % 2:
        raise ValueError(f"w13 must hold 2 * I columns (gate then up); got {two_i}")
    inter = two_i // 2
    if w2.shape[0] != E or w2.shape[2] != H or w2.shape[1] * 32 != inter:
        raise ValueError(f"w2 must be the repacked down weights [E={E}, I/32={inter // 32}, H={H}, 16] for w13's "
                         f"E and I and hidden_states' H; got {list(w2.shape)}")
    if topk_weights.shape != topk_ids.shape or topk_ids.shape[0] != T:
        raise ValueError(f"topk_weights and topk_ids must both be [T={T}, top_k]; got {list(topk_weights.shape)} "
                         f"and {list(topk_ids.shape)}")
    if out is not None:
        checks.tensor("out", out, dtype=torch.bfloat16, shape=[T, H], contiguous=True)
    top_k = topk_ids.shape[1]
    nvt = T * top_k
    result = out if out is not None else torch.empty(T, H, dtype=torch.bfloat16, device=hidden_states.device)
    if nvt == 0:
        result.zero_()
        return result
    active = min(E, nvt)
    one_launch = activations == "mxfp4" and inter in LAYER_INTERS
    # the layer's tile from the routing: a taller tile when it keeps a second workgroup off some CUs
    bm = mxfp4_moe_layer_a4w4_block_m(topk_ids, E) if one_launch else mxfp4_moe_gateup_block_m(nvt, active)
    sid, eid, ntpp, nblk = moe_align_block_size(topk_ids, bm, E)
    y = torch.zeros(nvt, H, dtype=torch.bfloat16, device=hidden_states.device)  # slots routed nowhere stay 0
    dev = hidden_states.device
    if activations == "mxfp4":
        aq, as_ = mxfp4_quantize(hidden_states)
        if one_launch:  # one launch, the MXFP4 intermediate stays in LDS (bit-equal to the two ops)
            splits = mxfp4_moe_layer_a4w4_down_splits(topk_ids, E, bm)  # more workgroups when CUs stay idle
            mxfp4_moe_layer_a4w4(aq, as_, w13, w13_scales, w2, w2_scales, y, topk_weights, sid, eid, ntpp, nblk, bm,
                                 nvt, top_k, epilogue, situ_beta=situ_beta, situ_linear_beta=situ_linear_beta,
                                 down_splits=splits)
            result.copy_(y.view(T, top_k, H).float().sum(1))
            return result
        iq = torch.empty(nvt, inter // 2, dtype=torch.uint8, device=dev)
        is_ = torch.empty(nvt, inter // 32, dtype=torch.uint8, device=dev)
        mxfp4_moe_gateup_a4w4(aq, as_, w13, w13_scales, iq, None, sid, eid, ntpp, nblk, bm, nvt, top_k, epilogue,
                              situ_beta=situ_beta, situ_linear_beta=situ_linear_beta, C_scales=is_)
        mxfp4_moe_down_a4w4(iq, is_, w2, w2_scales, y, topk_weights, sid, eid, ntpp, nblk, bm, nvt, 1,
                            mul_routed_weight=True)
    else:
        h = torch.empty(nvt, inter, dtype=torch.bfloat16, device=dev)
        mxfp4_moe_gateup(hidden_states, w13, w13_scales, h, None, sid, eid, ntpp, nblk, bm, nvt, top_k, epilogue,
                         situ_beta=situ_beta, situ_linear_beta=situ_linear_beta)
        dbm, dnt, _ = mxfp4_moe_down_plan(nvt, active, H, inter, nblk)
        if dbm == 0:  # the down kernel does not serve this K: gate/up with EPI_NONE
            mxfp4_moe_gateup(h, w2, w2_scales, y, topk_weights, sid, eid, ntpp, nblk, bm, nvt, 1,
                             mul_routed_weight=True)
        else:
            if dbm != bm:
                sid, eid, ntpp, nblk = moe_align_block_size(topk_ids, dbm, E)
            steps = mxfp4_moe_down_n_steps(nblk, H, 0, dbm, dnt)
            mxfp4_moe_down(h, w2, w2_scales, y, topk_weights, sid, eid, ntpp, nblk, dbm, steps, dnt, nvt, 1,
                           mul_routed_weight=True)
    result.copy_(y.view(T, top_k, H).float().sum(1))
    return result
