"""Launching the gfx942 MHA forward kernels (csrc/device/gfx942/mha_fwd.hip) through moonmath_common.

The head dim 128 default code object ``mha_fwd.hsaco`` holds, per rounding mode ``<m>`` in rtna/rtne/rtz:
``mha_fwd_<m>`` (the dense launch: one 8-wave workgroup per 256-row q block of one head),
``mha_fwd_split_<m>`` (the tail KV-split parts: fp32 partials) and ``mha_merge_<m>`` (their fp32 merge),
plus ``mha_v_transpose`` (V -> V_t, run first); head dims 64 and 96 have the same set with ``d64_`` / ``d96_``
before the mode (``mha_fwd_d64_<m>``, ...) and ``mha_v_transpose_d64`` / ``_d96``. fp8 K/V (e4m3fnuz):
``mha_kv_fp8`` / ``mha_kv_fp8_d64`` widen K to bf16 rows and V to bf16 V_t (exact) in place of the V transpose,
then the feature kernels run with the descales. Each (head dim, family) is its own code object (``code_object``:
``mha_fwd[_feat][_d64|_d96]``, one translation unit each so the build runs them in parallel); the transposes and the
merges live in their head dim's default object. The tail split is planned by the pure C++ planner
``_C.plan_tail`` from shapes and the CU count only; ``MOONMATH_NO_TAIL=1`` turns it off.

The caller (attention.py) has validated every tensor; this module checks the 32-bit buffer ranges the
kernels build, allocates V_t and the split workspace, and launches on the current stream.
docs/kernels/mha_gfx942.md has the design.
"""
from __future__ import annotations

import math
import os

import torch

from moonmath_common import NoKernelError, get_backend, target_arch
from moonmath_common.kernels import KernelSet

OP = "moonmath_mha_gfx942.forward"
ARCH = "gfx942"
CODE_OBJECT = "mha_fwd"
TRANSPOSE_KERNEL = "mha_v_transpose"
FP8_KV_KERNEL = "mha_kv_fp8"
MI300X_CUS = 304
HEAD_DIMS = (64, 96, 128)   # the head dims with kernels (csrc/device/gfx942/mha_fwd.hip: HeadDim<D>)
FP8_HEAD_DIMS = (64, 128)   # the head dims with an fp8 K/V widening pass (mha_kv_fp8[_d64])
LOG2E = 1.0 / math.log(2.0)
_U32 = 1 << 32

KERNELS = KernelSet("moonmath_mha_gfx942")


def kernel_names(round_mode: str, features: bool = False, head_dim: int = 128) -> tuple[str, str, str]:
    """(dense, split, merge) kernel names of one rounding mode; features: the sinks / soft-cap / window / fp8
    variants."""
    f = "feat_" if features else ""
    d = "" if head_dim == 128 else f"d{head_dim}_"
    return f"mha_fwd_{f}{d}{round_mode}", f"mha_fwd_split_{f}{d}{round_mode}", f"mha_merge_{d}{round_mode}"


def code_object(head_dim: int = 128, features: bool = False) -> str:
    """The code object holding head dim `head_dim`'s default kernels (dense, split, merge, the V transpose and the
    fp8 K/V pass) or, with `features`, its feature dense and split kernels (csrc/device/gfx942/mha_fwd*.hip)."""
    return CODE_OBJECT + ("_feat" if features else "") + ("" if head_dim == 128 else f"_d{head_dim}")


def window_shifts(window: tuple[int, int], sq: int, skv: int) -> tuple[int, int]:
    """flash-attn's (left, right) window (-1 = unbounded, causal already folded in as right = 0), end-aligned
    (row i's diagonal key is i + Skv - Sq) -> the kernels' (lo_shift, hi_shift): row i sees keys
    i + lo_shift <= j <= i + hi_shift. Shifts beyond +-2^30 bound nothing (rows < 2^24) and are clamped."""
    from . import _C

    big, d = _C.UNBOUNDED, skv - sq
    left, right = window
    lo = -big if left < 0 else max(-big, d - left)
    hi = big if right < 0 else min(big, d + right)
    return lo, hi


def transpose_kernel(head_dim: int = 128, fp8: bool = False) -> str:
    """The pass before the attention kernels: V -> V_t (bf16), or fp8 K/V -> bf16 K rows and V_t (fp8)."""
    name = FP8_KV_KERNEL if fp8 else TRANSPOSE_KERNEL
    return name if head_dim == 128 else f"{name}_d{head_dim}"


def feature_args(sinks: torch.Tensor | None, softcap: float, head_dim: int = 128,
                 k_descale: torch.Tensor | None = None, v_descale: torch.Tensor | None = None,
                 shifts: tuple[int, int] | None = None) -> list:
    """The feature kernels' last seven arguments: sinks (or a null pointer), the softmax's log2-domain logit
    factor, the soft-cap's tanh pre-factor (0 = off), the window's (lo_shift, hi_shift) (window_shifts; None =
    unbounded) and the fp8 descales (fp32 [H] or null pointers). Under a soft-cap the scores become
    tanh(s * scale / cap) and the softmax scales them by cap * log2 e. scale = 1/sqrt(head_dim); the kernel
    multiplies the factor that holds it by k_descale[h]."""
    from . import _C

    scale = 1.0 / math.sqrt(head_dim)
    if softcap:
        scale_log2, pre2 = softcap * LOG2E, 2.0 * scale * LOG2E / softcap
    else:
        scale_log2, pre2 = scale * LOG2E, 0.0
    lo, hi = (-_C.UNBOUNDED, _C.UNBOUNDED) if shifts is None else shifts
    return [sinks, float(scale_log2), float(pre2), int(lo), int(hi), k_descale, v_descale]


def tail_enabled() -> bool:
    return os.environ.get("MOONMATH_NO_TAIL", "").strip() not in ("1", "true", "on")


def device_cus(device: torch.device) -> int:
    """The CU count the planner sees: the live GPU's on hip, MI300X's 304 on the emulator."""
    if get_backend() == "hip" and device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return MI300X_CUS


def plan(sq: int, skv: int, bh: int, cus: int, enabled: bool | None = None, min_kv_blocks: int | None = None,
         shifts: tuple[int, int] | None = None):
    """The C++ planner's tail KV-split plan (an ``_C.TailPlan``); shifts: the window (window_shifts)."""
    from . import _C

    kw = {} if min_kv_blocks is None else {"min_kv_blocks": int(min_kv_blocks)}
    if shifts is not None:
        kw["lo_shift"], kw["hi_shift"] = shifts
    return _C.plan_tail(sq, skv, bh, cus, tail_enabled() if enabled is None else bool(enabled), **kw)


def dense_order(p, nqb: int, sq: int, skv: int, shifts: tuple[int, int] | None = None) -> list[int]:
    """The feature dense launch's item (w: q block w % nqb of head w // nqb) per workgroup id, heaviest first
    (the C++ planner's ``_C.dense_order``; shifts: the window, None = unbounded)."""
    from . import _C

    return _C.dense_order(p, nqb, sq, skv, *(shifts or (-_C.UNBOUNDED, _C.UNBOUNDED)))


def _strides(t: torch.Tensor, layout: str) -> tuple[int, int, int]:
    """(row, head, batch) strides in bytes; layout only says which of dims 1, 2 is the sequence."""
    sdim, hdim = (1, 2) if layout == "bshd" else (2, 1)
    e = t.element_size()
    return t.stride(sdim) * e, t.stride(hdim) * e, t.stride(0) * e


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layout: str, round_mode: str, *,
        cus: int | None = None, min_kv_blocks: int | None = None, tail: bool | None = None,
        sinks: torch.Tensor | None = None, softcap: float = 0.0, k_descale: torch.Tensor | None = None,
        v_descale: torch.Tensor | None = None, window: tuple[int, int] = (-1, -1)) -> list[dict | None]:
    """Run the forward on the gfx942 kernels (emu or hip backend), writing ``out``.

    ``sinks`` (fp32 [H], validated), ``softcap`` > 0, a bounded ``window`` (flash-attn's (left, right),
    validated, causal folded in as right = 0) or fp8 k/v (with their fp32 [H] descales, validated) select the
    feature kernels ``mha_fwd_feat_<m>`` / ``mha_fwd_split_feat_<m>``; without them the default kernels run.

    ``cus`` (CU count), ``min_kv_blocks`` and ``tail`` override the planner's inputs (tests force splits on
    small grids with them). Returns the launches' emulator counters (emu) or Nones (hip).
    """
    arch = target_arch()
    if arch != ARCH:
        raise NoKernelError(OP, arch, KERNELS.archs_built())
    from . import _C

    # the tile constants of csrc/device/gfx942/mha_config.hpp
    CTA_ROWS, CTA_THREADS, KV_BLOCK = _C.CTA_ROWS, _C.CTA_THREADS, _C.KV_BLOCK
    sdim, hdim = (1, 2) if layout == "bshd" else (2, 1)
    B, H, Sq, Skv, D = q.shape[0], q.shape[hdim], q.shape[sdim], k.shape[sdim], q.shape[3]
    bh = B * H
    nqb, nkb = -(-Sq // CTA_ROWS), -(-Skv // KV_BLOCK)
    fp8 = k.dtype != torch.bfloat16
    qs, ks = _strides(q, layout), _strides(k, layout)
    for name, rows, row in (("q", Sq, qs[0]), ("k", Skv, ks[0]), ("v", Skv, ks[0])):
        if (rows - 1) * row + 2 * D >= _U32:
            raise ValueError(f"{OP}: one head of {name} spans more than 4 GiB ({rows} rows {row} bytes apart); the "
                             f"gfx942 kernel addresses a head's rows with 32-bit buffer offsets")
    if nkb * KV_BLOCK * 2 * D >= _U32:
        raise ValueError(f"{OP}: k/v sequence length {Skv} is too long for the gfx942 kernel's 32-bit V_t offsets "
                         f"(at most {(_U32 - 1) // (2 * D) // KV_BLOCK * KV_BLOCK - 1} rows)")
    if bh >= 1 << 31 or nqb * bh >= 1 << 31:
        raise ValueError(f"{OP}: too many (batch * heads, q blocks) work items for a 1-D grid: {bh} x {nqb}")
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):
        if t.data_ptr() % 16:
            raise ValueError(f"{OP}: {name} must start on a 16-byte boundary for the gfx942 kernel's 16-byte loads "
                             f"and stores; got address {t.data_ptr():#x} (pass a fresh or .clone()d tensor)")
    windowed = window[0] >= 0 or window[1] >= 0
    shifts = window_shifts(window, Sq, Skv) if windowed else None
    p = plan(Sq, Skv, bh, device_cus(q.device) if cus is None else int(cus), tail, min_kv_blocks, shifts)
    featured = sinks is not None or bool(softcap) or windowed or fp8
    dense, split, merge = kernel_names(round_mode, featured, D)
    if fp8 and (k_descale is None or v_descale is None):
        raise ValueError(f"{OP}: fp8 k/v need k_descale and v_descale (fp32 [H]; forward() fills in ones)")
    feat = feature_args(sinks, softcap, D, k_descale, v_descale, shifts) if featured else []
    dev = q.device
    vt = torch.empty(bh * nkb * KV_BLOCK * D, dtype=torch.bfloat16, device=dev)
    if fp8:  # K widened to bf16 rows [B * H][Skv][D] (read by the attention kernels as a bf16 K), V to V_t
        kw = torch.empty(bh * Skv * D, dtype=torch.bfloat16, device=dev)
        counters = [KERNELS.launch(OP, arch, code_object(D), transpose_kernel(D, fp8=True), grid=(nkb, bh), block=256,
                                   args=[k, v, kw, vt, Skv, H, *ks])]
        k, ks = kw, (2 * D, Skv * 2 * D, H * Skv * 2 * D)
    else:
        counters = [KERNELS.launch(OP, arch, code_object(D), transpose_kernel(D), grid=(nkb, bh), block=256,
                                   args=[v, vt, Skv, H, *ks])]
    if p.n_dense:
        # the feature kernels take their items from a table: the most kv blocks first across all heads
        order = [torch.tensor(dense_order(p, nqb, Sq, Skv, shifts), dtype=torch.int32).to(dev)] if featured else []
        counters.append(KERNELS.launch(OP, arch, code_object(D, featured), dense, grid=p.n_dense, block=CTA_THREADS,
                                       args=[q, k, vt, out, Sq, Skv, H, nqb, p.n_dense, *qs, *ks, *feat, *order]))
    if p.tail:
        sched = torch.tensor(_C.split_schedule(p, nqb), dtype=torch.int32).to(dev)
        table = torch.tensor(_C.merge_table(p, nqb), dtype=torch.int32).to(dev)
        ws_o = torch.empty(p.ws_o_floats * D // 128, dtype=torch.float32, device=dev)  # planned for D = 128
        ws_ml = torch.empty(p.ws_ml_floats, dtype=torch.float32, device=dev)
        counters.append(KERNELS.launch(OP, arch, code_object(D, featured), split, grid=p.slots, block=CTA_THREADS,
                                       args=[q, k, vt, ws_o, ws_ml, sched, p.slots, Sq, Skv, H, *qs, *ks, *feat]))
        merge_grid = p.tail * (CTA_ROWS // _C.merge_rows_per_cta(D))
        counters.append(KERNELS.launch(OP, arch, code_object(D), merge, grid=merge_grid, block=256,
                                       args=[ws_o, ws_ml, table, out, Sq, H, *qs, p.tail]))
    return counters
