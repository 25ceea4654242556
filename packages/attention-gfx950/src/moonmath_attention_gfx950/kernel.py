"""Launching the gfx950 attention forward kernels (csrc/device/gfx950/) through moonmath_common's runtime.

Code objects: ``attention_fwd.hsaco`` (kernels ``attn_fwd_d128`` and ``attn_fwd_d192_128``: grid
work items x q heads, workgroup item * heads + head, 512 threads; ``*_softcap``, ``*_window``,
``*_softcap_window``: the same pipelines with the soft-cap stage / the sliding window compiled in; ``*_sinks`` of
each: with sinks),
``attention_fwd_dims.hsaco`` (the same for head dims 64, 80 and 96; 256 is not built) and
``attention_merge.hsaco`` (``attn_fwd_merge`` and ``attn_fwd_merge_dv<Dv>``: the fixed-order fp32 merge of
split-KV parts). The C++ planner
(``_C.plan_forward_batch`` / ``_C.plan_forward_varlen``, csrc/host/attention_planner.hpp) writes the plan buffer
both kernels read (csrc/shared/attention_fwd_plan.h): the strides, the scale, and one work item per (tile, key range).

The caller (attention.py) has validated every tensor; this module checks what the kernels add (16-byte
alignment of the rows they load and store with 16/8-byte accesses), plans, and launches.
docs/kernels/attention_gfx950.md has the design.
"""
from __future__ import annotations

import contextlib
import math

import torch

from moonmath_common import NoKernelError, target_arch
from moonmath_common.kernels import KernelSet

ARCH = "gfx950"
FWD_CODE_OBJECT = "attention_fwd"
FWD_KERNELS = {(128, 128): "attn_fwd_d128", (192, 128): "attn_fwd_d192_128",
               # issue 17: the other head dims, in their own code objects (attention_fwd_dims.hip)
               (64, 64): "attn_fwd_d64", (80, 80): "attn_fwd_d80", (96, 96): "attn_fwd_d96",
               (256, 128): "attn_fwd_d256_128"}
DIMS_SUFFIX = "_dims"          # code object of the head dims 64, 80, 96: <base>_dims.hsaco
D256_SUFFIX = "_d256"          # and of (256, 128), the kernels of head dims 256 (COLUMN_PASSES): <base>_d256.hsaco
# fp8 K/V (issue 17): the dequantising pipeline, head dims 64 and 128, dense and varlen (attention_fwd_fp8.hip), and
# (256, 128) for head dims 256's column passes (attention_fwd_fp8_d256.hip: <base>_d256.hsaco); the fp32 [Hkv] K and
# V descales follow the other arguments (and sinks).
FP8_CODE_OBJECT = "attention_fwd_fp8"
FP8_KERNELS = {(64, 64): "attn_fwd_fp8_d64", (128, 128): "attn_fwd_fp8_d128", (256, 128): "attn_fwd_fp8_d256_128"}
MERGE_CODE_OBJECT, MERGE_KERNEL = "attention_merge", "attn_fwd_merge"
MERGE_KERNELS = {128: MERGE_KERNEL, 64: "attn_fwd_merge_dv64", 80: "attn_fwd_merge_dv80", 96: "attn_fwd_merge_dv96"}
FWD_BLOCK, MERGE_BLOCK = 512, 256
LOG2E = 1.0 / math.log(2.0)

KERNELS = KernelSet("moonmath_attention_gfx950")

# Planner inputs. num_cus is the machine's CU count (MI355X: 256); tests and benchmarks change it with
# planner_options() to force or forbid splits on small shapes.
_PLANNER = {"num_cus": 256, "min_part_blocks": 4, "max_parts": 16}


@contextlib.contextmanager
def planner_options(**kw):
    """Temporarily change the planner's inputs (num_cus, min_part_blocks, max_parts)."""
    unknown = set(kw) - set(_PLANNER)
    if unknown:
        raise TypeError(f"planner_options: unknown option(s) {sorted(unknown)}; known: {sorted(_PLANNER)}")
    old = dict(_PLANNER)
    _PLANNER.update({k: int(v) for k, v in kw.items()})
    try:
        yield
    finally:
        _PLANNER.clear()
        _PLANNER.update(old)


def _C():
    from . import _C as c

    return c


def _check_alignment(op: str, **tensors: tuple[torch.Tensor, tuple[int, ...]]) -> None:
    # Q rows are loaded, K/V rows DMA'd to LDS (or loaded in 16-byte pieces of fp8) and out rows stored in 16- and
    # 8-byte pieces: each row must start on a 16-byte boundary (address and the batch/token/head strides).
    for name, (t, dims) in tensors.items():
        if t is None:
            continue
        if t.data_ptr() % 16:
            raise ValueError(f"{op}: {name} must start on a 16-byte boundary for the gfx950 kernel; got address "
                             f"{t.data_ptr():#x} (pass a fresh or .clone()d tensor)")
        per_16 = 16 // t.element_size()
        for d in dims:
            if t.shape[d] > 1 and t.stride(d) % per_16:
                raise ValueError(f"{op}: {name}.stride({d}) must be a multiple of {per_16} elements (16 bytes) for the "
                                 f"gfx950 kernel; got {t.stride(d)}")


def _strides(t: torch.Tensor, batch: int | None, token: int, head: int) -> list[int]:
    return [t.stride(batch) if batch is not None else 0, t.stride(token), t.stride(head)]


NO_WINDOW = (-1, -1)


def fwd_kernel(kernels: dict, dims: tuple[int, int], softcap: float, window: tuple[int, int] = NO_WINDOW,
               sinks: bool = False) -> str:
    """The kernel of head dims `dims` with the compile-time features in use: ``*_softcap`` when softcap > 0,
    ``*_window`` for a sliding window (attention._window normalises: (-1, -1) = none), ``*_sinks`` with sinks
    (one more argument: the fp32 [Hq] sinks, last)."""
    return (kernels[dims] + ("_softcap" if softcap else "") + ("_window" if tuple(window) != NO_WINDOW else "")
            + ("_sinks" if sinks else ""))


# Head dims (256, 256) (issue 17): no 32-row tile per wave holds O (128 fp32 a lane) and Q (64) beside the fragments in
# flight, so they run as two passes of the (256, 128) kernels, each over one half of V's and out's columns: both
# passes compute S = Q K^T and the softmax in full (the same instructions on the same inputs: the same P, lb, m, l bit
# for bit) and PV into their half. Costs the QK MFMAs and the softmax twice.
COLUMN_PASSES = {(256, 256): ((256, 128), (0, 128))}


def kernel_dims(dims: tuple[int, int]) -> tuple[int, int]:
    """The (Dqk, Dv) of the kernels that run head dims `dims` (their own but for the column passes' (256, 256))."""
    return COLUMN_PASSES[dims][0] if dims in COLUMN_PASSES else dims


def fwd_code_object(base: str, dims: tuple[int, int]) -> str:
    """The code object holding the kernels of kernel head dims `dims` (base: the dense or the paged one)."""
    return base if dims in ((128, 128), (192, 128)) else base + (D256_SUFFIX if dims == (256, 128) else DIMS_SUFFIX)


def _launch(op: str, plan: dict, q, k, v, out, lse, dims: tuple[int, int], **kw) -> list[dict | None]:
    """A host plan (_C.plan_forward_*) onto the device, then launch_forward."""
    arch = target_arch()
    if arch != ARCH:
        raise NoKernelError(op, arch, KERNELS.archs_built())
    if plan["n_items"] == 0:
        return []
    buf = torch.frombuffer(bytearray(plan["plan"]), dtype=torch.uint8).to(q.device)
    return launch_forward(op, buf, (plan["n_items"], plan["n_merge"], plan["n_slots"]), plan["heads_q"], q, k, v, out,
                          lse, dims, **kw)


def launch_forward(op: str, buf: torch.Tensor, counts: tuple[int, int, int], hq: int, q, k, v, out, lse,
                   dims: tuple[int, int], kernels: dict = FWD_KERNELS, code_object: str = FWD_CODE_OBJECT,
                   extra=None, softcap: float = 0.0, window: tuple[int, int] = NO_WINDOW,
                   sinks: torch.Tensor | None = None, descales: tuple | None = None, fp8_kernels: dict = FP8_KERNELS,
                   fp8_code_object: str = FP8_CODE_OBJECT) -> list[dict | None]:
    """The forward kernel over the plan in `buf` (its (n_items, n_merge, n_slots) = counts, hq q heads: grid
    n_items x hq, workgroup item * hq + head),
    then the merge kernel over its merge items, with an
    fp32 workspace of n_slots parts; per column pass (COLUMN_PASSES) for (256, 256). kernels / code_object / extra:
    the paged kernels and extra(k, v) their added arguments (serving.py). descales: fp8 K/V (the (k, v) fp32 [Hkv]
    descales): the fp8 kernels (fp8_kernels in fp8_code_object)."""
    n_items, n_merge, n_slots = counts
    if n_items == 0:
        return []
    kdims, cols = COLUMN_PASSES.get(dims, (dims, (0,)))
    if descales is not None:
        kernels, code_object = fp8_kernels, fp8_code_object + (D256_SUFFIX if kdims == (256, 128) else "")
    else:
        code_object = fwd_code_object(code_object, kdims)
    name = fwd_kernel(kernels, kdims, softcap, window, sinks is not None)
    tile = _C().TILE_ROWS
    ws_o = torch.empty(n_slots * hq * tile * kdims[1], dtype=torch.float32, device=q.device) if n_slots else None
    ws_ml = torch.empty(n_slots * hq * tile * 4, dtype=torch.float32, device=q.device) if n_slots else None
    tail = ([sinks] if sinks is not None else []) + (list(descales) if descales is not None else [])
    counters = []
    for c0 in cols:
        vc, oc = (v, out) if len(cols) == 1 else (v[..., c0:c0 + kdims[1]], out[..., c0:c0 + kdims[1]])
        more = extra(k, vc) if extra is not None else ()
        counters.append(KERNELS.launch(op, ARCH, code_object, name, grid=(n_items * hq, 1), block=FWD_BLOCK,
                                       args=[buf, q, k, vc, oc, lse, ws_o, ws_ml, *more, *tail]))
        if n_merge:
            counters.append(KERNELS.launch(op, ARCH, MERGE_CODE_OBJECT, MERGE_KERNELS[kdims[1]], grid=(n_merge, hq),
                                           block=MERGE_BLOCK, args=[buf, oc, lse, ws_o, ws_ml]))
    return counters


def run_forward(q, k, v, out, lse, layout: str, causal: bool, scale: float, softcap: float = 0.0,
                window: tuple[int, int] = NO_WINDOW, sinks=None, descales=None) -> list[dict | None]:
    """Batch forward on the gfx950 kernels (emu or hip). Tensors validated by attention.forward."""
    op = "moonmath_attention_gfx950.forward"
    sd, hd = (1, 2) if layout == "bshd" else (2, 1)
    _check_alignment(op, q=(q, (0, 1, 2)), k=(k, (0, 1, 2)), v=(v, (0, 1, 2)), out=(out, (0, 1, 2)))
    B, Hq, Sq = q.shape[0], q.shape[hd], q.shape[sd]
    Hkv, Skv = k.shape[hd], k.shape[sd]
    strides = (_strides(q, 0, sd, hd) + _strides(k, 0, sd, hd) + _strides(v, 0, sd, hd) + _strides(out, 0, sd, hd)
               + ([lse.stride(0), lse.stride(1)] if lse is not None else [0, 0]))
    plan = _C().plan_forward_batch(B, Sq, Skv, Hq, Hkv, causal, lse is not None, scale * LOG2E, strides, **_PLANNER,
                                   softcap=softcap, window_left=window[0], window_right=window[1])
    plan["heads_q"] = Hq
    return _launch(op, plan, q, k, v, out, lse, (q.shape[3], v.shape[3]), softcap=softcap, window=window,
                   sinks=sinks, descales=descales)


def run_forward_varlen(q, k, v, cu_q: list[int], cu_k: list[int], out, lse, causal: bool,
                       scale: float, softcap: float = 0.0, window: tuple[int, int] = NO_WINDOW,
                       sinks=None, descales=None) -> list[dict | None]:
    """Packed varlen (THD) forward, planned exactly on the host from host cu_seqlens values."""
    op = "moonmath_attention_gfx950.forward_varlen"
    _check_alignment(op, q=(q, (0, 1)), k=(k, (0, 1)), v=(v, (0, 1)), out=(out, (0, 1)))
    Hq, Hkv = q.shape[1], k.shape[1]
    strides = (_strides(q, None, 0, 1) + _strides(k, None, 0, 1) + _strides(v, None, 0, 1) + _strides(out, None, 0, 1)
               + ([0, lse.stride(0)] if lse is not None else [0, 0]))
    plan = _C().plan_forward_varlen(cu_q, cu_k, Hq, Hkv, causal, lse is not None, scale * LOG2E, strides, **_PLANNER,
                                    softcap=softcap, window_left=window[0], window_right=window[1])
    plan["heads_q"] = Hq
    return _launch(op, plan, q, k, v, out, lse, (q.shape[2], v.shape[2]), softcap=softcap, window=window,
                   sinks=sinks, descales=descales)


def plan_batch(B: int, Sq: int, Skv: int, heads_q: int, heads_kv: int, causal: bool = False,
               window: tuple[int, int] = NO_WINDOW) -> dict:
    """The planner's decision for a batch shape under the current planner options (strides irrelevant)."""
    return _C().plan_forward_batch(B, Sq, Skv, heads_q, heads_kv, causal, False, 1.0, [0] * 14, **_PLANNER,
                                   window_left=window[0], window_right=window[1])
