"""Input validation shared by every op.

Types and dtypes raise TypeError; shapes, strides, devices and values raise ValueError. Every
message names the argument, what was expected and what came.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import torch


def _fmt_dtypes(dtypes: Sequence[torch.dtype]) -> str:
    return " or ".join(str(d).replace("torch.", "") for d in dtypes)


def tensor(name: str, t: object, *, dtype: torch.dtype | Sequence[torch.dtype] | None = None,
           ndim: int | None = None, shape: Sequence[int | None] | None = None,
           contiguous: bool = False, last_dim_contiguous: bool = False,
           device: torch.device | None = None) -> torch.Tensor:
    """Check one tensor argument; `shape` entries that are None are free."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
    if dtype is not None:
        allowed = (dtype,) if isinstance(dtype, torch.dtype) else tuple(dtype)
        if t.dtype not in allowed:
            raise TypeError(f"{name} must have dtype {_fmt_dtypes(allowed)}; got {str(t.dtype).replace('torch.', '')}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D; got {t.dim()}-D with shape {tuple(t.shape)}")
    if shape is not None:
        if t.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, t.shape)):
            want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
            raise ValueError(f"{name} must have shape {want}; got {list(t.shape)}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous; got strides {t.stride()} for shape {tuple(t.shape)}")
    if last_dim_contiguous and t.dim() > 0 and t.size(-1) > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name} must have a contiguous last dim (stride(-1) == 1); got stride {t.stride(-1)}")
    if device is not None and t.device != device:
        raise ValueError(f"{name} must be on {device} (the device of the other inputs); got {t.device}")
    return t


def same_device(**tensors: torch.Tensor | None) -> torch.device:
    """All given tensors (None skipped) on one device; returns it."""
    devs = {n: t.device for n, t in tensors.items() if t is not None}
    uniq = set(devs.values())
    if len(uniq) > 1:
        listing = ", ".join(f"{n} on {d}" for n, d in devs.items())
        raise ValueError(f"all tensors must be on one device; got {listing}")
    return next(iter(uniq)) if uniq else torch.device("cpu")


U32_MAX = 2**32 - 1
I32_MAX = 2**31 - 1
F32_MAX = 3.4028234663852886e38


def integer(name: str, v: object, *, lo: int | None = None, hi: int | None = None) -> int:
    """An int (Python int or any integer with __index__, e.g. a numpy integer; bool rejected) in [lo, hi]."""
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, bool) or not hasattr(type(v), "__index__") or isinstance(v, torch.Tensor):
            raise TypeError(f"{name} must be an int; got {type(v).__name__}")
        v = operator.index(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ValueError(f"{name} must be in {rng}; got {v}")
    return v


def u32(name: str, v: object, *, lo: int = 0) -> int:
    """An int the kernel takes as a 32-bit unsigned field: in [lo, 2**32 - 1]."""
    return integer(name, v, lo=lo, hi=U32_MAX)


def i32(name: str, v: object, *, lo: int = 0) -> int:
    """An int the kernel takes as a 32-bit signed field: in [lo, 2**31 - 1]."""
    return integer(name, v, lo=lo, hi=I32_MAX)


def real(name: str, v: object, *, finite: bool = True, positive: bool = False, fp32: bool = False) -> float:
    """A number usable as a float scalar: a Python int/float, a numpy scalar, or a 0-d / one-element CPU
    tensor (read with float(), as the original did). fp32=True: the kernel takes it as fp32, so a finite
    double beyond fp32's range is rejected rather than turned into inf."""
    if isinstance(v, torch.Tensor):
        if v.numel() != 1:
            raise ValueError(f"{name} must be a scalar (a float, or a tensor of one element); got a tensor of "
                             f"shape {tuple(v.shape)}")
        if v.device.type != "cpu":
            raise TypeError(f"{name} must be a float or a CPU tensor; got a tensor on {v.device} (reading it here "
                            f"would sync the device: pass float({name}) once, outside the hot path)")
        if v.dtype.is_complex or v.dtype == torch.bool:
            raise TypeError(f"{name} must be a real number; got a {str(v.dtype).replace('torch.', '')} tensor")
        v = v.item()
    elif not isinstance(v, (int, float)) and hasattr(type(v), "__float__") and hasattr(v, "dtype"):
        v = float(v)  # numpy scalar
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name} must be a float; got {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError:
        raise ValueError(f"{name} must be finite; got an int too large for a float") from None
    if finite and (f != f or f in (float("inf"), float("-inf"))):
        raise ValueError(f"{name} must be finite; got {f}")
    if fp32 and finite and abs(f) > F32_MAX:
        raise ValueError(f"{name} must be within fp32's range (|x| <= 3.4028e38; the kernel takes it as fp32); "
                         f"got {f}")
    if positive and not f > 0:
        raise ValueError(f"{name} must be > 0; got {f}")
    return f


def softcap(v: object) -> float:
    """The attention ``softcap`` (Gemma 2): None or 0 -> off (0.0); else a finite positive cap (fp32)."""
    if v is None:
        return 0.0
    cap = real("softcap", v, fp32=True)
    if cap < 0:
        raise ValueError(f"softcap must be None or 0 (off) or a positive cap (logits cap * tanh(s / cap)); got {cap}")
    return cap


def window(window_size: object, causal: bool) -> tuple[int, int]:
    """flash-attn's ``window_size=(left, right)``: a pair of ints >= -1 (-1 = unbounded); causal forces right = 0.
    Returns the (left, right) the kernels apply (row i with diagonal key d sees keys d - left <= j <= d + right)."""
    if window_size is None:
        return (-1, 0) if causal else (-1, -1)
    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
        raise ValueError(f"window_size must be a pair (left, right) of ints >= -1 (-1 = unbounded); got "
                         f"{window_size!r}")
    left, right = (integer(f"window_size[{i}]", w, lo=-1, hi=2**31 - 1) for i, w in enumerate(window_size))
    return (left, 0) if causal else (left, right)


def sinks(v: object, heads_q: int, device: torch.device) -> torch.Tensor | None:
    """The attention ``sinks`` (gpt-oss): None, or fp32 [Hq] per-head logits on `device` (returned contiguous)."""
    if v is None:
        return None
    tensor("sinks", v, dtype=torch.float32, ndim=1, device=device)
    if v.numel() != heads_q:
        raise ValueError(f"sinks must have one logit per q head ([{heads_q}]); got shape {list(v.shape)}")
    return v.contiguous()


def kv_descales(k: torch.Tensor, k_descale: object, v_descale: object, heads_kv: int, device: torch.device,
                fp8: torch.dtype, kname: str = "k", vname: str = "v"):
    """fp8 K/V's fp32 descales (flash-attn 3's ``k_descale`` / ``v_descale``; None = 1), per tensor (one element)
    or per kv head (``[heads_kv]``), finite and > 0 (checked where the values are on the host), returned as
    contiguous ``[heads_kv]`` tensors on `device`; (None, None) when k is not of dtype `fp8` (a descale is then
    an error: it would be silently meaningless)."""
    from .emu_device import device_resident

    if k.dtype != fp8:
        for name, d in (("k_descale", k_descale), ("v_descale", v_descale)):
            if d is not None:
                raise ValueError(f"{name} applies to fp8 ({str(fp8).replace('torch.', '')}) {kname}/{vname} only; "
                                 f"got {kname} of dtype {str(k.dtype).replace('torch.', '')}")
        return None, None
    out = []
    for name, d in (("k_descale", k_descale), ("v_descale", v_descale)):
        if d is None:
            out.append(torch.ones(heads_kv, dtype=torch.float32, device=device))
            continue
        tensor(name, d, dtype=torch.float32, device=device)
        if d.numel() not in (1, heads_kv) or d.dim() > 1:
            raise ValueError(f"{name} must be one fp32 scale per tensor ([] or [1]) or per kv head ([{heads_kv}]); "
                             f"got shape {list(d.shape)}")
        if on_host(d) and not device_resident(d):
            if not bool(torch.isfinite(d).all()) or not bool((d > 0).all()):
                raise ValueError(f"{name} must be finite and > 0; got {d.tolist()}")
        out.append(d.reshape(-1).expand(heads_kv).contiguous())
    return out[0], out[1]


def byte_span(t: torch.Tensor) -> tuple[int, int]:
    """[start, end) of the bytes a tensor's elements can occupy (from its sizes and strides)."""
    p = t.data_ptr()
    if t.is_contiguous():  # the common case, without the Python loop over dims
        return p, p + t.numel() * t.element_size()
    if t.numel() == 0:
        return p, p
    lo = hi = 0
    for size, stride in zip(t.shape, t.stride()):
        if stride >= 0:
            hi += (size - 1) * stride
        else:
            lo += (size - 1) * stride
    es = t.element_size()
    return p + lo * es, p + (hi + 1) * es


def overlap(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Whether two tensors' byte spans intersect on one device (by address, whatever their storages)."""
    if a is None or b is None or a.device != b.device:
        return False
    a0, a1 = byte_span(a)
    b0, b1 = byte_span(b)
    return a0 < b1 and b0 < a1


def no_overlap(out_name: str, out: torch.Tensor | None, **inputs: torch.Tensor | None) -> None:
    """`out` shares no byte with any of `inputs` (ValueError naming both)."""
    if out is None or torch.compiler.is_compiling():
        return
    o0, o1 = byte_span(out)  # once, not per input: this runs on every call
    dev = out.device
    for name, t in inputs.items():
        if t is None or t.device != dev:
            continue
        t0, t1 = byte_span(t)
        if t0 < o1 and o0 < t1:
            raise ValueError(f"{out_name} must not overlap {name} (the kernel reads {name} while writing "
                             f"{out_name}); pass a separate output tensor")


def choice(name: str, v: object, options: Sequence[object]) -> object:
    if v not in options:
        raise ValueError(f"{name} must be one of {', '.join(repr(o) for o in options)}; got {v!r}")
    return v


# ---- helpers added for the op specifications (reference backend, validation) ----

def boolean(name: str, v: object) -> bool:
    """A Python bool."""
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool; got {type(v).__name__}")
    return v


def host_checks() -> bool:
    """False while torch.compile traces (value checks that read tensor data are skipped then)."""
    import torch.compiler

    return not torch.compiler.is_compiling()


def on_host(*tensors: torch.Tensor | None) -> bool:
    """True when value checks may read these tensors without a device sync: not tracing, all on the CPU."""
    return host_checks() and all(t is None or t.device.type == "cpu" for t in tensors)


def power_of_two(name: str, v: int, *, lo: int = 1) -> int:
    """An int that is a power of two and at least `lo`."""
    integer(name, v)
    if v < lo or v & (v - 1):
        raise ValueError(f"{name} must be a power of two >= {lo}; got {v}")
    return v


def values_in(name: str, t: torch.Tensor, lo: int | None = None, hi: int | None = None) -> None:
    """Every element of integer tensor `t` is in [lo, hi) (host tensors; call under on_host())."""
    if t.numel() == 0:
        return
    if lo is not None:
        mn = int(t.min())
        if mn < lo:
            bad = int(torch.nonzero(t.reshape(-1) < lo)[0])
            raise ValueError(f"{name} values must be >= {lo}; got {mn} (first bad at flat index {bad})")
    if hi is not None:
        mx = int(t.max())
        if mx >= hi:
            bad = int(torch.nonzero(t.reshape(-1) >= hi)[0])
            raise ValueError(f"{name} values must be < {hi}; got {mx} (first bad at flat index {bad})")


def nondecreasing(name: str, t: torch.Tensor) -> None:
    """A 1-D integer tensor never decreases (host tensors; call under on_host())."""
    if t.numel() > 1:
        d = t[1:].to(torch.int64) - t[:-1].to(torch.int64)
        if bool((d < 0).any()):
            i = int(torch.nonzero(d < 0)[0])
            raise ValueError(f"{name} must be non-decreasing; got {name}[{i}] = {int(t[i])} > "
                             f"{name}[{i + 1}] = {int(t[i + 1])}")
