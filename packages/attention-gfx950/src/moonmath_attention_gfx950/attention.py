"""bf16 attention forward for gfx950 (MI355X): dense/causal, GQA/MQA, head dims 64, 80, 96, 128, 256 and (192,128),
batch (BHSD/BSHD), varlen (THD) and paged K/V, logit soft-cap, sliding window, optional natural-log LSE, RTNE output."""
from __future__ import annotations

import math

import torch

from moonmath_common import checks, get_backend
from moonmath_common.emu_device import device_resident

from . import reference

LAYOUTS = ("bhsd", "bshd")
ROUND_MODES = ("rtne",)
# (Dqk, Dv). 256 runs as two column passes of (256, 128) kernels (kernel.COLUMN_PASSES).
HEAD_DIMS = ((64, 64), (80, 80), (96, 96), (128, 128), (192, 128), (256, 256))
MAX_TOKEN_STRIDE = 1 << 22  # elements between consecutive tokens of one tensor


# ---------------------------------------------------------------------------------------------
# shared validation
# ---------------------------------------------------------------------------------------------

FP8_KV = torch.float8_e4m3fn          # fp8 K/V on gfx950: OCP e4m3fn
FP8_HEAD_DIMS = ((64, 64), (128, 128), (256, 256))   # the head dims with fp8 K/V kernels (256: two column passes)


def _qkv_dtypes(q, k, v, kname: str = "k", vname: str = "v") -> None:
    """bf16 q; k and v both bf16 or both fp8 (OCP e4m3fn)."""
    checks.tensor("q", q, dtype=torch.bfloat16)
    checks.tensor(kname, k, dtype=(torch.bfloat16, FP8_KV))
    checks.tensor(vname, v, dtype=k.dtype)


def _descales(k, v, k_descale, v_descale, heads_kv: int, dims: tuple[int, int], dev: torch.device,
              kname: str = "k", vname: str = "v"):
    """fp8 K/V: the fp32 descales of K and V (flash-attn 3's k_descale / v_descale; None = 1), per tensor (one
    element) or per kv head ([Hkv]), returned as [Hkv] tensors on q's device; (None, None) for bf16 K/V (where
    a descale is an error: it would be silently meaningless)."""
    if k.dtype == FP8_KV and dims not in FP8_HEAD_DIMS:
        raise ValueError(f"fp8 {kname}/{vname} are supported for head dims {FP8_HEAD_DIMS}; got {dims}")
    return checks.kv_descales(k, k_descale, v_descale, heads_kv, dev, FP8_KV, kname, vname)


def _dequant(t: torch.Tensor, descale: torch.Tensor | None, head_dim: int) -> torch.Tensor:
    """The reference's exact view of fp8 K/V: fp32 values times the head's descale (head dim `head_dim` of t)."""
    if descale is None:
        return t
    shape = [1] * t.dim()
    shape[head_dim] = -1
    return t.float() * descale.view(shape)


def _head_dims(dqk: int, dqk_k: int, dv: int, kname: str = "k", vname: str = "v") -> None:
    if dqk_k != dqk:
        raise ValueError(f"{kname} head dim must equal q's ({dqk}); got {dqk_k}")
    if (dqk, dv) not in HEAD_DIMS:
        raise ValueError(f"head dims (q/{kname}, {vname}) must be one of {HEAD_DIMS}; got ({dqk}, {dv})")


def _heads(hq: int, hk: int, hv: int, kname: str = "k", vname: str = "v") -> None:
    if hq < 1:
        raise ValueError(f"q must have at least 1 head; got {hq}")
    if hk < 1:
        raise ValueError(f"{kname} must have at least 1 head; got {hk}")
    if hv != hk:
        raise ValueError(f"{vname} must have {kname}'s number of heads ({hk}); got {hv}")
    if hq % hk:
        raise ValueError(f"q heads must be a multiple of {kname} heads (MHA, GQA, MQA); got {hq} q heads and {hk} "
                         f"{kname} heads")


def _strides(name: str, t: torch.Tensor, token_dim: int) -> None:
    checks.tensor(name, t, last_dim_contiguous=True)
    if t.shape[token_dim] > 1 and t.stride(token_dim) > MAX_TOKEN_STRIDE:
        raise ValueError(f"{name} tokens must be at most 2^22 elements apart; got token stride "
                         f"{t.stride(token_dim)} (dim {token_dim})")


def _scale(softmax_scale: object, dqk: int) -> float:
    """The kernels take scale * log2(e) as fp32: a finite scale beyond that range is an error, not a NaN output."""
    if softmax_scale is None:
        return 1.0 / math.sqrt(dqk)
    scale = checks.real("softmax_scale", softmax_scale, fp32=True)
    if abs(scale) > checks.F32_MAX / math.log2(math.e):
        raise ValueError(f"softmax_scale must have |softmax_scale| * log2(e) within fp32's range (|scale| <= "
                         f"{checks.F32_MAX / math.log2(math.e):.5g}; the kernels take it so); got {scale}")
    return scale


_softcap = checks.softcap   # softcap (Gemma 2): None or 0 -> off; else a finite positive cap


def _window(window_size: object, causal: bool) -> tuple[int, int]:
    """flash-attn's window_size=(left, right), -1 = unbounded; causal forces right = 0. Returns (-1, -1) when the
    window bounds nothing beyond causal (the plain kernels), else the (left, right) the window kernels apply."""
    left, right = checks.window(window_size, causal)
    if left < 0 and (right < 0 or causal):
        return (-1, -1)
    return (left, right)


_sinks = checks.sinks       # gpt-oss sinks: None, or fp32 [Hq] per-head logits on q's device


def _round_mode(round_mode: object) -> None:
    if round_mode not in ROUND_MODES:
        raise ValueError(f"round_mode must be 'rtne' on gfx950 (the only mode its attention kernels round "
                         f"with); got {round_mode!r}")


def _cu_seqlens(name: str, cu: torch.Tensor, total: int, total_name: str, max_seqlen: int | None,
                max_name: str | None) -> list[int]:
    """Host values of cu_seqlens: 0 <= cu[0], non-decreasing, cu[-1] <= total, lengths <= max_seqlen."""
    checks.values_in(name, cu[:1], lo=0)
    checks.nondecreasing(name, cu)
    vals = [int(x) for x in cu.tolist()]
    if vals[-1] > total:
        raise ValueError(f"{name}[-1] must be <= {total_name} ({total}); got {vals[-1]}")
    if max_seqlen is not None and len(vals) > 1:
        longest = max(b - a for a, b in zip(vals[:-1], vals[1:]))
        if longest > max_seqlen:
            raise ValueError(f"{max_name} must bound every sequence of {name}; got {max_name} = {max_seqlen} "
                             f"but a sequence of {longest}")
    return vals


def _host_or(dev: torch.device, **tensors: torch.Tensor | None) -> None:
    """Index tensors may live on the host (CPU: planned there, no sync) or on the data's device."""
    for name, t in tensors.items():
        if t is not None and t.device != dev and t.device.type != "cpu":
            raise ValueError(f"{name} must be on the CPU or on {dev} (the device of q); got {t.device}")


def _index_vector(name: str, t: object, numel: int | None = None) -> torch.Tensor:
    checks.tensor(name, t, dtype=torch.int32, ndim=1, contiguous=True)
    if numel is not None and t.numel() != numel:
        raise ValueError(f"{name} must have {numel} elements; got {t.numel()}")
    return t


def _out_type(out: object) -> None:
    """out= is None or a tensor (checked before anything reads its attributes)."""
    if out is not None and not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor or None; got {type(out).__name__}")


def _no_self_overlap(name: str, t: torch.Tensor) -> None:
    """No two elements of t share memory (a stride-0 or interleaved view would be written twice)."""
    dims = sorted((t.stride(d), t.shape[d]) for d in range(t.dim()) if t.shape[d] > 1)
    extent = 1
    for st, n in dims:
        if st < extent:
            raise ValueError(f"{name} must not overlap itself; got strides {t.stride()} for shape {tuple(t.shape)}")
        extent = st * (n - 1) + extent


def _check_out(out: torch.Tensor, oshape: list[int], dev: torch.device, token_dim: int) -> None:
    checks.tensor("out", out, dtype=torch.bfloat16, shape=oshape, device=dev)
    _strides("out", out, token_dim)
    _no_self_overlap("out", out)


# ---------------------------------------------------------------------------------------------
# forward (batch)
# ---------------------------------------------------------------------------------------------

def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, out: torch.Tensor | None = None,
            round_mode: str = "rtne", layout: str = "bhsd", causal: bool = False,
            softmax_scale: float | None = None, return_lse: bool = False, softcap: float | None = 0.0,
            window_size: tuple[int, int] = (-1, -1), sinks: torch.Tensor | None = None,
            k_descale: torch.Tensor | None = None, v_descale: torch.Tensor | None = None):
    """Attention forward on gfx950 (MI355X), bf16 in, bf16 out (RTNE).

    Args:
        q: bf16 ``[B, Hq, Sq, Dqk]`` (layout "bhsd", default) or ``[B, Sq, Hq, Dqk]`` ("bshd"), any Sq >= 0. Any
            strides with a contiguous head dim (stride(-1) == 1), tokens at most 2^22 elements apart; on the
            gfx950 kernels rows on 16 bytes (address and batch/token/head strides multiples of 8 elements);
            k and v likewise.
        k: bf16 ``[B, Hkv, Skv, Dqk]`` / ``[B, Skv, Hkv, Dqk]``, any Skv >= 0; Hq a multiple of Hkv (MHA, GQA,
            MQA).
        v: bf16 ``[B, Hkv, Skv, Dv]`` / ``[B, Skv, Hkv, Dv]``. (Dqk, Dv) is one of HEAD_DIMS: (64, 64), (80, 80),
            (96, 96), (128, 128), (192, 128) (MLA prefill), (256, 256) (two column passes of a (256, 128) kernel on
            gfx950: the QK and softmax computed twice). k and v may instead both be fp8
            (``torch.float8_e4m3fn``, head dims 64, 128 and 256; rows on 16 bytes: strides multiples of 16).
        out: optional bf16 ``[B, Hq, Sq, Dv]`` / ``[B, Sq, Hq, Dv]`` on q's device, strides as q, not overlapping
            itself; filled in place and returned. A new output is contiguous in the call's layout.
        round_mode: "rtne", the only mode on gfx950.
        layout: "bhsd" or "bshd": which of dims 1 and 2 is the sequence.
        causal: bool; bottom-right aligned mask (row i sees keys j <= i + Skv - Sq); a row seeing no key is 0.
        softmax_scale: a real with |softmax_scale| * log2(e) within fp32 (the kernels' constant), default
            1/sqrt(Dqk); negative and 0 allowed.
        return_lse: bool; also return the natural-log LSE, fp32 ``[B, Hq, Sq]`` (-inf for a row with no key).
        softcap: Gemma-2 logit soft-cap: the scaled score s becomes ``softcap * tanh(s / softcap)`` before the
            mask and softmax (the LSE is over the capped scores). None or 0: off; otherwise finite and > 0.
        window_size: flash-attn's sliding window (left, right) of ints >= -1, -1 = unbounded: row i sees keys
            d - left <= j <= d + right, d = i + Skv - Sq (with causal, right = 0). Key blocks wholly outside
            every row's window of a 256-row tile are skipped (work proportional to the window).
        sinks: gpt-oss attention sinks, fp32 ``[Hq]`` natural-log logits on q's device: head h's sink joins each
            row's softmax denominator (no value); the LSE includes it; a row with no key gives 0, lse = sink.
        k_descale: fp8 K/V only: fp32 descale of k, per tensor (one element) or per kv head ``[Hkv]``, finite and
            > 0; K = k_descale * k (None = 1).
        v_descale: fp8 K/V only: fp32 descale of v, as k_descale; V = v_descale * v (None = 1).

    Returns:
        out (bf16, q's layout with Dv), or (out, lse) when return_lse.

    Raises:
        TypeError: q, k, v, out or sinks not a tensor or of the wrong dtype; a flag not a bool; softmax_scale,
            softcap or a window entry not a number.
        ValueError: rank, batch, heads, head dims, sequence lengths of k and v, strides, alignment (gfx950
            kernels), layout, round_mode, a non-finite softmax_scale, softcap or window_size out of range,
            out's shape / device / self-overlap, sinks' shape, tensors on different devices; each message
            names the argument.
        NoKernelError: the backend has no gfx950 kernel (a build without gfx950 code objects).
    """
    _qkv_dtypes(q, k, v)
    for name, t in (("q", q), ("k", k), ("v", v)):
        checks.tensor(name, t, ndim=4)
    checks.choice("layout", layout, LAYOUTS)
    _round_mode(round_mode)
    checks.boolean("causal", causal)
    checks.boolean("return_lse", return_lse)
    _out_type(out)
    dev = checks.same_device(q=q, k=k, v=v, out=out)
    sd, hd = (1, 2) if layout == "bshd" else (2, 1)
    if k.shape[0] != q.shape[0] or v.shape[0] != q.shape[0]:
        raise ValueError(f"k and v must have q's batch size {q.shape[0]}; got {k.shape[0]} and {v.shape[0]}")
    if v.shape[sd] != k.shape[sd]:
        raise ValueError(f"v must have k's sequence length {k.shape[sd]} (dim {sd} for layout {layout}); "
                         f"got {v.shape[sd]}")
    _heads(q.shape[hd], k.shape[hd], v.shape[hd])
    _head_dims(q.shape[3], k.shape[3], v.shape[3])
    for name, t in (("q", q), ("k", k), ("v", v)):
        _strides(name, t, sd)
    scale = _scale(softmax_scale, q.shape[3])
    cap = _softcap(softcap)
    wl, wr = _window(window_size, causal)
    sk = _sinks(sinks, q.shape[hd], dev)
    kd, vd = _descales(k, v, k_descale, v_descale, k.shape[hd], (q.shape[3], v.shape[3]), dev)
    oshape = list(q.shape[:3]) + [v.shape[3]]
    if out is None:
        out = torch.empty(oshape, dtype=torch.bfloat16, device=q.device)
    else:
        _check_out(out, oshape, dev, sd)
    B, Hq, Sq = q.shape[0], q.shape[hd], q.shape[sd]
    lse = torch.empty(B, Hq, Sq, dtype=torch.float32, device=q.device) if return_lse else None
    _forward_op(q, k, v, out, lse, layout, causal, scale, cap, wl, wr, sk, kd, vd)
    return (out, lse) if return_lse else out


@torch.library.custom_op("moonmath::attention_gfx950_forward", mutates_args=("out", "lse"))
def _forward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor | None,
                layout: str, causal: bool, scale: float, softcap: float = 0.0, window_left: int = -1,
                window_right: int = -1, sinks: torch.Tensor | None = None, k_descale: torch.Tensor | None = None,
                v_descale: torch.Tensor | None = None) -> None:
    if get_backend() == "reference":
        hd = 2 if layout == "bshd" else 1
        k, v = _dequant(k, k_descale, hd), _dequant(v, v_descale, hd)
        o, l = reference.forward(q, k, v, layout, causal, scale, softcap, (window_left, window_right), sinks)
        out.copy_(o)
        if lse is not None:
            lse.copy_(l)
    else:
        _run_kernel(q, k, v, out, lse, layout, causal, scale, softcap, (window_left, window_right), sinks,
                    _pair(k_descale, v_descale))


@_forward_op.register_fake
def _(q, k, v, out, lse, layout, causal, scale, softcap=0.0, window_left=-1, window_right=-1, sinks=None,
      k_descale=None, v_descale=None) -> None:
    return None


def _pair(k_descale, v_descale):
    return None if k_descale is None else (k_descale, v_descale)


def _run_kernel(q, k, v, out, lse, layout, causal, scale, softcap, window, sinks, descales=None) -> None:
    """The hip/emu path of forward: the gfx950 kernels (kernel.py), planned on the host."""
    from . import kernel

    kernel.run_forward(q, k, v, out, lse, layout, causal, scale, softcap, window, sinks, descales)


# ---------------------------------------------------------------------------------------------
# forward_varlen (THD)
# ---------------------------------------------------------------------------------------------

def _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                  return_lse, out, round_mode, host_cu_seqlens_q, host_cu_seqlens_k, softcap=0.0,
                  window_size=(-1, -1), sinks=None, k_descale=None, v_descale=None):
    _qkv_dtypes(q, k, v)
    for name, t in (("q", q), ("k", k), ("v", v)):
        checks.tensor(name, t, ndim=3)
    _round_mode(round_mode)
    checks.boolean("causal", causal)
    checks.boolean("return_lse", return_lse)
    checks.integer("max_seqlen_q", max_seqlen_q, lo=0, hi=2**31 - 1)   # 32-bit in the device planner
    checks.integer("max_seqlen_k", max_seqlen_k, lo=0, hi=2**31 - 1)
    _index_vector("cu_seqlens_q", cu_seqlens_q)
    _index_vector("cu_seqlens_k", cu_seqlens_k, cu_seqlens_q.numel())
    if cu_seqlens_q.numel() < 1:
        raise ValueError("cu_seqlens_q must have B + 1 >= 1 elements; got 0")
    _out_type(out)
    dev = checks.same_device(q=q, k=k, v=v, out=out)
    _host_or(dev, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    if v.shape[0] != k.shape[0]:
        raise ValueError(f"v must have k's total tokens {k.shape[0]} (dim 0 of [total_k, Hkv, D]); got {v.shape[0]}")
    _heads(q.shape[1], k.shape[1], v.shape[1])
    _head_dims(q.shape[2], k.shape[2], v.shape[2])
    for name, t in (("q", q), ("k", k), ("v", v)):
        _strides(name, t, 0)
    scale = _scale(softmax_scale, q.shape[2])
    cap = _softcap(softcap)
    window = _window(window_size, causal)
    sk = _sinks(sinks, q.shape[1], dev)
    kd, vd = _descales(k, v, k_descale, v_descale, k.shape[1], (q.shape[2], v.shape[2]), dev)
    oshape = [q.shape[0], q.shape[1], v.shape[2]]
    if out is not None:
        _check_out(out, oshape, dev, 0)
    hosts = {}
    for name, cu, host, total, tname, mx in (
            ("cu_seqlens_q", cu_seqlens_q, host_cu_seqlens_q, q.shape[0], "q.shape[0]", max_seqlen_q),
            ("cu_seqlens_k", cu_seqlens_k, host_cu_seqlens_k, k.shape[0], "k.shape[0]", max_seqlen_k)):
        hname = "host_" + name
        if host is not None:
            _index_vector(hname, host, cu.numel())
            if host.device.type != "cpu":
                raise ValueError(f"{hname} must be a CPU tensor (the host copy of {name}); got {host.device}")
        src, sname = (host, hname) if host is not None else (cu, name)
        if checks.on_host(src) and not device_resident(src):
            hosts[name] = _cu_seqlens(sname, src, total, tname, mx, "max_seqlen_" + name[-1])
        if host is not None and checks.on_host(cu) and not device_resident(cu):   # checked too, not trusted to match
            _cu_seqlens(name, cu, total, tname, mx, "max_seqlen_" + name[-1])
    return scale, cap, window, sk, oshape, hosts, (kd, vd)


def forward_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                   cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, *,
                   softmax_scale: float | None = None, causal: bool = False, return_lse: bool = False,
                   out: torch.Tensor | None = None, round_mode: str = "rtne",
                   host_cu_seqlens_q: torch.Tensor | None = None, host_cu_seqlens_k: torch.Tensor | None = None,
                   softcap: float | None = 0.0, window_size: tuple[int, int] = (-1, -1),
                   sinks: torch.Tensor | None = None, k_descale: torch.Tensor | None = None,
                   v_descale: torch.Tensor | None = None):
    """Attention over packed variable-length sequences (THD), ``flash_attn_varlen_func`` argument order.

    Args:
        q: bf16 ``[total_q, Hq, Dqk]``, any strides with a contiguous head dim (as forward's, per token).
        k: bf16 ``[total_k, Hkv, Dqk]`` (or fp8 float8_e4m3fn with v, as forward); Hq a multiple of Hkv.
        v: bf16 ``[total_k, Hkv, Dv]`` (or fp8 with k); (Dqk, Dv) one of HEAD_DIMS.
        cu_seqlens_q, cu_seqlens_k: int32 ``[B + 1]`` contiguous, on the CPU or q's device: sequence b is q rows
            [cu_q[b], cu_q[b+1]) and k/v rows [cu_k[b], cu_k[b+1]). Non-decreasing, cu[0] >= 0, cu[-1] <= total
            (checked when the values are on the host). Device cu_seqlens without host copies are planned on
            the device (no host read, no sync), each sequence clamped into [0, total] and to max_seqlen.
        max_seqlen_q, max_seqlen_k: ints >= 0 that bound every sequence length (checked when the lengths are
            on the host).
        softmax_scale: as forward (|softmax_scale| * log2(e) within fp32), default 1/sqrt(Dqk).
        causal: bool; bottom-right aligned per sequence.
        return_lse: bool; also return fp32 LSE ``[Hq, total_q]`` (natural log; -inf for rows that see no key).
        out: optional bf16 ``[total_q, Hq, Dv]`` on q's device. Rows outside every sequence are not written (of
            out and of lse; a new out/lse holds unspecified values there).
        round_mode: "rtne" only.
        host_cu_seqlens_q/_k: optional CPU int32 ``[B + 1]`` copies of the cu_seqlens, both or neither: checked
            and used for host planning (no sync); a CPU cu_seqlens is checked too.
        softcap: logit soft-cap as forward (None or 0: off).
        window_size: sliding window (left, right) as forward, per sequence (bottom-right aligned).
        sinks: fp32 ``[Hq]`` attention sinks as forward.
        k_descale: fp8 K/V only: the descale of k, as forward.
        v_descale: fp8 K/V only: the descale of v, as forward.

    Returns:
        out, or (out, lse).

    Raises:
        TypeError: a tensor argument not a tensor or of the wrong dtype; a flag not a bool; a scalar not a number.
        ValueError: shapes, heads, head dims, strides, alignment, cu_seqlens shape / device / values (host-visible),
            lengths beyond max_seqlen (host-visible), host copies not on the CPU or given alone, round_mode,
            softmax_scale, softcap, window_size, sinks, out; each message names the argument.
        NoKernelError: the backend has no gfx950 kernel.
    """
    scale, cap, window, sk, oshape, hosts, (kd, vd) = _check_varlen(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, return_lse, out,
        round_mode, host_cu_seqlens_q, host_cu_seqlens_k, softcap, window_size, sinks, k_descale, v_descale)
    if out is None:
        out = torch.empty(oshape, dtype=torch.bfloat16, device=q.device)
    lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device) if return_lse else None
    _varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, out, lse, causal, scale,
               host_cu_seqlens_q, host_cu_seqlens_k, cap, window[0], window[1], sk, kd, vd)
    return (out, lse) if return_lse else out


@torch.library.custom_op("moonmath::attention_gfx950_forward_varlen", mutates_args=("out", "lse"))
def _varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
               cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, out: torch.Tensor,
               lse: torch.Tensor | None, causal: bool, scale: float, host_cu_seqlens_q: torch.Tensor | None,
               host_cu_seqlens_k: torch.Tensor | None, softcap: float = 0.0, window_left: int = -1,
               window_right: int = -1, sinks: torch.Tensor | None = None, k_descale: torch.Tensor | None = None,
               v_descale: torch.Tensor | None = None) -> None:
    if get_backend() == "reference":
        k, v = _dequant(k, k_descale, 1), _dequant(v, v_descale, 1)
        reference.forward_varlen(q, k, v, cu_seqlens_q.tolist(), cu_seqlens_k.tolist(), causal, scale, out, lse,
                                 softcap, (window_left, window_right), sinks)
    else:
        _run_kernel_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, out, lse, causal, scale,
                           host_cu_seqlens_q, host_cu_seqlens_k, softcap, (window_left, window_right), sinks,
                           _pair(k_descale, v_descale))


@_varlen_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, out, lse, causal, scale, host_cu_seqlens_q,
      host_cu_seqlens_k, softcap=0.0, window_left=-1, window_right=-1, sinks=None, k_descale=None,
      v_descale=None) -> None:
    return None


def _run_kernel_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, out, lse, causal, scale,
                       host_cu_seqlens_q, host_cu_seqlens_k, softcap, window, sinks, descales=None) -> None:
    """The hip/emu path of forward_varlen. host_cu_seqlens_* are CPU copies of the cu_seqlens when the caller has
    them (or None): plan exactly on the host from them. Device cu_seqlens without host copies are planned on the
    device (serving.py: the planning kernel writes the work list; no host read)."""
    from . import kernel

    if host_cu_seqlens_q is None and host_cu_seqlens_k is None and (device_resident(cu_seqlens_q)
                                                                    or device_resident(cu_seqlens_k)):
        from . import serving

        serving.run_varlen_on_device(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, out, lse,
                                     causal, scale, softcap, window, sinks, descales)
        return

    cu_q = (host_cu_seqlens_q if host_cu_seqlens_q is not None else cu_seqlens_q).cpu().tolist()
    cu_k = (host_cu_seqlens_k if host_cu_seqlens_k is not None else cu_seqlens_k).cpu().tolist()
    kernel.run_forward_varlen(q, k, v, cu_q, cu_k, out, lse, causal, scale, softcap, window, sinks, descales)


# VarlenPlan: varlen_plan.py (device-side planning, issue 13).


# ---------------------------------------------------------------------------------------------
# forward_paged
# ---------------------------------------------------------------------------------------------

def forward_paged(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cu_seqlens_q: torch.Tensor,
                  seqlens_k: torch.Tensor, *, kv_indptr: torch.Tensor | None = None,
                  kv_page_indices: torch.Tensor | None = None, block_table: torch.Tensor | None = None,
                  causal: bool = False, softmax_scale: float | None = None, return_lse: bool = False,
                  out: torch.Tensor | None = None, round_mode: str = "rtne", softcap: float | None = 0.0,
                  window_size: tuple[int, int] = (-1, -1), sinks: torch.Tensor | None = None,
                  k_descale: torch.Tensor | None = None, v_descale: torch.Tensor | None = None):
    """Attention of packed queries (THD) against K/V stored in pages.

    Args:
        q: bf16 ``[total_q, Hq, Dqk]`` (any strides with a contiguous head dim).
        k_cache: bf16 ``[num_pages, page_size, Hkv, Dqk]`` (or fp8 float8_e4m3fn with v_cache, as forward),
            page_size a power of two, >= 16 for Dqk = 192 (MLA) and >= 8 for the other head dims; contiguous head
            dim; spans < 4 GiB (gfx950 kernel).
        v_cache: bf16 ``[num_pages, page_size, Hkv, Dv]`` (or fp8 with k_cache); with Dqk = 128, the same strides
            as k_cache.
        cu_seqlens_q: int32 ``[B + 1]`` query offsets (as forward_varlen), on the CPU or q's device.
        seqlens_k: int32 ``[B]`` key lengths >= 0 (read on the host; a CPU tensor avoids a sync).
        kv_indptr: page lists (SGLang / AITER), int32 ``[B + 1]``, read on the host: sequence b's pages, in order,
            are kv_page_indices[kv_indptr[b] : kv_indptr[b+1]], enough for seqlens_k[b] keys.
        kv_page_indices: int32 page indices on q's device or the CPU, each in [0, num_pages) (checked when on the
            CPU; on the device an index outside the cache reads zero keys, never memory outside it).
        block_table: or vLLM block tables, int32 ``[B, max_pages]`` with a contiguous last dim: sequence b's pages
            are block_table[b, :ceil(seqlens_k[b] / page_size)]. Give exactly one of the two forms.
        causal: bool, as forward_varlen.
        softmax_scale: as forward_varlen.
        return_lse: bool; also return fp32 LSE ``[Hq, total_q]``.
        out: optional bf16 ``[total_q, Hq, Dv]``, as forward_varlen.
        round_mode: "rtne" only.
        softcap: logit soft-cap as forward (None or 0: off).
        window_size: sliding window (left, right) as forward (only the window's pages are read).
        sinks: fp32 ``[Hq]`` attention sinks as forward.
        k_descale: fp8 caches only: the descale of k_cache, as forward.
        v_descale: fp8 caches only: the descale of v_cache, as forward.

    Lengths and kv_indptr are read on the host (CPU tensors avoid a sync), so this op is not graph
    capturable. Pages may come in any order and be any subset of the cache.

    Returns:
        out, or (out, lse).

    Raises:
        TypeError: a tensor argument not a tensor or of the wrong dtype; a flag not a bool; a scalar not a number.
        ValueError: shapes, heads, head dims, page_size, cache strides or size, both or neither page form,
            block_table shape, page indices beyond the cache or too few pages (host-visible), kv_indptr values,
            cu_seqlens_q values, round_mode, softmax_scale, softcap, window_size, sinks, out; each message names
            the argument.
        NoKernelError: the backend has no gfx950 kernel.
    """
    _qkv_dtypes(q, k_cache, v_cache, "k_cache", "v_cache")
    checks.tensor("q", q, ndim=3)
    checks.tensor("k_cache", k_cache, ndim=4)
    checks.tensor("v_cache", v_cache, ndim=4)
    _round_mode(round_mode)
    checks.boolean("causal", causal)
    checks.boolean("return_lse", return_lse)
    _index_vector("cu_seqlens_q", cu_seqlens_q)
    if cu_seqlens_q.numel() < 1:
        raise ValueError("cu_seqlens_q must have B + 1 >= 1 elements; got 0")
    B = cu_seqlens_q.numel() - 1
    _index_vector("seqlens_k", seqlens_k, B)
    if block_table is None:
        if kv_indptr is None or kv_page_indices is None:
            raise ValueError("give the pages either as kv_indptr= and kv_page_indices= or as block_table=; "
                             f"got kv_indptr={'set' if kv_indptr is not None else None}, kv_page_indices="
                             f"{'set' if kv_page_indices is not None else None}, block_table=None")
        _index_vector("kv_indptr", kv_indptr, B + 1)
        _index_vector("kv_page_indices", kv_page_indices)
    else:
        if kv_indptr is not None or kv_page_indices is not None:
            raise ValueError("give either block_table= or kv_indptr=/kv_page_indices=, not both")
        checks.tensor("block_table", block_table, dtype=torch.int32, ndim=2, last_dim_contiguous=True)
        if block_table.shape[0] != B:
            raise ValueError(f"block_table must have B = {B} rows (len(cu_seqlens_q) - 1); got {block_table.shape[0]}")
    _out_type(out)
    dev = checks.same_device(q=q, k_cache=k_cache, v_cache=v_cache, out=out, kv_page_indices=kv_page_indices,
                             block_table=block_table)
    _host_or(dev, cu_seqlens_q=cu_seqlens_q, seqlens_k=seqlens_k, kv_indptr=kv_indptr)
    num_pages, page_size, hk, dqk = k_cache.shape
    if v_cache.shape[0] != num_pages or v_cache.shape[1] != page_size:
        raise ValueError(f"v_cache must have k_cache's [num_pages, page_size] = [{num_pages}, {page_size}]; got "
                         f"{list(v_cache.shape[:2])}")
    _heads(q.shape[1], hk, v_cache.shape[2], "k_cache", "v_cache")
    _head_dims(q.shape[2], dqk, v_cache.shape[3], "k_cache", "v_cache")
    checks.power_of_two("page_size (k_cache.shape[1])", page_size, lo=16 if dqk == 192 else 8)
    _strides("q", q, 0)
    _strides("k_cache", k_cache, 1)
    _strides("v_cache", v_cache, 1)
    if dqk == 128 and k_cache.stride() != v_cache.stride():
        raise ValueError(f"with head dim 128, k_cache and v_cache must have the same strides; got "
                         f"{k_cache.stride()} and {v_cache.stride()}")
    scale = _scale(softmax_scale, dqk)
    cap = _softcap(softcap)
    wl, wr = _window(window_size, causal)
    sk = _sinks(sinks, q.shape[1], dev)
    kd, vd = _descales(k_cache, v_cache, k_descale, v_descale, hk, (dqk, v_cache.shape[3]), dev, "k_cache", "v_cache")
    oshape = [q.shape[0], q.shape[1], v_cache.shape[3]]
    if out is not None:
        _check_out(out, oshape, dev, 0)
    # lengths and kv_indptr are read on the host (a sync when they live on the GPU)
    host_lens = seqlens_k.cpu()
    host_indptr = kv_indptr.cpu() if kv_indptr is not None else None
    if checks.host_checks():
        if checks.on_host(cu_seqlens_q):
            _cu_seqlens("cu_seqlens_q", cu_seqlens_q, q.shape[0], "q.shape[0]", None, None)
        checks.values_in("seqlens_k", host_lens, lo=0)
        need = (host_lens.to(torch.int64) + page_size - 1) // page_size
        if host_indptr is not None:
            checks.values_in("kv_indptr", host_indptr[:1], lo=0)
            checks.nondecreasing("kv_indptr", host_indptr)
            if B and int(host_indptr[-1]) > kv_page_indices.numel():
                raise ValueError(f"kv_indptr[-1] must be <= kv_page_indices.numel() ({kv_page_indices.numel()}); "
                                 f"got {int(host_indptr[-1])}")
            have = (host_indptr[1:] - host_indptr[:-1]).to(torch.int64)
            if bool((have < need).any()):
                b = int(torch.nonzero(have < need)[0])
                raise ValueError(f"kv_indptr gives sequence {b} {int(have[b])} pages but seqlens_k[{b}] = "
                                 f"{int(host_lens[b])} needs {int(need[b])} pages of {page_size}")
            if checks.on_host(kv_page_indices) and not device_resident(kv_page_indices) and B:
                used = kv_page_indices[int(host_indptr[0]):int(host_indptr[-1])]
                checks.values_in("kv_page_indices", used, lo=0, hi=num_pages)
        else:
            if B and int(need.max()) > block_table.shape[1]:
                b = int(need.argmax())
                raise ValueError(f"block_table has {block_table.shape[1]} columns but seqlens_k[{b}] = "
                                 f"{int(host_lens[b])} needs {int(need[b])} pages of {page_size}")
            if checks.on_host(block_table) and not device_resident(block_table) and B:
                cols = torch.arange(block_table.shape[1])
                used = block_table[cols.view(1, -1) < need.view(-1, 1)]
                checks.values_in("block_table", used, lo=0, hi=num_pages)
    if out is None:
        out = torch.empty(oshape, dtype=torch.bfloat16, device=q.device)
    lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device) if return_lse else None
    _paged_op(q, k_cache, v_cache, cu_seqlens_q, host_lens, host_indptr, kv_page_indices, block_table, out, lse,
              causal, scale, cap, wl, wr, sk, kd, vd)
    return (out, lse) if return_lse else out


@torch.library.custom_op("moonmath::attention_gfx950_forward_paged", mutates_args=("out", "lse"))
def _paged_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cu_seqlens_q: torch.Tensor,
              seqlens_k: torch.Tensor, kv_indptr: torch.Tensor | None, kv_page_indices: torch.Tensor | None,
              block_table: torch.Tensor | None, out: torch.Tensor, lse: torch.Tensor | None, causal: bool,
              scale: float, softcap: float = 0.0, window_left: int = -1, window_right: int = -1,
              sinks: torch.Tensor | None = None, k_descale: torch.Tensor | None = None,
              v_descale: torch.Tensor | None = None) -> None:
    if get_backend() == "reference":
        k_cache, v_cache = _dequant(k_cache, k_descale, 2), _dequant(v_cache, v_descale, 2)
        lens = [int(x) for x in seqlens_k.tolist()]
        if block_table is not None:
            pages = [block_table[b] for b in range(len(lens))]
        else:
            ip = [int(x) for x in kv_indptr.tolist()]
            pages = [kv_page_indices[ip[b]:ip[b + 1]] for b in range(len(lens))]
        reference.forward_paged(q, k_cache, v_cache, [int(x) for x in cu_seqlens_q.tolist()], lens, pages, causal,
                                scale, out, lse, softcap, (window_left, window_right), sinks)
    else:
        _run_kernel_paged(q, k_cache, v_cache, cu_seqlens_q, seqlens_k, kv_indptr, kv_page_indices, block_table,
                          out, lse, causal, scale, softcap, (window_left, window_right), sinks,
                          _pair(k_descale, v_descale))


@_paged_op.register_fake
def _(q, k_cache, v_cache, cu_seqlens_q, seqlens_k, kv_indptr, kv_page_indices, block_table, out, lse, causal,
      scale, softcap=0.0, window_left=-1, window_right=-1, sinks=None, k_descale=None, v_descale=None) -> None:
    return None


def _run_kernel_paged(q, k_cache, v_cache, cu_seqlens_q, seqlens_k, kv_indptr, kv_page_indices, block_table, out,
                      lse, causal, scale, softcap, window, sinks, descales=None) -> None:
    """The hip/emu path of forward_paged (seqlens_k and kv_indptr arrive as CPU tensors; the page list stays on the
    device): the paged kernels of serving.py, planned on the host."""
    from . import serving

    cu_q = (cu_seqlens_q if checks.on_host(cu_seqlens_q) else cu_seqlens_q.cpu()).tolist()
    lens = [int(x) for x in seqlens_k.tolist()]
    if block_table is not None:
        pages, page0 = block_table, [b * block_table.stride(0) for b in range(len(lens))]
        if page0 and page0[-1] >= 1 << 31:
            raise ValueError(f"block_table rows must start less than 2^31 entries apart; got row stride "
                             f"{block_table.stride(0)} for {len(lens)} rows")
    else:
        pages, page0 = kv_page_indices, [int(x) for x in kv_indptr[:-1].tolist()]
    serving.run_forward_paged(q, k_cache, v_cache, cu_q, lens, page0, pages, out, lse, causal, scale, softcap,
                              window, sinks, descales)
