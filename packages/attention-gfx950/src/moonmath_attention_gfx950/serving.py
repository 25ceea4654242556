"""Launching the serving paths of the gfx950 attention forward (issue 13): paged K/V and the device-planned
VarlenPlan. The kernels are the forward pipeline with another partitioner (``attention_fwd_paged.hsaco``:
``attn_fwd_paged_d128``, ``attn_fwd_paged_d192_128``; ``attention_fwd_paged_dims.hsaco``: the d64, d80, d96 and
d256 ones) and the planning kernel ``attention_plan.hsaco``:
``attn_fwd_plan_varlen``, which writes a plan's work items on the device. docs/ops/forward_paged.md and
docs/ops/VarlenPlan.md state the rules.
"""
from __future__ import annotations

import math
import struct

import torch

from moonmath_common import NoKernelError, target_arch

from . import kernel
from .kernel import _C, _PLANNER, ARCH, FWD_BLOCK, KERNELS, LOG2E, _check_alignment, _strides

PAGED_CODE_OBJECT = "attention_fwd_paged"
PAGED_KERNELS = {(128, 128): "attn_fwd_paged_d128", (192, 128): "attn_fwd_paged_d192_128",
                 (64, 64): "attn_fwd_paged_d64", (80, 80): "attn_fwd_paged_d80", (96, 96): "attn_fwd_paged_d96",
                 (256, 256): "attn_fwd_paged_d256"}   # the last four in attention_fwd_paged_dims.hsaco
PAGED_FP8_CODE_OBJECT = "attention_fwd_paged_fp8"     # fp8 K/V caches (issue 17)
PAGED_FP8_KERNELS = {(64, 64): "attn_fwd_paged_fp8_d64", (128, 128): "attn_fwd_paged_fp8_d128",
                     (256, 256): "attn_fwd_paged_fp8_d256"}
PLAN_CODE_OBJECT, PLAN_KERNEL, PLAN_BLOCK = "attention_plan", "attn_fwd_plan_varlen", 256
ARGS_BYTES, ITEM_BYTES = 152, 48     # sizeof(AttnFwdArgs), sizeof(AttnWorkItem) (csrc/shared/attention_fwd_plan.h)
N_ITEMS_OFFSET = 14 * 8 + 2 * 4      # AttnFwdArgs.n_items
MAX_CACHE_BYTES = (1 << 32) - 64     # one buffer resource spans a cache (attention_fwd_paged.hpp)


def _span_bytes(t: torch.Tensor) -> int:
    """Bytes from t's first element to the end of its last one."""
    if t.numel() == 0:
        return 0
    return (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.element_size()


def run_forward_paged(q, k_cache, v_cache, cu_q: list[int], k_lens: list[int], page0: list[int], pages, out, lse,
                      causal: bool, scale: float, softcap: float = 0.0,
                      window: tuple[int, int] = kernel.NO_WINDOW, sinks=None, descales=None) -> list[dict | None]:
    """forward_paged on the gfx950 kernels. cu_q / k_lens / page0 are host values (page0[b]: sequence b's first entry
    in `pages`, the page list or the flattened block table, which stays on the device)."""
    op = "moonmath_attention_gfx950.forward_paged"
    if target_arch() != ARCH:
        raise NoKernelError(op, target_arch(), KERNELS.archs_built())
    _check_alignment(op, q=(q, (0, 1)), k_cache=(k_cache, (0, 1, 2)), v_cache=(v_cache, (0, 1, 2)),
                     out=(out, (0, 1)))
    kernel._check_fp8_alignment(op, k_cache=(k_cache, (0, 1, 2)), v_cache=(v_cache, (0, 1, 2)))
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if _span_bytes(t) > MAX_CACHE_BYTES:
            raise ValueError(f"{op}: {name} must span less than 4 GiB (one buffer resource) for the gfx950 kernel; "
                             f"got {_span_bytes(t)} bytes")
    page_size = k_cache.shape[1]
    Hq, Hkv = q.shape[1], k_cache.shape[2]
    strides = (_strides(q, None, 0, 1) + _strides(k_cache, 0, 1, 2) + _strides(v_cache, 0, 1, 2)
               + _strides(out, None, 0, 1) + ([0, lse.stride(0)] if lse is not None else [0, 0]))
    plan = _C().plan_forward_paged(cu_q, k_lens, page0, Hq, Hkv, causal, lse is not None, scale * LOG2E, strides,
                                   **_PLANNER, softcap=softcap, window_left=window[0], window_right=window[1])
    plan["heads_q"] = Hq
    extra = (pages, _span_bytes(k_cache), _span_bytes(v_cache), int(math.log2(page_size)))
    return kernel._launch(op, plan, q, k_cache, v_cache, out, lse, (q.shape[2], v_cache.shape[3]),
                          kernels=PAGED_KERNELS, code_object=PAGED_CODE_OBJECT, extra=extra, softcap=softcap,
                          window=window, sinks=sinks, descales=descales, fp8_kernels=PAGED_FP8_KERNELS,
                          fp8_code_object=PAGED_FP8_CODE_OBJECT)


# ---------------------------------------------------------------------------------------------
# device-planned varlen
# ---------------------------------------------------------------------------------------------

def device_plan_capacity(batch: int, max_seqlen_q: int, total_q: int) -> int:
    """Upper bound of the work items of any lengths within the promised bounds: sum_b ceil(len_b / 256) is at most
    B * ceil(max_seqlen_q / 256) and at most total_q // 256 + B."""
    tile = _C().TILE_ROWS
    return min(batch * -(-max_seqlen_q // tile), total_q // tile + batch)


def plan_on_device(buf: torch.Tensor, cu_q, cu_k, n_cap: int, total_q: int, total_k: int, max_q: int, max_k: int,
                   causal: bool) -> None:
    """Launch the planning kernel: it writes buf's n_cap work items from the device-resident cu_seqlens."""
    op = "moonmath_attention_gfx950.VarlenPlan.plan"
    if target_arch() != ARCH:
        raise NoKernelError(op, target_arch(), KERNELS.archs_built())
    if n_cap == 0:
        return
    KERNELS.launch(op, ARCH, PLAN_CODE_OBJECT, PLAN_KERNEL, grid=(1, 1), block=PLAN_BLOCK,
                   args=[buf, cu_q, cu_k, cu_q.numel() - 1, n_cap, total_q, total_k, max_q, max_k, int(causal)])


def run_device_planned(buf: torch.Tensor, n_cap: int, q, k, v, out, lse, causal: bool, scale: float,
                       staging: dict | None = None, softcap: float = 0.0,
                       window: tuple[int, int] = kernel.NO_WINDOW, sinks=None, descales=None) -> list[dict | None]:
    """Run the forward kernel over a device-written plan: the host writes only the header (strides of this
    run's q/k/v/out, scale, flags), a host-to-device copy of values it owns; it reads nothing back.

    staging: the plan's cache of host copies of headers (pinned on a GPU), one per distinct header, kept as long
    as the plan: a captured graph's copy node then always reads a live source holding the right bytes."""
    op = "moonmath_attention_gfx950.VarlenPlan.run"
    if target_arch() != ARCH:
        raise NoKernelError(op, target_arch(), KERNELS.archs_built())
    _check_alignment(op, q=(q, (0, 1)), k=(k, (0, 1)), v=(v, (0, 1)), out=(out, (0, 1)))
    kernel._check_fp8_alignment(op, k=(k, (0, 1)), v=(v, (0, 1)))
    Hq, Hkv = q.shape[1], k.shape[1]
    strides = (_strides(q, None, 0, 1) + _strides(k, None, 0, 1) + _strides(v, None, 0, 1) + _strides(out, None, 0, 1)
               + ([0, lse.stride(0)] if lse is not None else [0, 0]))
    header = bytearray(_C().plan_forward_varlen([0], [0], Hq, Hkv, causal, lse is not None, scale * LOG2E, strides,
                                                **_PLANNER, softcap=softcap, window_left=window[0],
                                                window_right=window[1])["plan"])
    assert len(header) == ARGS_BYTES
    struct.pack_into("<i", header, N_ITEMS_OFFSET, n_cap)
    on_gpu = buf.device.type != "cpu"
    src = staging.get(bytes(header)) if staging is not None else None
    if src is None:
        src = torch.frombuffer(header, dtype=torch.uint8)
        src = src.pin_memory() if on_gpu else src
        if staging is not None:
            staging[bytes(header)] = src
    buf[:ARGS_BYTES].copy_(src, non_blocking=on_gpu)   # stream-ordered, no host sync on a GPU
    if n_cap == 0 or Hq == 0:
        return []
    dims = (q.shape[2], v.shape[2])
    co, names = ((kernel.FP8_CODE_OBJECT, kernel.FP8_KERNELS) if descales is not None
                 else (kernel.fwd_code_object(kernel.FWD_CODE_OBJECT, dims), kernel.FWD_KERNELS))
    tail = ([sinks] if sinks is not None else []) + (list(descales) if descales is not None else [])
    return [KERNELS.launch(op, ARCH, co, kernel.fwd_kernel(names, dims, softcap, window, sinks is not None),
                           grid=(n_cap * kernel.ROW_SPLIT.get(dims, 1), Hq), block=FWD_BLOCK,
                           args=[buf, q, k, v, out, lse, None, None, *tail])]


def run_varlen_on_device(q, k, v, cu_q, cu_k, max_q: int, max_k: int, out, lse, causal: bool, scale: float,
                         softcap: float = 0.0, window: tuple[int, int] = kernel.NO_WINDOW, sinks=None,
                         descales=None) -> None:
    """forward_varlen with device-resident cu_seqlens and no host copies: plan on the device into a buffer that
    lives for this call (stream order keeps it valid for the kernels), then run."""
    n_cap = device_plan_capacity(cu_q.numel() - 1, max_q, q.shape[0])
    buf = torch.zeros(ARGS_BYTES + n_cap * ITEM_BYTES, dtype=torch.uint8, device=q.device)
    plan_on_device(buf, cu_q, cu_k, n_cap, q.shape[0], k.shape[0], max_q, max_k, causal)
    run_device_planned(buf, n_cap, q, k, v, out, lse, causal, scale, softcap=softcap, window=window, sinks=sinks,
                       descales=descales)
