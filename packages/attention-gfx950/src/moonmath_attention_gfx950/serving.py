"""Launching the serving paths of the gfx950 attention forward (issue 13): paged K/V and the device-planned
VarlenPlan. The kernels are the forward pipeline with another partitioner (``attention_fwd_paged.hsaco``:
``attn_fwd_paged_d128``, ``attn_fwd_paged_d192_128``; ``attention_fwd_paged_dims.hsaco``: d64, d80, d96;
``attention_fwd_paged_fp8.hsaco``: fp8 caches) and the planning kernel ``attention_plan.hsaco``:
``attn_fwd_plan_varlen``, which writes a plan (work items, merge items) on the device, the host planner's plan
for the same lengths. docs/ops/forward_paged.md and
docs/ops/VarlenPlan.md state the rules.
"""
from __future__ import annotations

import math
import struct

import torch

from moonmath_common import NoKernelError, target_arch

from . import kernel
from .kernel import _C, _PLANNER, ARCH, KERNELS, LOG2E, _check_alignment, _strides

PAGED_CODE_OBJECT = "attention_fwd_paged"
PAGED_KERNELS = {(128, 128): "attn_fwd_paged_d128", (192, 128): "attn_fwd_paged_d192_128",
                 (64, 64): "attn_fwd_paged_d64", (80, 80): "attn_fwd_paged_d80", (96, 96): "attn_fwd_paged_d96",
                 (256, 128): "attn_fwd_paged_d256_128"}
# 64, 80, 96 in attention_fwd_paged_dims.hsaco, (256, 128) (the column passes of head dims 256) in _d256
PAGED_FP8_CODE_OBJECT = "attention_fwd_paged_fp8"     # fp8 K/V caches (issue 17)
PAGED_FP8_KERNELS = {(64, 64): "attn_fwd_paged_fp8_d64", (128, 128): "attn_fwd_paged_fp8_d128",
                     (256, 128): "attn_fwd_paged_fp8_d256_128"}
PLAN_CODE_OBJECT, PLAN_KERNEL, PLAN_BLOCK = "attention_plan", "attn_fwd_plan_varlen", 256
ARGS_BYTES = 152                     # sizeof(AttnFwdArgs) (csrc/shared/attention_fwd_plan.h; _C.ARGS_BYTES)
N_ITEMS_OFFSET = 14 * 8 + 2 * 4      # AttnFwdArgs.n_items, then n_merge and n_slots
MAX_CACHE_BYTES = (1 << 32) - 64     # one buffer resource spans a cache (attention_fwd_paged.hpp)


def _span_bytes(t: torch.Tensor) -> int:
    """Bytes from t's first element to the end of its last one."""
    if t.numel() == 0:
        return 0
    return (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.element_size()


def _paged_strides(cache: torch.Tensor) -> list[int]:
    """The cache's (page, token, head) strides for the paged kernels, which hold the page and token strides in 32
    bits: within a cache spanning < 4 GiB they fit, but for the stride of a size-1 dim, which the span does not
    bound; a single page's stride becomes 2^32 - 1, so any page index past 0 still lands past the span (zeros)."""
    st = _strides(cache, 0, 1, 2)
    if cache.shape[0] == 1:            # the token stride is bounded: page_size >= 8
        st[0] = min(st[0], (1 << 32) - 1)
    return st


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
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if _span_bytes(t) > MAX_CACHE_BYTES:
            raise ValueError(f"{op}: {name} must span less than 4 GiB (one buffer resource) for the gfx950 kernel; "
                             f"got {_span_bytes(t)} bytes")
    page_size = k_cache.shape[1]
    Hq, Hkv = q.shape[1], k_cache.shape[2]
    strides = (_strides(q, None, 0, 1) + _paged_strides(k_cache) + _paged_strides(v_cache)
               + _strides(out, None, 0, 1) + ([0, lse.stride(0)] if lse is not None else [0, 0]))
    plan = _C().plan_forward_paged(cu_q, k_lens, page0, Hq, Hkv, causal, lse is not None, scale * LOG2E, strides,
                                   **_PLANNER, softcap=softcap, window_left=window[0], window_right=window[1])
    plan["heads_q"] = Hq
    shift = int(math.log2(page_size))

    def extra(k, v):   # the paged kernels' arguments; a column pass's v view spans less than the cache
        return pages, _span_bytes(k), _span_bytes(v), shift

    return kernel._launch(op, plan, q, k_cache, v_cache, out, lse, (q.shape[2], v_cache.shape[3]),
                          kernels=PAGED_KERNELS, code_object=PAGED_CODE_OBJECT, extra=extra, softcap=softcap,
                          window=window, sinks=sinks, descales=descales, fp8_kernels=PAGED_FP8_KERNELS,
                          fp8_code_object=PAGED_FP8_CODE_OBJECT)


# ---------------------------------------------------------------------------------------------
# device-planned varlen
# ---------------------------------------------------------------------------------------------

def device_plan_layout(batch: int, max_seqlen_q: int, total_q: int, max_seqlen_k: int, heads: int) -> dict:
    """The buffer of a device-written plan for any lengths within the promise (B sequences, q lengths <= max_seqlen_q
    summing to <= total_q, k lengths <= max_seqlen_k) under the current planner options: capacities (tiles, items,
    merges, workspace slots), offsets and bytes (csrc/shared/attention_fwd_plan.h, device_plan_caps). The options
    are kept in the layout, so the planning kernel and the runs use the same ones."""
    policy = dict(_PLANNER)
    layout = _C().device_plan_layout(batch, max_seqlen_q, total_q, max_seqlen_k, heads, **policy)
    layout.update(policy=policy, heads=heads)
    return layout


def plan_on_device(buf: torch.Tensor, layout: dict, cu_q, cu_k, total_q: int, total_k: int, max_q: int, max_k: int,
                   causal: bool, window: tuple[int, int] = kernel.NO_WINDOW) -> None:
    """Launch the planning kernel: from the device-resident cu_seqlens it writes buf's work items, merge items and
    counts, the host planner's plan for the same lengths (split KV included). Nothing is read back."""
    op = "moonmath_attention_gfx950.VarlenPlan.plan"
    if target_arch() != ARCH:
        raise NoKernelError(op, target_arch(), KERNELS.archs_built())
    p = layout["policy"]
    KERNELS.launch(op, ARCH, PLAN_CODE_OBJECT, PLAN_KERNEL, grid=(1, 1), block=PLAN_BLOCK,
                   args=[buf, cu_q, cu_k, cu_q.numel() - 1, layout["tiles"], layout["items"], layout["merges"],
                         total_q, total_k, max_q, max_k, int(causal), window[0], window[1], layout["heads"],
                         p["num_cus"], p["min_part_blocks"], p["max_parts"]])


def _run_header(q, k, v, out, lse, causal: bool, scale: float, policy: dict, counts: tuple[int, int, int],
                softcap: float, window: tuple[int, int]) -> bytes:
    """The AttnFwdArgs of one run (strides of its q/k/v/out, scale, flags) with the plan's n_items / n_merge /
    n_slots: the host planner writes it for an empty sequence list, then the counts are set."""
    Hq, Hkv = q.shape[1], k.shape[1]
    strides = (_strides(q, None, 0, 1) + _strides(k, None, 0, 1) + _strides(v, None, 0, 1) + _strides(out, None, 0, 1)
               + ([0, lse.stride(0)] if lse is not None else [0, 0]))
    header = bytearray(_C().plan_forward_varlen([0], [0], Hq, Hkv, causal, lse is not None, scale * LOG2E, strides,
                                                **policy, softcap=softcap, window_left=window[0],
                                                window_right=window[1])["plan"])
    assert len(header) == ARGS_BYTES
    struct.pack_into("<iii", header, N_ITEMS_OFFSET, *counts)
    return bytes(header)


def _launch_plan(op: str, buf: torch.Tensor, counts: tuple[int, int, int], q, k, v, out, lse, softcap: float,
                 window: tuple[int, int], sinks, descales=None) -> list[dict | None]:
    """The forward kernel over buf's n_items work items, then the merge kernel over its n_merge merge items, with an
    fp32 workspace of n_slots parts (allocated per run, stream-ordered). The kernel of the head dims, the fp8 one
    with descales (the fp32 [Hkv] k / v descales, after sinks)."""
    return kernel.launch_forward(op, buf, counts, q.shape[1], q, k, v, out, lse, (q.shape[2], v.shape[2]),
                                 softcap=softcap, window=window, sinks=sinks, descales=descales)


def run_device_planned(buf: torch.Tensor, layout: dict, q, k, v, out, lse, causal: bool, scale: float,
                       staging: dict | None = None, softcap: float = 0.0,
                       window: tuple[int, int] = kernel.NO_WINDOW, sinks=None, descales=None) -> list[dict | None]:
    """Run the forward (and merge) kernels over a device-written plan: the host writes only the header (strides of
    this run's q/k/v/out, scale, flags, and the layout's capacities as n_items / n_merge / n_slots), a host-to-device
    copy of values it owns; it reads nothing back. The split parts' fp32 workspace is allocated per run for the
    layout's slots (stream-ordered, as the host-planned path's).

    staging: the plan's cache of host copies of headers (pinned on a GPU), one per distinct header, kept as long
    as the plan: a captured graph's copy node then always reads a live source holding the right bytes."""
    op = "moonmath_attention_gfx950.VarlenPlan.run"
    if target_arch() != ARCH:
        raise NoKernelError(op, target_arch(), KERNELS.archs_built())
    _check_alignment(op, q=(q, (0, 1)), k=(k, (0, 1)), v=(v, (0, 1)), out=(out, (0, 1)))
    counts = (layout["items"], layout["merges"], layout["slots"])
    header = _run_header(q, k, v, out, lse, causal, scale, layout["policy"], counts, softcap, window)
    on_gpu = buf.device.type != "cpu"
    src = staging.get(header) if staging is not None else None
    if src is None:
        src = torch.frombuffer(bytearray(header), dtype=torch.uint8)
        src = src.pin_memory() if on_gpu else src
        if staging is not None:
            staging[header] = src
    buf[:ARGS_BYTES].copy_(src, non_blocking=on_gpu)   # stream-ordered, no host sync on a GPU
    return _launch_plan(op, buf, counts, q, k, v, out, lse, softcap, window, sinks, descales)


def host_plan_work(cu_q: list[int], cu_k: list[int], heads: int, kv_heads: int, causal: bool,
                   window: tuple[int, int]) -> dict:
    """The host planner's plan of these lengths under the current planner options, kept by a host-planned
    VarlenPlan for all its runs: the work-list bytes (items, merge items), their counts and the options."""
    policy = dict(_PLANNER)
    p = _C().plan_forward_varlen(cu_q, cu_k, heads, kv_heads, causal, False, 1.0, [0] * 14, **policy,
                                 window_left=window[0], window_right=window[1])
    return {"work": p["plan"][ARGS_BYTES:], "counts": (p["n_items"], p["n_merge"], p["n_slots"]), "policy": policy}


def run_host_planned(work: dict, bufs: dict, q, k, v, out, lse, causal: bool, scale: float, softcap: float = 0.0,
                     window: tuple[int, int] = kernel.NO_WINDOW, sinks=None, descales=None) -> list[dict | None]:
    """Run the kernels over a plan made on the host once (host_plan_work): per run only the header is new; the
    device copy of [header][work list] is kept in bufs (the plan's), one per distinct (header, device), so layers
    with the same strides upload nothing."""
    op = "moonmath_attention_gfx950.VarlenPlan.run"
    if target_arch() != ARCH:
        raise NoKernelError(op, target_arch(), KERNELS.archs_built())
    _check_alignment(op, q=(q, (0, 1)), k=(k, (0, 1)), v=(v, (0, 1)), out=(out, (0, 1)))
    header = _run_header(q, k, v, out, lse, causal, scale, work["policy"], work["counts"], softcap, window)
    key = (header, q.device)
    buf = bufs.get(key)
    if buf is None:
        buf = bufs[key] = torch.frombuffer(bytearray(header + work["work"]), dtype=torch.uint8).to(q.device)
    return _launch_plan(op, buf, work["counts"], q, k, v, out, lse, softcap, window, sinks, descales)


def run_varlen_on_device(q, k, v, cu_q, cu_k, max_q: int, max_k: int, out, lse, causal: bool, scale: float,
                         softcap: float = 0.0, window: tuple[int, int] = kernel.NO_WINDOW, sinks=None,
                         descales=None) -> None:
    """forward_varlen with device-resident cu_seqlens and no host copies: plan on the device into a buffer that
    lives for this call (stream order keeps it valid for the kernels), then run."""
    layout = device_plan_layout(cu_q.numel() - 1, max_q, q.shape[0], max_k, q.shape[1])
    buf = torch.zeros(layout["bytes"], dtype=torch.uint8, device=q.device)
    plan_on_device(buf, layout, cu_q, cu_k, q.shape[0], k.shape[0], max_q, max_k, causal, window)
    run_device_planned(buf, layout, q, k, v, out, lse, causal, scale, softcap=softcap, window=window, sinks=sinks,
                       descales=descales)


# ---------------------------------------------------------------------------------------------
# reading plans back (tests and debugging only: on a GPU this copies device memory to the host)
# ---------------------------------------------------------------------------------------------

ITEM_FIELDS = ("batch", "q_tok0", "q_len", "k_tok0", "k_len", "q_row0", "kv_begin", "kv_end", "slot", "sink_part",
               "pad0", "pad1")                                             # AttnWorkItem
MERGE_FIELDS = ("batch", "q_tok0", "q_len", "q_row0", "slot0", "n_parts", "pad0", "pad1")   # AttnMergeItem


def _records(raw: bytes, offset: int, n: int, fields: tuple[str, ...]) -> list[dict]:
    size = 4 * len(fields)
    return [dict(zip(fields, struct.unpack_from(f"<{len(fields)}i", raw, offset + i * size))) for i in range(n)]


def decode_host_plan(plan: dict) -> dict:
    """The work items and merge items of a host plan (the dict of _C.plan_forward_*), as lists of field dicts."""
    raw = plan["plan"]
    return {"items": _records(raw, ARGS_BYTES, plan["n_items"], ITEM_FIELDS),
            "merges": _records(raw, ARGS_BYTES + plan["n_items"] * 4 * len(ITEM_FIELDS), plan["n_merge"],
                               MERGE_FIELDS),
            "n_slots": plan["n_slots"]}


def read_device_plan(buf: torch.Tensor, layout: dict, padding: bool = False) -> dict:
    """A device-written plan as decode_host_plan gives a host plan: the items and merge items the planning kernel
    wrote (its AttnPlanCounts), and with padding=True also the empty entries up to the capacities."""
    raw = bytes(buf.cpu().numpy().tobytes())
    tiles, n_items, n_merges, n_slots = struct.unpack_from("<4i", raw, layout["counts_offset"])
    return {"items": _records(raw, ARGS_BYTES, layout["items"] if padding else n_items, ITEM_FIELDS),
            "merges": _records(raw, layout["merges_offset"], layout["merges"] if padding else n_merges,
                               MERGE_FIELDS),
            "n_slots": n_slots, "n_tiles": tiles}
