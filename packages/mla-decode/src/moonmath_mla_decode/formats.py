"""MLA absorbed decode in the KV-cache formats beyond a16w8: one op per cache dtype, so a serving engine picks
the op by the dtype of its cache.

    mla_decode_a16w16   bf16 Q x bf16 KV [slots, 1, 576]                         gfx942, gfx950
    mla_decode_mxfp4    bf16 Q x MXFP4 KV [slots, 1, 288] fp4x2 + E8M0 [slots, 1, 18]   gfx950
    mla_decode_a8w8     fp8 Q (per-tensor, quantised on the device) x fp8 KV [slots, 1, 576]  gfx950

Same op semantics as mla_decode_a16w8 (any q_len, H 1..128, page_size 1 slot lists, DCP with base-2 LSE,
end-aligned causal window, empty windows, determinism); only the pool and its dequantisation differ
(docs/numerics.md). The kernels are the LDS-tile kernels (csrc/device/mla_decode_lds_tile.hpp and the format
files) over the planner (each kernel with its own row of its cost table; on gfx950 with one row tile it picks
the one-wave or the _kv4 kernel, whose 4 waves split each part) and the a16w8 split-KV merge kernel.
"""
from __future__ import annotations

import math
import struct

import torch

from moonmath_common import NoKernelError, checks, get_backend, target_arch

from . import reference
from .decode import KV_LORA_RANK, ROW, _check_common

MXFP4_ROW_BYTES = ROW // 2          # two E2M1 codes per byte
MXFP4_BLOCK = 32                    # elements per E8M0 scale
MXFP4_SCALES = ROW // MXFP4_BLOCK   # 18 per row
LOG2E = 1.0 / math.log(2.0)
FLAG_LSE, FLAG_PARTIAL, FLAG_BALANCED = 1, 2, 4
_U32 = 1 << 32

# format -> (archs with a kernel, code object, kernel symbol, pool record bytes)
FORMATS = {
    "a16w16": (("gfx942", "gfx950"), "mla_decode_a16w16", "mla_decode_a16w16_fwd", 2 * ROW),
    "mxfp4": (("gfx950",), "mla_decode_mxfp4", "mla_decode_mxfp4_fwd", MXFP4_ROW_BYTES),
    "a8w8": (("gfx950",), "mla_decode_a8w8", "mla_decode_a8w8_fwd", ROW),
}
# AMAX_MAX_BLOCKS: the a8w8 decode reduces at most this many maxima (its kMaxAmaxParts)
AMAX_CODE_OBJECT, AMAX_MAX_BLOCKS = "mla_q_amax", 256
# mla_q_amax_r<R>: the rows per wave and round its kernels are built for (mla_q_amax.hip)
AMAX_ROWS_PER_WAVE = (1, 2, 3, 4, 6, 8, 12, 16)
# formats with a gfx950 `_kv4` kernel: one row tile, a workgroup of 4 one-wave decoders per (request, part), each
# over a quarter of the part, merged in LDS (mla_decode_lds_tile.hpp, KvSplit)
KV_SPLIT_FORMATS = ("a8w8", "a16w16", "mxfp4")
KV_SPLIT_WAVES = 4


def _op(fmt: str) -> str:
    return f"moonmath_mla_decode.mla_decode_{fmt}"


def _require_arch(fmt: str, name: str, want: str) -> None:
    """A pool whose format has no kernel on the target arch is rejected by name (not silently re-routed)."""
    archs = FORMATS[fmt][0]
    arch = target_arch()
    if get_backend() != "reference" and arch not in archs:
        raise TypeError(f"{name}: {want} KV (mla_decode_{fmt}) has kernels for {', '.join(archs)} only; the "
                        f"target arch is {arch}")


def _write_reference(o_lat: torch.Tensor, lse: torch.Tensor | None, result) -> None:
    """The reference backend's (o, lse) into the op's outputs."""
    o, l = result
    o_lat.copy_(o)
    if lse is not None:
        lse.copy_(l)


def mla_decode_a16w16(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, o_lat: torch.Tensor,
                      seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float,
                      lse: torch.Tensor | None = None, glen: torch.Tensor | None = None, cp_rank: int = 0,
                      cp_world: int = 1) -> None:
    """MLA absorbed decode against a bf16 KV cache: writes ``o_lat`` (and ``lse``) in place.

    Args:
        q_lat: bf16 ``[T, H, 512]`` contiguous, the absorbed latent queries; T = B * q_len, request b owns
            rows [b*q_len, (b+1)*q_len). H in 1..128.
        q_pe: bf16 ``[T, H, 64]`` contiguous, the RoPE queries.
        kv_pool: bf16 ``[slots, 1, 576]`` contiguous: one fused row per token ([:512] latent, [512:] rope),
            both key and value, used as stored (no scale).
        o_lat: bf16 ``[T, H, 512]`` contiguous, the output (written in place).
        seq_lens: int32 ``[B]``: KV rows of each request on this rank (including the q_len draft tokens).
        kv_indices: int32 ``[N]``: pool slots (page_size 1); local row j of request b is slot
            kv_indices[kv_indptr[b] + j].
        kv_indptr: int32 ``[B + 1]``; B = kv_indptr.numel() - 1.
        scale: softmax scale applied to q . k (e.g. 576 ** -0.5): a Python float, a numpy scalar or a
            one-element CPU tensor, within fp32.
        lse: optional fp32 ``[T, H]`` contiguous: base-2 log-sum-exp of the scaled scores (-inf if empty).
        glen: int32 ``[B]`` global lengths, required when cp_world > 1 (ignored when cp_world == 1).
        cp_rank, cp_world: decode context parallelism: global position p lives on rank p % cp_world at
            local row p // cp_world.

    Semantics, windows, DCP and index checks are mla_decode_a16w8's with kv_scale = 1 and the pool read as
    bf16: nothing is quantised but the softmax weights P (bf16, for the PV MFMA) and o (bf16 RTNE).
    Kernels for gfx942 and gfx950.
    """
    checks.tensor("kv_pool", kv_pool, dtype=torch.bfloat16, ndim=3, contiguous=True)
    if kv_pool.shape[1] != 1 or kv_pool.shape[2] != ROW:
        raise ValueError(f"kv_pool must be [slots, 1, {ROW}] (page_size 1, fused latent+rope rows); got "
                         f"{list(kv_pool.shape)}")
    scale, _ = _check_common(q_lat, q_pe, o_lat, seq_lens, kv_indices, kv_indptr, scale, lse, glen, cp_rank,
                             cp_world, kv_pool=kv_pool)
    _a16w16_op(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale, lse, glen, cp_rank, cp_world)


@torch.library.custom_op("moonmath::mla_decode_a16w16", mutates_args=("o_lat", "lse"))
def _a16w16_op(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, o_lat: torch.Tensor,
               seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float,
               lse: torch.Tensor | None, glen: torch.Tensor | None, cp_rank: int, cp_world: int) -> None:
    if get_backend() == "reference":
        _write_reference(o_lat, lse, reference.mla_decode_a16w16(q_lat, q_pe, kv_pool, seq_lens, kv_indices,
                                                                  kv_indptr, scale, glen, cp_rank, cp_world))
    else:
        run("a16w16", q_lat, q_pe, kv_pool, None, o_lat, seq_lens, kv_indices, kv_indptr, scale * LOG2E, 1.0, lse,
            glen, cp_rank, cp_world)


@_a16w16_op.register_fake
def _(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale, lse, glen, cp_rank, cp_world) -> None:
    return None


MXFP4_POOL_DTYPES = (torch.uint8, torch.float4_e2m1fn_x2)
MXFP4_SCALE_DTYPES = (torch.uint8, torch.float8_e8m0fnu)


def _check_mxfp4(kv_pool: torch.Tensor, kv_scales: torch.Tensor) -> None:
    checks.tensor("kv_pool", kv_pool, dtype=MXFP4_POOL_DTYPES, ndim=3, contiguous=True)
    if kv_pool.shape[1] != 1 or kv_pool.shape[2] != MXFP4_ROW_BYTES:
        raise ValueError(f"kv_pool must be [slots, 1, {MXFP4_ROW_BYTES}] (576 E2M1 codes, two per byte; page_size 1); "
                         f"got {list(kv_pool.shape)}")
    checks.tensor("kv_scales", kv_scales, dtype=MXFP4_SCALE_DTYPES, contiguous=True)
    if kv_scales.dim() not in (2, 3) or (kv_scales.dim() == 3 and kv_scales.shape[1] != 1):
        raise ValueError(f"kv_scales must be [rows, blocks] or [rows, 1, blocks]; got {list(kv_scales.shape)}")
    rows, blocks = kv_scales.shape[0], kv_scales.shape[-1]
    if rows < kv_pool.shape[0] or blocks < MXFP4_SCALES:
        raise ValueError(f"kv_scales must hold one E8M0 scale per 32 elements of every pool row: at least "
                         f"[{kv_pool.shape[0]}, {MXFP4_SCALES}] (padding allowed); got {list(kv_scales.shape)}")
    if kv_scales.numel() >= _U32:
        raise ValueError(f"kv_scales spans {kv_scales.numel()} bytes; the kernel addresses it with 32-bit offsets")


def mla_decode_mxfp4(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, kv_scales: torch.Tensor,
                     o_lat: torch.Tensor, seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor,
                     scale: float, lse: torch.Tensor | None = None, glen: torch.Tensor | None = None,
                     cp_rank: int = 0, cp_world: int = 1) -> None:
    """MLA absorbed decode against an MXFP4 KV cache (bf16 Q): writes ``o_lat`` (and ``lse``) in place.

    Args:
        q_lat: bf16 ``[T, H, 512]`` contiguous, the absorbed latent queries; T = B * q_len. H in 1..128.
        q_pe: bf16 ``[T, H, 64]`` contiguous, the RoPE queries.
        kv_pool: uint8 or ``float4_e2m1fn_x2`` ``[slots, 1, 288]`` contiguous: one fused row of 576 E2M1 codes
            per token, two per byte (element 2b in the low nibble of byte b), key and value at once.
        kv_scales: uint8 or ``float8_e8m0fnu`` ``[rows, blocks]`` or ``[rows, 1, blocks]`` contiguous, rows >=
            slots and blocks >= 18: the E8M0 scale 2^(e-127) of elements [32k, 32k+32) of slot s's row is
            kv_scales[s, k] (the GPU MODE amd-mixed-mla layout; padded rows / blocks are never read).
        o_lat: bf16 ``[T, H, 512]`` contiguous, the output (written in place).
        seq_lens: int32 ``[B]``: KV rows of each request on this rank (including the q_len draft tokens).
        kv_indices: int32 ``[N]``: pool slots (page_size 1); local row j of request b is slot
            kv_indices[kv_indptr[b] + j].
        kv_indptr: int32 ``[B + 1]``; B = kv_indptr.numel() - 1.
        scale: softmax scale applied to q . k (e.g. 576 ** -0.5), within fp32.
        lse: optional fp32 ``[T, H]`` contiguous: base-2 log-sum-exp of the scaled scores (-inf if empty).
        glen: int32 ``[B]`` global lengths, required when cp_world > 1 (ignored when cp_world == 1).
        cp_rank, cp_world: decode context parallelism: global position p lives on rank p % cp_world at
            local row p // cp_world.

    Semantics as mla_decode_a16w8 over the exactly dequantised rows (code x scale); P is rounded to bf16 for
    the PV MFMA and o to bf16 RTNE. Kernel for gfx950 (a gfx942 target is a TypeError naming kv_pool).
    """
    _check_mxfp4(kv_pool, kv_scales)
    _require_arch("mxfp4", "kv_pool", "MXFP4")
    scale, _ = _check_common(q_lat, q_pe, o_lat, seq_lens, kv_indices, kv_indptr, scale, lse, glen, cp_rank,
                             cp_world, kv_pool=kv_pool, kv_scales=kv_scales)
    _mxfp4_op(q_lat, q_pe, kv_pool.view(torch.uint8), kv_scales.view(torch.uint8), o_lat, seq_lens, kv_indices,
              kv_indptr, scale, lse, glen, cp_rank, cp_world)


@torch.library.custom_op("moonmath::mla_decode_mxfp4", mutates_args=("o_lat", "lse"))
def _mxfp4_op(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, kv_scales: torch.Tensor,
              o_lat: torch.Tensor, seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor,
              scale: float, lse: torch.Tensor | None, glen: torch.Tensor | None, cp_rank: int, cp_world: int) -> None:
    if get_backend() == "reference":
        _write_reference(o_lat, lse, reference.mla_decode_mxfp4(q_lat, q_pe, kv_pool, kv_scales, seq_lens, kv_indices,
                                                                 kv_indptr, scale, glen, cp_rank, cp_world))
    else:
        run("mxfp4", q_lat, q_pe, kv_pool, kv_scales, o_lat, seq_lens, kv_indices, kv_indptr, scale * LOG2E, 1.0, lse,
            glen, cp_rank, cp_world)


@_mxfp4_op.register_fake
def _(q_lat, q_pe, kv_pool, kv_scales, o_lat, seq_lens, kv_indices, kv_indptr, scale, lse, glen, cp_rank,
      cp_world) -> None:
    return None


def mla_decode_a8w8(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, o_lat: torch.Tensor,
                    seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float,
                    kv_scale: float, lse: torch.Tensor | None = None, glen: torch.Tensor | None = None,
                    cp_rank: int = 0, cp_world: int = 1) -> None:
    """MLA absorbed decode, fp8 Q x fp8 KV (the GPU MODE amd-mixed-mla reference's numerics): writes ``o_lat``
    (and ``lse``) in place. Q is given in bf16 and quantised per tensor on the device (no host sync).

    Args:
        q_lat: bf16 ``[T, H, 512]`` contiguous, the absorbed latent queries; T = B * q_len. H in 1..128.
        q_pe: bf16 ``[T, H, 64]`` contiguous, the RoPE queries. q_lat and q_pe together are quantised to
            e4m3fn at one scale, max |q| / 448, computed on the device.
        kv_pool: OCP ``float8_e4m3fn`` ``[slots, 1, 576]`` contiguous: one fused row per token, key and value,
            at the one per-tensor ``kv_scale``.
        o_lat: bf16 ``[T, H, 512]`` contiguous, the output (written in place).
        seq_lens: int32 ``[B]``: KV rows of each request on this rank (including the q_len draft tokens).
        kv_indices: int32 ``[N]``: pool slots (page_size 1); local row j of request b is slot
            kv_indices[kv_indptr[b] + j].
        kv_indptr: int32 ``[B + 1]``; B = kv_indptr.numel() - 1.
        scale: softmax scale applied to q . k (e.g. 576 ** -0.5). kv_scale: the pool's dequant scale. Each
            a Python float, a numpy scalar or a one-element CPU tensor, within fp32.
        lse: optional fp32 ``[T, H]`` contiguous: base-2 log-sum-exp of the scaled scores (-inf if empty).
        glen: int32 ``[B]`` global lengths, required when cp_world > 1 (ignored when cp_world == 1).
        cp_rank, cp_world: decode context parallelism: global position p lives on rank p % cp_world at
            local row p // cp_world.

    Semantics as mla_decode_a16w8 with Q quantised and P rounded to e4m3fn against the running max of 32-row
    KV tiles (reference.mla_decode_a8w8, docs/numerics.md). Kernel for gfx950 (a gfx942 target is a TypeError naming
    kv_pool: its fp8 is e4m3fnuz).
    """
    checks.tensor("kv_pool", kv_pool, dtype=torch.float8_e4m3fn, ndim=3, contiguous=True)
    if kv_pool.shape[1] != 1 or kv_pool.shape[2] != ROW:
        raise ValueError(f"kv_pool must be [slots, 1, {ROW}] (page_size 1, fused latent+rope rows); got "
                         f"{list(kv_pool.shape)}")
    _require_arch("a8w8", "kv_pool", "fp8 Q x OCP e4m3fn")
    kv_scale = checks.real("kv_scale", kv_scale, fp32=True)
    scale, _ = _check_common(q_lat, q_pe, o_lat, seq_lens, kv_indices, kv_indptr, scale, lse, glen, cp_rank,
                             cp_world, kv_pool=kv_pool)
    _a8w8_op(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale, kv_scale, lse, glen, cp_rank,
             cp_world)


@torch.library.custom_op("moonmath::mla_decode_a8w8", mutates_args=("o_lat", "lse"))
def _a8w8_op(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, o_lat: torch.Tensor,
             seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float, kv_scale: float,
             lse: torch.Tensor | None, glen: torch.Tensor | None, cp_rank: int, cp_world: int) -> None:
    if get_backend() == "reference":
        _write_reference(o_lat, lse, reference.mla_decode_a8w8(q_lat, q_pe, kv_pool, seq_lens, kv_indices, kv_indptr,
                                                                scale, kv_scale, glen, cp_rank, cp_world))
    else:
        run("a8w8", q_lat, q_pe, kv_pool, None, o_lat, seq_lens, kv_indices, kv_indptr, scale * kv_scale * LOG2E,
            kv_scale, lse, glen, cp_rank, cp_world)


@_a8w8_op.register_fake
def _(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale, kv_scale, lse, glen, cp_rank,
      cp_world) -> None:
    return None


# ---- launching ------------------------------------------------------------------------------------------

def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _format_args(fmt: str, pool_aux) -> tuple[list, list]:
    """The format's kernel arguments beside the pool (after it, and after o_scale): mxfp4's scale matrix, its
    row stride (bytes) and size."""
    if fmt == "mxfp4":
        return [pool_aux], [pool_aux.shape[-1], pool_aux.numel()]
    return [], []


def amax_launch_shape(rows: int) -> tuple[int, int, int]:
    """mla_q_amax's launch for a Q of `rows` query rows (q_lat 1024 and q_pe 128 bytes each): (its one-wave
    workgroups, rows per round (the kernel mla_q_amax_r<R>), rounds per wave): the fewest rows per wave that keep
    the workgroups within AMAX_MAX_BLOCKS (the partials the decode reduces), one per CU's share of HBM, rounded
    up to a built R, or R 16 in as many rounds as needed."""
    need = -(-rows // AMAX_MAX_BLOCKS)
    R = next((r for r in AMAX_ROWS_PER_WAVE if r >= need), None)
    if R is not None:
        return -(-rows // R), R, 1
    R = AMAX_ROWS_PER_WAVE[-1]
    rounds = -(-need // R)
    return -(-rows // (R * rounds)), R, rounds


def _q_amax(op: str, arch: str, q_lat, q_pe) -> tuple[torch.Tensor, int, list]:
    """a8w8's first launch (mla_q_amax.hip), on the device: per-workgroup maxima of |q| over q_lat and q_pe, which
    every decode workgroup reduces before quantising its own Q tile. Returns (the maxima, their count, the
    launch's counters)."""
    from . import kernel as mk

    rows = q_lat.numel() // KV_LORA_RANK
    blocks, R, rounds = amax_launch_shape(rows)
    parts = torch.empty(blocks, dtype=torch.float32, device=q_lat.device)
    counters = [mk.KERNELS.launch(op, arch, AMAX_CODE_OBJECT, f"mla_q_amax_r{R}", grid=blocks, block=64,
                                  args=[q_lat, q_pe, parts, rows, rounds])]
    return parts, blocks, counters


def cost_kernel(fmt: str, heads: int, q_len: int, arch: str) -> str:
    """The planner's cost-table row of format ``fmt``'s launch: gfx950's one-wave kernel (``<fmt>_w1``) for one
    16-row tile per request, else the 4-wave kernel (``<fmt>``)."""
    return fmt + ("_w1" if arch == "gfx950" and q_len * heads <= 16 else "")


def cost_kernels(fmt: str, heads: int, q_len: int, arch: str) -> dict[int, str]:
    """The launches the planner chooses between for format ``fmt``: {kv_waves: cost-table row}: cost_kernel's,
    and on gfx950 with one row tile the ``_kv4`` kernel's (``<fmt>_kv4``) for the KV_SPLIT_FORMATS."""
    rows = {1: cost_kernel(fmt, heads, q_len, arch)}
    if fmt in KV_SPLIT_FORMATS and arch == "gfx950" and q_len * heads <= 16:
        rows[KV_SPLIT_WAVES] = f"{fmt}_kv{KV_SPLIT_WAVES}"
    return rows


def make_plan(fmt: str, batch: int, heads: int, q_len: int, len_hint: int = 0, *, nparts: int | None = None,
              balanced: bool | None = None, arch: str | None = None, kv_waves: int | None = None):
    """The launch configuration of format ``fmt``'s kernel (a ``kernel.DecodePlan``, variant "shared"): its kernel
    (``kv_waves``: 1, or 4 for the ``_kv4`` kernel where the format has one) and parts chosen by the planner over
    each kernel's own cost row (``_C.plan_mla_format_parts``: its cycles per tile and part, its bytes per token,
    a8w8's Q amax launch; the cheaper modelled launch wins); ``nparts`` / ``kv_waves`` override them (tests,
    benchmarks)."""
    from . import _C
    from . import kernel as mk

    arch = target_arch() if arch is None else arch
    rows = cost_kernels(fmt, heads, q_len, arch)
    if kv_waves is not None and kv_waves not in rows:
        raise ValueError(f"kv_waves must be one of {sorted(rows)} for mla_decode_{fmt} at H={heads}, q_len={q_len} on "
                         f"{arch}; got {kv_waves!r}")
    cus = mk.cu_count(arch)
    choices = {}
    for w, row in rows.items():
        if kv_waves is not None and w != kv_waves:
            continue
        if nparts is None:
            choices[w] = _C.plan_mla_format_parts(row, batch, heads, q_len, len_hint, cus=cus, arch=arch)
        else:
            choices[w] = (nparts, _C.mla_format_plan_cost(row, batch, heads, q_len, max(len_hint, 1), nparts, cus=cus,
                                                          arch=arch))
    w = min(choices, key=lambda k: (choices[k][1], k))
    plan = mk.make_plan(batch, heads, q_len, len_hint, nparts=choices[w][0], variant="shared", balanced=balanced,
                        arch=arch)
    if w != 1:
        import dataclasses
        plan = dataclasses.replace(plan, kv_waves=w)
    return spread_merge(plan, cus, arch)


def spread_merge(plan, cus: int, arch: str):
    """``plan`` with its merge spread until its workgroups fill ``cus`` CUs, where the a16w8 rule (by nparts
    alone) leaves CUs idle: a quarter of the columns per block of waves (cs 4), then twice the waves per (row,
    quarter) up to 8 and to one wave per 4 parts (the planner's spread_merge_shape, which also prices it when it
    picks nparts). At (4, 1024) a8w8 (22 parts, 64 rows) 32 workgroups of 2 rows become 256 of a (row, quarter)."""
    import dataclasses

    from . import _C

    if plan.nparts <= 1:
        return plan
    rows = plan.batch * plan.q_len * plan.heads
    cs, wpr, grid = _C.mla_spread_merge_shape(rows, plan.nparts, cus, arch)
    waves = _C.mla_spread_merge_block_waves(rows, plan.nparts, cus, arch)
    if (cs, wpr, grid, waves) == (plan.merge_cs, plan.merge_wpr, plan.merge_grid, plan.merge_waves):
        return plan
    return dataclasses.replace(plan, merge_cs=cs, merge_wpr=wpr, merge_grid=grid, merge_waves=waves)


def run(fmt: str, q_lat, q_pe, kv_pool, pool_aux, o_lat, seq_lens, kv_indices, kv_indptr, c_qk: float,
        o_scale: float, lse=None, glen=None, cp_rank: int = 0, cp_world: int = 1, *, nparts: int | None = None,
        plan=None, workspace: torch.Tensor | None = None, balanced: bool | None = None,
        kv_waves: int | None = None) -> list[dict | None]:
    """Launch format ``fmt``'s decode kernel and, when the plan splits KV, the a16w8 split merge.

    Tensors validated by the op. ``c_qk``: the factor from q . c to the exp2-domain score (scale * log2 e, times
    the pool's per-tensor scale); ``o_scale``: the factor of o. ``nparts`` / ``balanced`` / ``kv_waves`` override
    the planner (tests); ``plan`` (make_plan(fmt, ...)) and ``workspace`` as kernel.run's.
    Returns the launches' emulator counters (emu) or Nones (hip).
    """
    from . import kernel as mk

    archs, code_object, kernel_name, record = FORMATS[fmt]
    op = _op(fmt)
    arch = target_arch()
    if arch not in archs:
        raise NoKernelError(op, arch, [a for a in mk.KERNELS.archs_built() if a in archs])
    T, H, _ = q_lat.shape
    B = kv_indptr.numel() - 1
    q_len = T // B
    if plan is None:
        plan = make_plan(fmt, B, H, q_len, kv_indices.numel() // B, nparts=nparts, balanced=balanced, arch=arch,
                         kv_waves=kv_waves)
    elif (plan.batch, plan.heads, plan.q_len, plan.variant) != (B, H, q_len, "shared"):
        raise ValueError(f"{op}: plan must be a 'shared' plan for B={B}, H={H}, q_len={q_len}; got B={plan.batch}, "
                         f"H={plan.heads}, q_len={plan.q_len}, variant={plan.variant!r}")
    rows = q_len * H
    partial = plan.nparts > 1
    mk._check_ranges(q_lat=q_lat.numel() * 2, workspace=plan.ws_o_floats * 4)
    if kv_pool.shape[0] >= _U32:
        raise ValueError(f"{op}: kv_pool has {kv_pool.shape[0]} slots; the kernel addresses the pool as {record}-byte "
                         f"records with a 32-bit record count (at most {_U32 - 1} slots)")
    mk._check_alignment(q_lat=q_lat, q_pe=q_pe, kv_pool=kv_pool, o_lat=o_lat)
    dev = q_lat.device
    ws_o = ws_ml = None
    if partial:
        if workspace is None:
            workspace = plan.workspace(dev)
        elif (not isinstance(workspace, torch.Tensor) or workspace.dtype != torch.float32
              or not workspace.is_contiguous() or workspace.device != dev or workspace.numel() < plan.workspace_floats):
            raise ValueError(f"{op}: workspace must be a contiguous float32 tensor on {dev} with at least "
                             f"{plan.workspace_floats} elements")
        mk._check_alignment(workspace=workspace)
        flat = workspace.view(-1)
        ws_o, ws_ml = flat[:plan.ws_o_floats], flat[plan.ws_o_floats:plan.workspace_floats]
    glen_arg = glen if (cp_world > 1 and glen is not None) else seq_lens
    bal = FLAG_BALANCED if plan.balanced else 0
    flags = (FLAG_LSE if lse is not None else 0) | (FLAG_PARTIAL if partial else 0) | bal
    n_idx = mk._usable_indices(kv_indices.numel())
    counters, q_args = [], [q_lat, q_pe]
    if fmt == "a8w8":  # the kernel reduces mla_q_amax's maxima and quantises its Q tile itself
        parts, n_parts, counters = _q_amax(op, arch, q_lat, q_pe)
        q_args = [q_lat, q_pe, parts, n_parts]
    after_pool, tail = _format_args(fmt, pool_aux)
    # gfx950, one 16-row tile per request (H * q_len <= 16): the one-wave kernel, every wave computing (the
    # 4-wave one would run three fetch-only waves); the same units, a workgroup of 64 threads each.
    # kv_waves 4: the _kv4 kernel, a 256-thread workgroup per unit whose waves split the part (merged in LDS).
    one_wave = arch == "gfx950" and plan.n_rt == 1
    if plan.kv_waves != 1:
        if fmt not in KV_SPLIT_FORMATS or not one_wave:
            raise ValueError(f"{op}: plan.kv_waves {plan.kv_waves} needs a format with a _kv4 kernel "
                             f"({', '.join(KV_SPLIT_FORMATS)}) on gfx950 and one 16-row tile")
        grid, block, suffix = B * plan.nparts, 64 * plan.kv_waves, f"_kv{plan.kv_waves}"
    else:
        grid, block = (B * plan.nparts, 64) if one_wave else (plan.grid, 256)
        suffix = "_w1" if one_wave else ""
    counters.append(mk.KERNELS.launch(op, arch, code_object, kernel_name + suffix, grid=grid,
                                      block=block,
                                      args=[*q_args, kv_pool, *after_pool, o_lat, seq_lens, kv_indices, kv_indptr,
                                            glen_arg, lse, ws_o, ws_ml, B, H, q_len, plan.nparts, kv_pool.shape[0],
                                            n_idx, cp_rank, cp_world, flags, _f32_bits(c_qk), _f32_bits(o_scale),
                                            *tail]))
    if partial:
        counters.append(mk.KERNELS.launch(op, arch, mk.MERGE_CODE_OBJECT, plan.merge_kernel, grid=plan.merge_grid,
                                          block=plan.merge_block, dynamic_lds=plan.merge_lds,
                                          args=mk.merge_args(plan, B, rows, ws_o, ws_ml, o_lat, lse,
                                                             (FLAG_LSE if lse is not None else 0) | bal
                                                             | plan.merge_flags, _f32_bits(o_scale), seq_lens,
                                                             glen_arg, kv_indptr, n_idx, q_len, cp_rank, cp_world,
                                                             None)))  # no device kv_scale: o_scale holds it
    return counters
