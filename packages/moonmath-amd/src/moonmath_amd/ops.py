"""The public op surface of moonmath_amd: re-exports of every op package, and the arch dispatch of the
attention forward (gfx942 -> moonmath_mha_gfx942, gfx950 -> moonmath_attention_gfx950) by
``moonmath_common.target_arch()`` (the live GPU under hip, MOONMATH_EMU_ARCH under emu/reference)."""
from __future__ import annotations

import math

import torch

import moonmath_attention_gfx950 as _gfx950
import moonmath_mha_gfx942 as _gfx942
from moonmath_common import MoonmathError, NoKernelError, target_arch
from moonmath_mla_decode import mla_dcp_lse_merge_ranks, mla_decode_a16w8
from moonmath_mxfp4_moe import (
    EPI_NONE,
    EPI_SILU,
    EPI_SITU,
    moe_align_block_size,
    mxfp4_moe_down,
    mxfp4_moe_down_block_m,
    mxfp4_moe_down_n_steps,
    mxfp4_moe_down_nt,
    mxfp4_moe_down_plan,
    mxfp4_moe_gateup,
    mxfp4_moe_gateup_block_m,
    mxfp4_moe_gateup_supports_k,
    repack_mxfp4,
    repack_mxfp4_scales,
    unrepack_mxfp4,
    unrepack_mxfp4_scales,
)

ATTENTION_ARCHS = ("gfx942", "gfx950")


class ArchFeatureError(MoonmathError, ValueError):
    """The arch that applies (target_arch()) has no such feature, e.g. causal attention on gfx942."""


_GFX950_HEAD_DIMS = frozenset(dqk for dqk, _ in _gfx950.HEAD_DIMS)   # q/k head dims of the gfx950 kernels


def _attention_arch(op: str) -> str:
    arch = target_arch()
    if arch not in ATTENTION_ARCHS:
        raise NoKernelError(op, arch, ATTENTION_ARCHS, "moonmath_amd has attention kernels for gfx942 and gfx950 only.")
    return arch


def _gfx950_only(op: str, what: str) -> None:
    arch = _attention_arch(op)
    if arch != "gfx950":
        raise ArchFeatureError(f"{op}: {what} exists on gfx950 (MI355X) only; the arch here is {arch}. Use forward() "
                               f"on equal-length batches, or select gfx950 (MOONMATH_EMU_ARCH=gfx950 under the emu or "
                               f"reference backend).")


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, out: torch.Tensor | None = None,
            round_mode: str | None = None, layout: str = "bhsd", causal: bool = False,
            softmax_scale: float | None = None, return_lse: bool = False, softcap: float | None = 0.0,
            window_size: tuple[int, int] = (-1, -1), sinks: torch.Tensor | None = None,
            k_descale: torch.Tensor | None = None, v_descale: torch.Tensor | None = None):
    """bf16 attention forward, dispatched by arch (see docs/ops/forward.md).

    gfx942: head dim 128, contiguous q/k/v with equal heads, no causal, no LSE, scale 1/sqrt(128),
    round_mode "rtna" (default), "rtne" or "rtz". gfx950: causal (bottom-right), GQA/MQA, head dims
    64, 80, 96, 128, 256 and (192,128), softmax_scale (default 1/sqrt(Dqk)), any strides with a contiguous head dim,
    lengths >= 0, return_lse (fp32 [B, H, Sq], natural log), round_mode "rtne" only (the default),
    softcap (Gemma 2), window_size=(left, right) (flash-attn sliding window), sinks (gpt-oss, fp32 [Hq]),
    fp8 K/V (float8_e4m3fn k and v with k_descale / v_descale, head dims 64/128/256).
    layout: "bhsd" (default) or "bshd" on both.
    """
    arch = _attention_arch("forward")
    if arch == "gfx942":
        no_window = isinstance(window_size, (tuple, list)) and list(window_size) == [-1, -1]
        fp8 = isinstance(k, torch.Tensor) and k.dtype == _gfx950.FP8_KV
        for name, value, off in (("softcap", softcap, softcap in (None, 0, 0.0)),
                                 ("window_size", window_size, no_window), ("sinks", sinks, sinks is None),
                                 ("k_descale", k_descale, k_descale is None),
                                 ("v_descale", v_descale, v_descale is None),
                                 ("fp8 k/v", "float8_e4m3fn", not fp8)):
            if not off:
                raise ArchFeatureError(f"forward: {name}={value!r} is not supported on gfx942 yet (its MHA kernel "
                                       f"has no {name}); it exists on gfx950")
        if isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape[3] != 128 and q.shape[3] in _GFX950_HEAD_DIMS:
            raise ArchFeatureError(f"forward: head dim {q.shape[3]} (q.shape[3]) is not supported on gfx942 (its MHA "
                                   "kernel is built for head dim 128); head dims "
                                   f"{', '.join(map(str, sorted(_GFX950_HEAD_DIMS)))} exist on gfx950")
        if causal is not False:
            raise ArchFeatureError(f"forward: causal={causal!r} is not supported on gfx942 (its MHA kernel has no "
                                   "causal mask); causal attention exists on gfx950")
        if return_lse is not False:
            raise ArchFeatureError(f"forward: return_lse={return_lse!r} is not supported on gfx942 (its MHA kernel "
                                   "writes no LSE); LSE exists on gfx950")
        if softmax_scale is not None and softmax_scale != 1.0 / math.sqrt(128.0):
            raise ArchFeatureError(f"forward: softmax_scale is fixed at 1/sqrt(128) on gfx942; got {softmax_scale!r}")
        if (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() == 4 and k.dim() == 4
                and layout in ("bhsd", "bshd")):
            hd = 2 if layout == "bshd" else 1
            if q.shape[hd] != k.shape[hd] and k.shape[hd] >= 1 and q.shape[hd] % k.shape[hd] == 0:
                raise ArchFeatureError(f"forward: GQA/MQA ({q.shape[hd]} q heads over {k.shape[hd]} k heads) is not "
                                       "supported on gfx942; it exists on gfx950")
        return _gfx942.forward(q, k, v, out=out, round_mode="rtna" if round_mode is None else round_mode,
                               layout=layout)
    return _gfx950.forward(q, k, v, out=out, round_mode="rtne" if round_mode is None else round_mode, layout=layout,
                           causal=causal, softmax_scale=softmax_scale, return_lse=return_lse, softcap=softcap,
                           window_size=window_size, sinks=sinks, k_descale=k_descale, v_descale=v_descale)


def forward_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                   cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, *,
                   softmax_scale: float | None = None, causal: bool = False, return_lse: bool = False,
                   out: torch.Tensor | None = None, round_mode: str = "rtne",
                   host_cu_seqlens_q: torch.Tensor | None = None, host_cu_seqlens_k: torch.Tensor | None = None,
                   softcap: float | None = 0.0, window_size: tuple[int, int] = (-1, -1),
                   sinks: torch.Tensor | None = None, k_descale: torch.Tensor | None = None,
                   v_descale: torch.Tensor | None = None):
    """Packed variable-length attention (THD), flash_attn_varlen_func argument order; gfx950 only.
    See moonmath_attention_gfx950.forward_varlen and docs/ops/forward_varlen.md."""
    _gfx950_only("forward_varlen", "varlen batching")
    return _gfx950.forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  softmax_scale=softmax_scale, causal=causal, return_lse=return_lse, out=out,
                                  round_mode=round_mode, host_cu_seqlens_q=host_cu_seqlens_q,
                                  host_cu_seqlens_k=host_cu_seqlens_k, softcap=softcap, window_size=window_size,
                                  sinks=sinks, k_descale=k_descale, v_descale=v_descale)


def forward_paged(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cu_seqlens_q: torch.Tensor,
                  seqlens_k: torch.Tensor, *, kv_indptr: torch.Tensor | None = None,
                  kv_page_indices: torch.Tensor | None = None, block_table: torch.Tensor | None = None,
                  causal: bool = False, softmax_scale: float | None = None, return_lse: bool = False,
                  out: torch.Tensor | None = None, round_mode: str = "rtne", softcap: float | None = 0.0,
                  window_size: tuple[int, int] = (-1, -1), sinks: torch.Tensor | None = None,
                  k_descale: torch.Tensor | None = None, v_descale: torch.Tensor | None = None):
    """Attention against paged K/V (page lists or vLLM block tables); gfx950 only.
    See moonmath_attention_gfx950.forward_paged and docs/ops/forward_paged.md."""
    _gfx950_only("forward_paged", "paged K/V")
    return _gfx950.forward_paged(q, k_cache, v_cache, cu_seqlens_q, seqlens_k, kv_indptr=kv_indptr,
                                 kv_page_indices=kv_page_indices, block_table=block_table, causal=causal,
                                 softmax_scale=softmax_scale, return_lse=return_lse, out=out, round_mode=round_mode,
                                 softcap=softcap, window_size=window_size, sinks=sinks, k_descale=k_descale,
                                 v_descale=v_descale)


class VarlenPlan(_gfx950.VarlenPlan):
    """forward_varlen split into plan() (once per forward pass) and run(q, k, v) (per layer); gfx950 only."""

    def __init__(self) -> None:
        _gfx950_only("VarlenPlan", "varlen batching")
        super().__init__()


__all__ = [
    "ATTENTION_ARCHS", "ArchFeatureError", "EPI_NONE", "EPI_SILU", "EPI_SITU", "VarlenPlan", "forward", "forward_paged",
    "forward_varlen", "mla_dcp_lse_merge_ranks", "mla_decode_a16w8", "moe_align_block_size", "mxfp4_moe_down",
    "mxfp4_moe_down_block_m", "mxfp4_moe_down_n_steps", "mxfp4_moe_down_nt", "mxfp4_moe_down_plan",
    "mxfp4_moe_gateup", "mxfp4_moe_gateup_block_m", "mxfp4_moe_gateup_supports_k", "repack_mxfp4",
    "repack_mxfp4_scales", "unrepack_mxfp4", "unrepack_mxfp4_scales",
]
