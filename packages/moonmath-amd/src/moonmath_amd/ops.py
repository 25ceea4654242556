"""The public op surface of moonmath_amd: re-exports of every op package, and the arch dispatch of the
attention forward (gfx942 -> moonmath_mha_gfx942, gfx950 -> moonmath_attention_gfx950) by
``moonmath_common.target_arch()`` (the live GPU under hip, MOONMATH_EMU_ARCH under emu/reference)."""
from __future__ import annotations

import inspect
import math

import torch

import moonmath_attention_gfx950 as _gfx950
import moonmath_mha_gfx942 as _gfx942
from moonmath_common import MoonmathError, NoKernelError, target_arch
from moonmath_mla_decode import (
    mla_dcp_lse_merge_ranks,
    mla_decode_a8w8,
    mla_decode_a16w8,
    mla_decode_a16w16,
    mla_decode_mxfp4,
)
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
    """bf16 attention forward ``softmax(scale q k^T [+ mask]) v``, dispatched by arch (target_arch()) to
    moonmath_mha_gfx942.forward (gfx942) or moonmath_attention_gfx950.forward (gfx950).

    Args:
        q: bf16 ``[B, Hq, Sq, Dqk]`` (layout "bhsd", default) or ``[B, Sq, Hq, Dqk]`` ("bshd"). gfx942: Dqk 64, 96
            or 128, contiguous, Sq >= 1. gfx950: Dqk 64, 80, 96, 128 or 192, any strides with a contiguous head dim,
            Sq >= 0.
        k: bf16 ``[B, Hkv, Skv, Dqk]`` / ``[B, Skv, Hkv, Dqk]``. gfx942: Hkv = Hq, contiguous, Skv >= 1. gfx950: Hq a
            multiple of Hkv (MHA, GQA, MQA), Skv >= 0.
        v: bf16 ``[B, Hkv, Skv, Dv]`` / ``[B, Skv, Hkv, Dv]``: Dv = Dqk, or 128 with Dqk 192 (MLA prefill). k and v
            may both be fp8 with k_descale / v_descale: gfx950 float8_e4m3fn (OCP; head dims 64, 128 and 256),
            gfx942 float8_e4m3fnuz (the arch's native fp8; head dims 64 and 128).
        out: optional bf16 tensor of the output's shape (q's with Dv) on q's device, filled in place and returned
            (gfx942: contiguous).
        round_mode: None for the arch's default; gfx942 "rtna" (default), "rtne" or "rtz"; gfx950 "rtne" only.
        layout: "bhsd" or "bshd" on both archs: which of dims 1 and 2 is the sequence.
        causal: bool; bottom-right aligned mask (row i sees keys j <= i + Skv - Sq). Both archs.
        softmax_scale: None for 1/sqrt(Dqk); gfx950 any finite real, gfx942 only 1/sqrt(Dqk).
        return_lse: bool; also return fp32 LSE ``[B, Hq, Sq]`` (natural log). gfx950 only.
        softcap: Gemma-2 logit soft-cap (None or 0: off), as moonmath_attention_gfx950.forward (both archs).
        window_size: sliding window (left, right), -1 = unbounded, as moonmath_attention_gfx950.forward (both
            archs).
        sinks: fp32 ``[Hq]`` attention sinks, as moonmath_attention_gfx950.forward (both archs).
        k_descale: fp8 K/V only: fp32 descale of k (per tensor or per kv head), as moonmath_attention_gfx950.forward
            (both archs).
        v_descale: fp8 K/V only: fp32 descale of v, as k_descale (both archs).

    Returns:
        out, or (out, lse) when return_lse.

    Raises:
        ArchFeatureError: a feature the arch lacks (a ValueError): on gfx942 return_lse, a scale other than
            1/sqrt(Dqk), GQA/MQA, head dims other than 64, 96 and 128.
        TypeError: a tensor argument not a tensor or of the wrong dtype; a flag not a bool.
        ValueError: shapes, heads, head dims, strides, layout, round_mode, softmax_scale, out, devices, as the
            arch's package checks them; each message names the argument.
        NoKernelError: no attention kernel for the arch (gfx942 and gfx950 only), or none built for it.
    """
    arch = _attention_arch("forward")
    if arch == "gfx942":
        if (isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape[3] not in _gfx942.HEAD_DIMS
                and q.shape[3] in _GFX950_HEAD_DIMS):
            raise ArchFeatureError(f"forward: head dim {q.shape[3]} (q.shape[3]) is not supported on gfx942 (its MHA "
                                   f"kernels are built for head dims {_gfx942.HEAD_DIMS}); head dims "
                                   f"{', '.join(map(str, sorted(_GFX950_HEAD_DIMS)))} exist on gfx950")
        if return_lse is not False:
            raise ArchFeatureError(f"forward: return_lse={return_lse!r} is not supported on gfx942 (its MHA kernel "
                                   "writes no LSE); LSE exists on gfx950")
        d = q.shape[3] if isinstance(q, torch.Tensor) and q.dim() == 4 else 128
        if softmax_scale is not None and softmax_scale != 1.0 / math.sqrt(d):
            raise ArchFeatureError(f"forward: softmax_scale is fixed at 1/sqrt(head dim) = 1/sqrt({d}) on gfx942; got "
                                   f"{softmax_scale!r}")
        if (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() == 4 and k.dim() == 4
                and layout in ("bhsd", "bshd")):
            hd = 2 if layout == "bshd" else 1
            if q.shape[hd] != k.shape[hd] and k.shape[hd] >= 1 and q.shape[hd] % k.shape[hd] == 0:
                raise ArchFeatureError(f"forward: GQA/MQA ({q.shape[hd]} q heads over {k.shape[hd]} k heads) is not "
                                       "supported on gfx942; it exists on gfx950")
        return _gfx942.forward(q, k, v, out=out, round_mode="rtna" if round_mode is None else round_mode,
                               layout=layout, softcap=softcap, sinks=sinks, causal=causal, window_size=window_size,
                               k_descale=k_descale, v_descale=v_descale)
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
    """Set from moonmath_attention_gfx950.forward_varlen's docstring below (one source)."""
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
    """Set from moonmath_attention_gfx950.forward_paged's docstring below (one source)."""
    _gfx950_only("forward_paged", "paged K/V")
    return _gfx950.forward_paged(q, k_cache, v_cache, cu_seqlens_q, seqlens_k, kv_indptr=kv_indptr,
                                 kv_page_indices=kv_page_indices, block_table=block_table, causal=causal,
                                 softmax_scale=softmax_scale, return_lse=return_lse, out=out, round_mode=round_mode,
                                 softcap=softcap, window_size=window_size, sinks=sinks, k_descale=k_descale,
                                 v_descale=v_descale)


def _gfx950_doc(fn, pkg_fn, what: str) -> None:
    """fn's docstring: the package op's, with the arch rule in its first paragraph and its Raises section."""
    doc = inspect.cleandoc(pkg_fn.__doc__)
    head, _, rest = doc.partition("\n")
    arch_rule = f"    ArchFeatureError: the arch is not gfx950 ({what} exists on gfx950 only).\n"
    rest = rest.replace("\nRaises:\n", "\nRaises:\n" + arch_rule)
    fn.__doc__ = f"{head} gfx950 only; moonmath_attention_gfx950.{pkg_fn.__name__} is the same op.\n{rest}"


_gfx950_doc(forward_varlen, _gfx950.forward_varlen, "varlen batching")
_gfx950_doc(forward_paged, _gfx950.forward_paged, "paged K/V")


class VarlenPlan(_gfx950.VarlenPlan):
    """forward_varlen split into plan() (once per forward pass) and run(q, k, v) (per layer); gfx950 only."""

    def __init__(self) -> None:
        _gfx950_only("VarlenPlan", "varlen batching")
        super().__init__()


__all__ = [
    "ATTENTION_ARCHS", "ArchFeatureError", "EPI_NONE", "EPI_SILU", "EPI_SITU", "VarlenPlan", "forward", "forward_paged",
    "forward_varlen", "mla_dcp_lse_merge_ranks", "mla_decode_a8w8", "mla_decode_a16w16", "mla_decode_a16w8",
    "mla_decode_mxfp4",
    "moe_align_block_size", "mxfp4_moe_down",
    "mxfp4_moe_down_block_m", "mxfp4_moe_down_n_steps", "mxfp4_moe_down_nt", "mxfp4_moe_down_plan",
    "mxfp4_moe_gateup", "mxfp4_moe_gateup_block_m", "mxfp4_moe_gateup_supports_k", "repack_mxfp4",
    "repack_mxfp4_scales", "unrepack_mxfp4", "unrepack_mxfp4_scales",
]
