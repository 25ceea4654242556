"""bf16 MHA forward for gfx942 (MI300X): head dim 64, 96 or 128, BHSD or BSHD, RTNA / RTNE / RTZ output rounding,
optional soft-cap, attention sinks, causal mask, sliding window and fp8 (e4m3fnuz) K/V with descales."""
from __future__ import annotations

import torch

from moonmath_common import checks, get_backend

from . import kernel, reference

LAYOUTS = ("bhsd", "bshd")
ROUND_MODES = ("rtna", "rtne", "rtz")
HEAD_DIMS = kernel.HEAD_DIMS           # 64, 96, 128
FP8_HEAD_DIMS = kernel.FP8_HEAD_DIMS   # 64, 128
FP8_KV = torch.float8_e4m3fnuz   # fp8 K/V on gfx942: e4m3fnuz, the arch's native fp8
OP = "moonmath_mha_gfx942.forward"


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, out: torch.Tensor | None = None,
            round_mode: str = "rtna", layout: str = "bhsd", softcap: float | None = 0.0,
            sinks: torch.Tensor | None = None, causal: bool = False,
            window_size: tuple[int, int] = (-1, -1), k_descale: torch.Tensor | None = None,
            v_descale: torch.Tensor | None = None) -> torch.Tensor:
    """Attention forward ``softmax(q k^T / sqrt(D)) v`` with bf16 output, on gfx942 (MI300X).

    Args:
        q: bf16, contiguous, ``[B, H, Sq, D]`` (layout "bhsd", the default) or ``[B, Sq, H, D]`` ("bshd"); head dim
            D = 64, 96 or 128.
        k: bf16, contiguous, same layout, ``Skv`` rows; batch, heads and head dim equal q's (no GQA). Or fp8
            (``torch.float8_e4m3fnuz``, with v; head dims 64 and 128): K = k_descale * k.
        v: bf16 (or fp8 e4m3fnuz with k), contiguous, exactly k's shape; V = v_descale * v.
        out: optional bf16 contiguous tensor of q's shape, filled in place and returned.
        round_mode: rounding of the bf16 probabilities (kernels) and output: "rtna" (default), "rtne" or
            "rtz". NaN is written as the canonical 0x7FFF for RTNE/RTNA (and by the reference backend in
            every mode); the gfx942 kernel's RTZ truncates NaN like AITER's RTZ kernel.
        layout: "bhsd" or "bshd"; inputs are read in that layout, the output has it too.
        softcap: Gemma-2 logit soft-cap: the scaled score s becomes ``softcap * tanh(s / softcap)`` before the
            softmax; None or 0 = off, else a finite positive cap.
        sinks: gpt-oss attention sinks, fp32 ``[H]`` natural-log logits on q's device: head h's sink joins each
            row's softmax denominator as a logit with no value, ``o = sum_j e^(s_j) v_j / (e^(sink_h) + sum_j
            e^(s_j))``. None = off.
        causal: bool; bottom-right aligned mask (row i sees keys j <= i + Skv - Sq), i.e. window right = 0.
        window_size: flash-attn's sliding window (left, right) of ints >= -1, -1 = unbounded: row i sees keys
            d - left <= j <= d + right, d = i + Skv - Sq (end-aligned, as on gfx950). A row seeing no key gives 0.
            Each 256-row item runs only the 64-key blocks of its rows' windows (work proportional to the window).
        k_descale: fp8 k/v only: fp32 descale of k, per tensor (one element) or per head ``[H]``, finite and > 0
            (None = 1), on q's device. The kernels widen fp8 K/V exactly to bf16 and fold the descale into the
            logit factor: S = (q . k8) * (scale * k_descale) (docs/numerics.md).
        v_descale: fp8 k/v only: fp32 descale of v, as k_descale: O = v_descale * (P V8) / sum P.

    Sq >= 1 and Skv >= 1 independently (cross-attention). No GQA, no varlen, no LSE; softmax scale fixed at
    1/sqrt(D). softcap / sinks / causal / a window / fp8 k/v run the feature kernels ``mha_fwd_feat_<m>`` (the
    default kernels carry none of them). On emu/hip the gfx942 kernels run (docs/kernels/mha_gfx942.md),
    with the tail KV-split when the planner's cost model says it pays (``MOONMATH_NO_TAIL=1``: never).

    Returns:
        The output, bf16, q's shape and layout (``out`` when given).

    Raises:
        TypeError: q, k, v, out, sinks or a descale not a tensor or of the wrong dtype (v's must be k's);
            softcap not a number; causal not a bool; a window_size entry not an int.
        ValueError: rank other than 4, head dim other than 64, 96 or 128 (fp8 k/v: 64 or 128), k's batch / heads /
            head dim unlike q's, v's shape unlike k's, an empty sequence, batch or heads, non-contiguous tensors,
            out's shape or device, layout, round_mode, softcap negative or not finite, sinks' shape, window_size
            not a pair or an entry < -1, a descale's shape, device or value, a descale with bf16 k/v, tensors on
            different devices; each message names the argument.
        NoKernelError: the backend has no gfx942 kernel (a build without gfx942 code objects).
    """
    checks.tensor("q", q, dtype=torch.bfloat16, ndim=4)
    checks.tensor("k", k, dtype=(torch.bfloat16, FP8_KV), ndim=4)
    checks.tensor("v", v, dtype=k.dtype, ndim=4)
    checks.choice("layout", layout, LAYOUTS)
    checks.choice("round_mode", round_mode, ROUND_MODES)
    checks.boolean("causal", causal)
    if out is not None and not isinstance(out, torch.Tensor):   # before anything reads its attributes
        raise TypeError(f"out must be a torch.Tensor or None; got {type(out).__name__}")
    dev = checks.same_device(q=q, k=k, v=v, out=out)
    sdim = 1 if layout == "bshd" else 2
    hdim = 3 - sdim
    names = "[B, Sq, H, D]" if layout == "bshd" else "[B, H, Sq, D]"
    if q.shape[3] not in HEAD_DIMS:
        raise ValueError(f"q head dim (q.shape[3] of {names}) must be one of {HEAD_DIMS} on gfx942; got {q.shape[3]}")
    if k.shape[0] != q.shape[0] or k.shape[hdim] != q.shape[hdim] or k.shape[3] != q.shape[3]:
        raise ValueError(f"k must have q's batch, heads and head dim (gfx942 has no GQA/MQA: heads must be "
                         f"equal) in layout {layout} {names}; got q {list(q.shape)}, k {list(k.shape)}")
    if v.shape != k.shape:
        raise ValueError(f"v must have k's shape {list(k.shape)}; got {list(v.shape)}")
    if q.shape[sdim] < 1:
        raise ValueError(f"q sequence length (dim {sdim} for layout {layout}) must be >= 1; got {q.shape[sdim]}")
    if k.shape[sdim] < 1:
        raise ValueError(f"k/v sequence length (dim {sdim} for layout {layout}) must be >= 1; got {k.shape[sdim]}")
    if q.shape[0] < 1 or q.shape[hdim] < 1:
        raise ValueError(f"q batch and heads must be >= 1; got shape {list(q.shape)}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        checks.tensor(name, t, contiguous=True)
    cap = checks.softcap(softcap)
    sk = checks.sinks(sinks, q.shape[hdim], dev)
    wl, wr = checks.window(window_size, causal)
    if k.dtype == FP8_KV and q.shape[3] not in FP8_HEAD_DIMS:
        raise ValueError(f"fp8 k/v are supported for head dims {FP8_HEAD_DIMS} on gfx942; got q.shape[3] {q.shape[3]}")
    kd, vd = checks.kv_descales(k, k_descale, v_descale, q.shape[hdim], dev, FP8_KV)
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    else:
        checks.tensor("out", out, dtype=torch.bfloat16, shape=list(q.shape), contiguous=True, device=dev)
    _forward_op(q, k, v, out, layout, round_mode, cap, sk, kd, vd, wl, wr)
    return out


@torch.library.custom_op("moonmath::mha_gfx942_forward", mutates_args=("out",))
def _forward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layout: str,
                round_mode: str, softcap: float = 0.0, sinks: torch.Tensor | None = None,
                k_descale: torch.Tensor | None = None, v_descale: torch.Tensor | None = None, window_left: int = -1,
                window_right: int = -1) -> None:
    window = (window_left, window_right)
    if get_backend() == "reference":
        out.copy_(reference.forward(q, k, v, layout, round_mode, softcap, sinks, k_descale, v_descale, window))
    else:
        _run_kernel(q, k, v, out, layout, round_mode, softcap, sinks, k_descale, v_descale, window)


@_forward_op.register_fake
def _(q, k, v, out, layout, round_mode, softcap=0.0, sinks=None, k_descale=None, v_descale=None, window_left=-1,
      window_right=-1) -> None:
    return None


def _run_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layout: str,
                round_mode: str, softcap: float = 0.0, sinks: torch.Tensor | None = None,
                k_descale: torch.Tensor | None = None, v_descale: torch.Tensor | None = None,
                window: tuple[int, int] = (-1, -1)) -> None:
    """The hip/emu path: the gfx942 kernels (kernel.py) write `out`. On hip, CPU tensors go to the GPU and
    the result comes back (the seed's behaviour)."""
    if get_backend() == "hip" and q.device.type == "cpu":
        dev = torch.device("cuda", torch.cuda.current_device())
        gout = torch.empty(out.shape, dtype=out.dtype, device=dev)
        def on(t):
            return None if t is None else t.to(dev)

        kernel.run(q.to(dev), k.to(dev), v.to(dev), gout, layout, round_mode, softcap=softcap, sinks=on(sinks),
                   k_descale=on(k_descale), v_descale=on(v_descale), window=window)
        out.copy_(gout.cpu())
        return
    kernel.run(q, k, v, out, layout, round_mode, softcap=softcap, sinks=sinks, k_descale=k_descale,
               v_descale=v_descale, window=window)
