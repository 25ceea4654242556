"""Reference backend of the MXFP4 MoE GEMMs: plain torch, fp32 accumulation.

The reference takes the repacked tensors the API takes, un-repacks them (moonmath_mxfp4_moe.repack) and
decodes the stock layout: W[e][n, k] = E2M1(code) * 2^(scale - 127), exact in fp32. For every block
i < min(num_m_blocks, ceil(ntpp / block_m)) with expert_ids[i] = e >= 0, every row r whose slot
s = sorted_ids[i * block_m + r] is < num_valid_tokens (an index past sorted_ids' end is a padding row)
computes acc = A[s // top_k] . W[e]^T in fp32
(A upcast exactly from bf16; for the a4w4 ops, A decoded exactly from its MXFP4 codes and scales), then
    EPI_NONE: v = acc
    EPI_SITU: g = acc[:N], u = acc[N:2N];  v = (b * tanh(g / b) * sigmoid(g)) * (L * tanh(u / L))
    EPI_SILU: g = acc[:N], u = acc[N:2N];  v = silu(g) * u = g * sigmoid(g) * u   (SwiGLU)
    v = v * topk_weights[s] (when mul_routed_weight, the weight as given, fp32 or bf16 upcast; after the
        epilogue under every epilogue)
and writes C[s] = bf16 RTNE(v) (NaN -> 0x7FFF). Rows of C that no live slot names are not written.
The a4w4 gate/up with MXFP4 output then quantises each written bf16 row by quant.quantize_reference.
"""
from __future__ import annotations

import torch

from moonmath_common.numerics import e8m0_to_f32, round_bf16, unpack_e2m1

from .repack import unrepack_mxfp4, unrepack_mxfp4_scales

EPI_NONE = 0
EPI_SITU = 1
EPI_SILU = 2


def dequant_expert(B: torch.Tensor, Bs: torch.Tensor, e: int) -> torch.Tensor:
    """fp32 [N, K] weights of expert e from repacked B [E, K/32, N, 16] and scales Bs [E, K/32, N]."""
    w = unpack_e2m1(unrepack_mxfp4(B[e:e + 1]))[0]                        # [N, K]
    s = e8m0_to_f32(unrepack_mxfp4_scales(Bs[e:e + 1]))[0]                # [N, K/32]
    return w * s.repeat_interleave(32, dim=1)


def situ_glu(g: torch.Tensor, u: torch.Tensor, beta: float, linear_beta: float) -> torch.Tensor:
    return (beta * torch.tanh(g / beta) * torch.sigmoid(g)) * (linear_beta * torch.tanh(u / linear_beta))


def swiglu(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    return g * torch.sigmoid(g) * u


def live_slots(sorted_ids: torch.Tensor, expert_ids: torch.Tensor, num_tokens_post_padded: torch.Tensor,
               num_m_blocks: int, block_m: int, num_valid_tokens: int, num_experts: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(slots, experts) int64 of every live row the kernels compute (see the module docstring)."""
    ntpp = int(num_tokens_post_padded.reshape(-1)[0])
    live = min(num_m_blocks, max(0, -(-ntpp // block_m)))
    slots = sorted_ids[:live * block_m].to(torch.int64)
    if slots.numel() < live * block_m:  # entries past sorted_ids' end are padding rows, as in the kernels
        pad = torch.full((live * block_m - slots.numel(),), num_valid_tokens, dtype=torch.int64, device=slots.device)
        slots = torch.cat((slots, pad))
    experts = expert_ids[:live].to(torch.int64).repeat_interleave(block_m)
    ok = (slots >= 0) & (slots < num_valid_tokens) & (experts >= 0) & (experts < num_experts)
    return slots[ok], experts[ok]


def grouped_gemm(A: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                 topk_weights: torch.Tensor | None, sorted_ids: torch.Tensor, expert_ids: torch.Tensor,
                 num_tokens_post_padded: torch.Tensor, num_m_blocks: int, block_m: int, num_valid_tokens: int,
                 top_k: int, epilogue: int, mul_routed_weight: bool, situ_beta: float = 1.0,
                 situ_linear_beta: float = 1.0) -> None:
    """Writes the live rows of C in place (shared by gate/up and down; down is EPI_NONE)."""
    slots, experts = live_slots(sorted_ids, expert_ids, num_tokens_post_padded, num_m_blocks, block_m,
                                num_valid_tokens, B.shape[0])
    for e in torch.unique(experts).tolist():
        rows = slots[experts == e]
        W = dequant_expert(B, Bs, e)
        acc = A[rows // top_k].float() @ W.t()
        if epilogue == EPI_SITU:
            n = acc.shape[1] // 2
            acc = situ_glu(acc[:, :n], acc[:, n:], situ_beta, situ_linear_beta)
        elif epilogue == EPI_SILU:
            n = acc.shape[1] // 2
            acc = swiglu(acc[:, :n], acc[:, n:])
        if mul_routed_weight:
            acc = acc * topk_weights.reshape(-1)[rows].float()[:, None]
        C[rows] = round_bf16(acc, "rtne")
