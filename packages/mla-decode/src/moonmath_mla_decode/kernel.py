"""Launching the MLA decode kernels (csrc/device/: one source for gfx942 and gfx950, the arch's QK MFMA stage in
csrc/device/<arch>/mla_decode_stages.hpp) through moonmath_common's runtime.

Code objects: ``mla_decode_a16w8_ws.hsaco`` (kernel ``mla_decode_a16w8_fwd_ws``, the one decode kernel: an
8-wave warp-specialised workgroup per (request, KV part, group of up to 4 row tiles) that fetches each KV
row once at fp8 width) and ``mla_decode_a16w8_merge.hsaco`` (``mla_decode_merge_*``, one kernel per partial layout: the
fixed-order merge of the parts). The decode kernel takes one by-value ``MlaDecodeArgs``
(csrc/device/mla_decode_args.hpp), whose bytes the host module packs (``_C.pack_mla_decode_args``) and the
launcher passes as a ``StructArg``. The launch
configuration comes from the C++ planner (``_C.plan_mla_decode``) and depends on shapes only (plus
``kv_indices.numel() / B`` as a length hint), so a captured graph replays correctly with new lengths and
page tables.

``make_plan`` turns the planner's choice into a ``DecodePlan`` (grids, merge waves, balanced flag,
workspace sizes): plan once per batch, then ``run(..., plan=, workspace=)`` per layer.

The caller (decode.py) has validated every tensor; this module checks the 32-bit buffer ranges the
kernels build, allocates the split-KV workspace (unless given one), and launches. docs/kernels/mla_decode_gfx942.md has
the design and the planner's cost model; docs/kernels/mla_decode_gfx950.md what differs on gfx950.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import torch

from moonmath_common import target_arch
from moonmath_common.backend import cu_count
from moonmath_common.codeobject import StructArg
from moonmath_common.kernels import KernelSet

OP = "moonmath_mla_decode.mla_decode_a16w8"
ARCHS = ("gfx942", "gfx950")  # archs with decode kernels (the planner has a machine model for each)
WS_CODE_OBJECT, WS_KERNEL = "mla_decode_a16w8_ws", "mla_decode_a16w8_fwd_ws"
WS_BLOCK = 512  # threads per ws workgroup (8 waves)
# Plan layouts: "ws" (the a16w8 decode kernel) and "shared" (the KV-format kernels' 4-wave launch shape,
# formats.py: a workgroup per (request, part, group of up to 4 row tiles), fp32 partials in natural order).
VARIANTS = ("ws", "shared")
# The merge: one kernel per partial layout (merge_kernel_name), so none tests its layout at run time.
MERGE_CODE_OBJECT = "mla_decode_a16w8_merge"
MERGE_KERNELS = ("mla_decode_merge_c1", "mla_decode_merge_c4", "mla_decode_merge_ws_c1", "mla_decode_merge_ws_c4",
                 "mla_decode_merge_ws_half_c1", "mla_decode_merge_ws_half_c4")
LOG2E = 1.0 / math.log(2.0)
FLAG_LSE = 1
FLAG_PARTIAL = 2
FLAG_BALANCED = 4  # parts per request by length (device-side, mla_decode_common.hpp: locate)
FLAG_MERGE_QUARTERS = 8  # merge: 4 column blocks per row, each with its own waves
FLAG_MERGE_MFMA_COLUMNS = 16  # merge: partials in the ws kernel's MFMA column order (mla_decode_common.hpp)
FLAG_MERGE_HALF = 32  # merge: partial O in fp16, normalised by its part's ln (the ws kernel's)
_U32 = 1 << 32

KERNELS = KernelSet("moonmath_mla_decode")


def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def plan(batch: int, heads: int, q_len: int, len_hint: int = 0, arch: str | None = None):
    """The C++ planner's launch configuration (an ``_C.MlaPlan``) for ``arch`` (default: target_arch())."""
    from . import _C

    arch = target_arch() if arch is None else arch
    return _C.plan_mla_decode(batch, heads, q_len, len_hint, arch=arch, cus=cu_count(arch))


@dataclass(frozen=True)
class DecodePlan:
    """Everything a launch needs that depends on shapes only: plan once per batch, run per layer.

    Made by ``make_plan``; pass it (and optionally a workspace from ``workspace``) to ``run`` so a
    captured graph, or every layer of a model, reuses one plan and one workspace with no host work
    beyond argument packing.
    """

    batch: int
    heads: int
    q_len: int
    nparts: int
    variant: str          # "ws" (kernel.run), or "shared": the KV-format kernels' launch shape (formats.py)
    n_rt: int             # 16-row tiles per request
    grid: int             # workgroups of the decode kernel (ws: 512 threads each; shared: 256)
    merge_grid: int       # workgroups of the merge kernel (0: no merge)
    merge_wpr: int        # merge waves per (row, column block) (0: no merge)
    ws_o_floats: int      # partial O: [B * q_len * H, nparts, 512] fp32 (ws: fp16 O / ln, half the floats)
    ws_ml_floats: int     # partial (m, l, ln, 0): [B * q_len * H, nparts, 4] fp32, then [B] u32 request ends
    balanced: bool = False  # the B * nparts parts are shared out by request length on the device
    merge_cs: int = 1       # merge column blocks per row (4: a quarter of the columns per block of waves)
    kv_waves: int = 1       # KV-format kernels (formats.py): 4 = the _kv4 kernel, whose 4 waves split each part
    merge_waves: int = 0    # waves per merge workgroup (0: max(4, merge_wpr)); 1: one (row, quarter) each

    @property
    def merge_block(self) -> int:
        """Threads of a merge workgroup: 4 waves, or one (row, column block)'s merge_wpr waves (8) when more, or
        one wave (merge_waves 1: the planner's one-wave (row, quarter) workgroups)."""
        return 64 * (self.merge_waves or max(4, self.merge_wpr))

    @property
    def merge_flags(self) -> int:
        """The merge kernel's flags for the plan (to OR into its flags argument): its column split, and the
        column order the plan's variant writes its partials in (ws: the MFMA output order, fp16 O / ln)."""
        quarters = FLAG_MERGE_QUARTERS if self.merge_cs == 4 else 0
        half = FLAG_MERGE_HALF if self.variant == "ws" and self.half_partials else 0
        return quarters | half | (FLAG_MERGE_MFMA_COLUMNS if self.variant == "ws" else 0)

    @property
    def merge_kernel(self) -> str:
        """The merge kernel of the plan's partial layout (merge_kernel_name of merge_flags)."""
        return merge_kernel_name(self.merge_flags)

    @property
    def half_partials(self) -> bool:
        """The ws kernel's partial O is fp16 O / ln (up to _C.ws_half_partials' part count), else fp32."""
        from . import _C

        return self.variant == "ws" and bool(_C.ws_half_partials(self.nparts))

    @property
    def merge_lds(self) -> int:
        """Dynamic LDS bytes of a merge workgroup: the published state of every wave but the first (wpr > 1)."""
        return (self.merge_block // 64 - 1) * (512 + 4) * 4 if self.merge_wpr > 1 else 0

    @property
    def workspace_floats(self) -> int:
        return self.ws_o_floats + self.ws_ml_floats

    def workspace(self, device: torch.device | str = "cpu") -> torch.Tensor | None:
        """A workspace for this plan (None when the plan does not split)."""
        if not self.workspace_floats:
            return None
        return torch.empty(self.workspace_floats, dtype=torch.float32, device=device)


def make_plan(batch: int, heads: int, q_len: int, len_hint: int = 0, *, nparts: int | None = None,
              variant: str | None = None, balanced: bool | None = None, arch: str | None = None) -> DecodePlan:
    """The launch configuration for shapes (B, H, q_len) and a tokens-per-request hint; ``nparts`` and
    ``variant`` override the planner's choice (tests, benchmarks). ``balanced`` (default: the planner's
    rule, _C.balance_split: 1 < B <= 64 and the plan splits) shares the B * nparts parts among the
    requests by their device-resident lengths instead of nparts each. ``arch`` (default: target_arch())
    picks the planner's machine model (CUs, clock, bandwidth, measured cycles per tile)."""
    from . import _C

    p_arch = target_arch() if arch is None else arch
    p = plan(batch, heads, q_len, len_hint, p_arch)
    np_ = p.nparts if nparts is None else int(nparts)
    if np_ < 1:
        raise ValueError(f"{OP}: nparts must be >= 1; got {np_}")
    variant = p.variant if variant is None else variant
    if variant not in VARIANTS:
        raise ValueError(f"{OP}: variant must be one of {VARIANTS}; got {variant!r}")
    n_rt, rows = p.n_rt, q_len * heads
    grid = batch * np_ * -(-n_rt // 4)  # a workgroup per (request, part, group of up to 4 row tiles)
    split = np_ > 1
    # the merge spread over the CUs (the planner's spread_merge_shape: the shape it priced)
    cus = cu_count(p_arch)
    cs, wpr, merge_grid = _C.mla_spread_merge_shape(batch * rows, np_, cus, p_arch) if split else (1, 0, 0)
    merge_waves = _C.mla_spread_merge_block_waves(batch * rows, np_, cus, p_arch) if split else 0
    balanced = _C.balance_split(batch, np_) if balanced is None else bool(balanced) and split
    o_words = 256 if variant == "ws" and _C.ws_half_partials(np_) else 512   # fp16 partials: half the words
    return DecodePlan(batch, heads, q_len, np_, variant, n_rt, grid, merge_grid, wpr,
                      batch * rows * np_ * o_words if split else 0,
                      batch * rows * np_ * 4 + batch if split else 0, balanced, cs, merge_waves=merge_waves)


def _magic_div(d: int) -> tuple[int, int]:
    """(mul, shift) of the merge kernel's MagicDiv for divisor d (1 <= d < 2^32): floor(n / d) =
    (t + ((n - t) >> s1)) >> s2 with t = mulhi(n, mul), shift = s1 | s2 << 8 (Granlund and Montgomery's
    round-up multiplier, exact for every 32-bit n)."""
    if not 1 <= d < 1 << 32:
        raise ValueError(f"{OP}: divisor {d} out of range")
    ell = (d - 1).bit_length()
    mul = ((1 << 32) * ((1 << ell) - d)) // d + 1
    return mul, min(ell, 1) | max(ell - 1, 0) << 8


def merge_kernel_name(flags: int) -> str:
    """The merge kernel for partials laid out as `flags` say (FLAG_MERGE_*): the ws kernel's MFMA column order
    (and its fp16 O / ln), else natural order in fp32; one or four column blocks a row."""
    if flags & FLAG_MERGE_HALF and not flags & FLAG_MERGE_MFMA_COLUMNS:
        raise ValueError(f"{OP}: fp16 partials are the ws kernel's only (FLAG_MERGE_MFMA_COLUMNS)")
    return ("mla_decode_merge" + ("_ws" if flags & FLAG_MERGE_MFMA_COLUMNS else "")
            + ("_half" if flags & FLAG_MERGE_HALF else "") + ("_c4" if flags & FLAG_MERGE_QUARTERS else "_c1"))


def merge_args(plan: DecodePlan, B: int, rows_req: int, ws_o, ws_ml, o_lat, lse, flags: int, o_scale_bits: int,
               seq_lens, glen_arg, kv_indptr, n_idx: int, q_len: int, cp_rank: int, cp_world: int, kv_dev) -> list:
    """The merge kernel's arguments for `plan` (mla_decode_a16w8_merge.hip): its shape as log2 of the waves per
    (row, column block) and per workgroup (both powers of two), grid / 8 for the XCD order, and the rows per
    request with their division multiplier, so the kernel's prologue only shifts and multiplies."""
    waves = plan.merge_block // 64
    for name, v in (("merge_wpr", plan.merge_wpr), ("merge waves", waves)):
        if v < 1 or v & (v - 1):
            raise ValueError(f"{OP}: {name} must be a power of two; got {v}")
    if plan.merge_wpr > waves:
        raise ValueError(f"{OP}: merge_wpr {plan.merge_wpr} exceeds the workgroup's {waves} waves")
    mul, shift = _magic_div(rows_req)
    return [ws_o, ws_ml, o_lat, lse, B * rows_req, plan.nparts, flags, o_scale_bits,
            plan.merge_wpr.bit_length() - 1, waves.bit_length() - 1, plan.merge_grid // 8, rows_req, mul, shift,
            seq_lens, glen_arg, kv_indptr, n_idx, B, q_len, cp_rank, cp_world, kv_dev]


def _address(t: torch.Tensor | None) -> int:
    """A pointer field of MlaDecodeArgs: the tensor's device address (0 for none)."""
    return 0 if t is None else t.data_ptr()


def _check_ranges(**sizes: int) -> None:
    """Buffers the kernels address with 32-bit byte offsets (q_lat, q_pe, o_lat, lse, the workspace).

    The pool and kv_indices are not among them: the pool is a structured buffer of 576-byte records
    (see _check_pool_slots) and each request's kv_indices run is its own buffer.
    """
    for name, nbytes in sizes.items():
        if nbytes >= _U32:
            raise ValueError(f"{OP}: {name} spans {nbytes} bytes; the kernel addresses it with 32-bit "
                             f"byte offsets (at most {_U32 - 1} bytes)")


def _check_pool_slots(slots: int) -> None:
    """The pool's record count must fit the buffer descriptor's 32-bit num_records (pools up to ~2.4 TB)."""
    if slots >= _U32:
        raise ValueError(f"{OP}: kv_pool has {slots} slots; the kernel addresses the pool as 576-byte "
                         f"records with a 32-bit record count (at most {_U32 - 1} slots)")


def _usable_indices(n_idx: int) -> int:
    """kv_indices entries the kernel can reach: kv_indptr is int32, so entries past 2^31 - 1 never are."""
    return min(n_idx, (1 << 31) - 1)


def _check_alignment(**tensors: torch.Tensor | None) -> None:
    for name, t in tensors.items():
        if t is not None and t.data_ptr() % 16:
            raise ValueError(f"{OP}: {name} must start on a 16-byte boundary for the kernel's 16-byte "
                             f"loads and stores; got address {t.data_ptr():#x} (pass a fresh or .clone()d tensor)")


def run(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, o_lat: torch.Tensor, seq_lens: torch.Tensor,
        kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float, kv_scale: float | torch.Tensor,
        lse: torch.Tensor | None = None, glen: torch.Tensor | None = None, cp_rank: int = 0, cp_world: int = 1,
        nparts: int | None = None, variant: str | None = None, *, plan: DecodePlan | None = None,
        workspace: torch.Tensor | None = None, balanced: bool | None = None) -> list[dict | None]:
    """Run mla_decode_a16w8 on the gfx942 / gfx950 kernels (emu or hip backend). Writes o_lat (and lse) in place.

    Tensors as in decode.mla_decode_a16w8 (already validated); ``kv_scale`` a float, or a one-element fp32
    device tensor that the kernels read on the device (no host read). ``nparts`` overrides the planner's KV split
    (tests and benchmarks); the result does not depend on it beyond fp32 rounding. ``variant`` must be
    None or "ws" (the one decode kernel: 8 specialised waves per up to 4 row tiles, each KV row fetched once
    at fp8 width and widened once into LDS; "shared" plans are the KV-format kernels', formats.py). ``plan`` (from
    ``make_plan``, for these B, H, q_len) replaces planning on every call; ``workspace`` (fp32, contiguous,
    on the device, at least ``plan.workspace_floats``) replaces the per-call allocation. Returns the
    launches' emulator counters (emu) or Nones (hip).
    """
    arch = target_arch()
    if arch not in ARCHS:
        from moonmath_common import NoKernelError

        raise NoKernelError(OP, arch, KERNELS.archs_built())
    from . import _C

    T, H, _ = q_lat.shape
    B = kv_indptr.numel() - 1
    q_len = T // B
    if plan is None:
        plan = make_plan(B, H, q_len, kv_indices.numel() // B, nparts=nparts, variant=variant, balanced=balanced,
                         arch=arch)
    elif (plan.batch, plan.heads, plan.q_len) != (B, H, q_len):
        raise ValueError(f"{OP}: plan is for B={plan.batch}, H={plan.heads}, q_len={plan.q_len}; the call has "
                         f"B={B}, H={H}, q_len={q_len}")
    elif nparts is not None or variant is not None or balanced is not None:
        raise ValueError(f"{OP}: pass nparts / variant / balanced to make_plan, not with a plan")
    if plan.variant != "ws":
        raise ValueError(f"{OP}: variant must be 'ws' (the a16w8 decode kernel); got {plan.variant!r}")
    rows = q_len * H
    partial = plan.nparts > 1
    _check_ranges(q_lat=q_lat.numel() * 2, workspace=plan.ws_o_floats * 4)
    _check_pool_slots(kv_pool.shape[0])
    _check_alignment(q_lat=q_lat, q_pe=q_pe, kv_pool=kv_pool, o_lat=o_lat)
    dev = q_lat.device
    ws_o = ws_ml = None
    if partial:
        if workspace is None:
            workspace = plan.workspace(dev)
        elif not isinstance(workspace, torch.Tensor):
            raise TypeError(f"{OP}: workspace must be a torch.Tensor; got {type(workspace).__name__}")
        elif (workspace.dtype != torch.float32 or not workspace.is_contiguous() or workspace.device != dev
              or workspace.numel() < plan.workspace_floats):
            raise ValueError(f"{OP}: workspace must be a contiguous float32 tensor on {dev} with at least "
                             f"{plan.workspace_floats} elements; got {workspace.dtype} {list(workspace.shape)} on "
                             f"{workspace.device}")
        _check_alignment(workspace=workspace)
        flat = workspace.view(-1)
        ws_o = flat[:plan.ws_o_floats]
        ws_ml = flat[plan.ws_o_floats:plan.workspace_floats]
    glen_arg = glen if (cp_world > 1 and glen is not None) else seq_lens
    bal = FLAG_BALANCED if plan.balanced else 0
    flags = (FLAG_LSE if lse is not None else 0) | (FLAG_PARTIAL if partial else 0) | bal
    flags |= FLAG_MERGE_HALF if partial and plan.half_partials else 0  # the ws kernel's partial format
    if isinstance(kv_scale, torch.Tensor):  # device-resident (decode.py checked it): the kernels read it
        kv_dev, c_qk, o_scale = kv_scale, 0, 0
    else:
        kv_dev = None
        c_qk = _f32_bits(float(scale) * float(kv_scale) * LOG2E)
        o_scale = _f32_bits(float(kv_scale))
    scale_log2e = _f32_bits(float(scale) * LOG2E)
    buffers = (q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, glen_arg, lse, ws_o, ws_ml, kv_dev)
    args = StructArg(_C.pack_mla_decode_args(*(_address(t) for t in buffers), B, H, q_len, plan.nparts,
                                             kv_pool.shape[0], _usable_indices(kv_indices.numel()), cp_rank,
                                             cp_world, flags, c_qk, o_scale, scale_log2e), buffers)
    counters = [KERNELS.launch(OP, arch, WS_CODE_OBJECT, WS_KERNEL, grid=plan.grid, block=WS_BLOCK,
                               args=[args])]
    if partial:
        counters.append(KERNELS.launch(OP, arch, MERGE_CODE_OBJECT, plan.merge_kernel, grid=plan.merge_grid,
                                       block=plan.merge_block, dynamic_lds=plan.merge_lds,
                                       args=merge_args(plan, B, rows, ws_o, ws_ml, o_lat, lse,
                                                       (FLAG_LSE if lse is not None else 0) | bal | plan.merge_flags,
                                                       o_scale, seq_lens, glen_arg, kv_indptr,
                                                       _usable_indices(kv_indices.numel()), q_len, cp_rank, cp_world,
                                                       kv_dev)))
    return counters
