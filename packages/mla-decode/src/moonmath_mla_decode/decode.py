"""MLA absorbed decode, bf16 Q against fp8 e4m3fnuz KV (a16w8): plain decode, speculative verify, DCP."""
from __future__ import annotations

import torch

from moonmath_common import checks, get_backend, target_arch
from moonmath_common.emu_device import device_resident

from . import reference

KV_LORA_RANK = 512
ROPE_DIM = 64
ROW = KV_LORA_RANK + ROPE_DIM
MAX_HEADS = 128
OP = "moonmath_mla_decode.mla_decode_a16w8"
# The pool's fp8 format is the arch's native one: e4m3fnuz on gfx942 (max 240), OCP e4m3fn on gfx950 (max 448).
POOL_DTYPES = {"gfx942": torch.float8_e4m3fnuz, "gfx950": torch.float8_e4m3fn}


def mla_decode_a16w8(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, o_lat: torch.Tensor,
                     seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float,
                     kv_scale: float | torch.Tensor, lse: torch.Tensor | None = None, glen: torch.Tensor | None = None,
                     cp_rank: int = 0, cp_world: int = 1) -> None:
    """MLA absorbed decode: writes ``o_lat`` (and ``lse``) in place.

    Args:
        q_lat: bf16 ``[T, H, 512]`` contiguous, the absorbed latent queries; T = B * q_len, request b owns
            rows [b*q_len, (b+1)*q_len). H in 1..128.
        q_pe: bf16 ``[T, H, 64]`` contiguous, the RoPE queries.
        kv_pool: fp8 ``[slots, 1, 576]`` contiguous: one fused row per token ([:512] latent, [512:] rope),
            both key and value, at the one per-tensor ``kv_scale``. ``float8_e4m3fnuz`` on gfx942, OCP
            ``float8_e4m3fn`` on gfx950 (the arch of ``moonmath_common.target_arch()``).
        o_lat: bf16 ``[T, H, 512]`` contiguous, the output (written in place).
        seq_lens: int32 ``[B]``: KV rows of each request on this rank (including the q_len draft tokens).
        kv_indices: int32 ``[N]``: pool slots (page_size 1); local row j of request b is slot
            kv_indices[kv_indptr[b] + j]. Any permutation or subset of the pool is legal.
        kv_indptr: int32 ``[B + 1]``; B = kv_indptr.numel() - 1.
        scale: softmax scale applied to q . k (e.g. 576 ** -0.5): a Python float, a numpy scalar or a
            one-element CPU tensor (read with float()), within fp32.
        kv_scale: the pool's dequant scale: any of those, or a one-element float32 tensor on the device
            (on the emu backend an ``EmuDeviceTensor``), which the kernels read on the device (no host
            read, no sync; the reference backend reads it with float()).
        lse: optional fp32 ``[T, H]`` contiguous: base-2 log-sum-exp of the scaled scores (-inf if empty).
        glen: int32 ``[B]`` global lengths, required when cp_world > 1 (ignored when cp_world == 1).
        cp_rank, cp_world: decode context parallelism: global position p lives on rank p % cp_world at
            local row p // cp_world.

    Position t of a request attends global KV positions [0, L - q_len + t] (end-aligned causal window;
    L = seq_len, or glen under DCP). An empty window gives o = 0 and lse = -inf. Any batch size: the
    original's cap B * ceil(q_len * H / 96) <= 304 is gone (the planner splits KV to fill the GPU).
    Index values (kv_indptr, kv_indices, seq_lens, glen) are checked
    when they are CPU tensors; on the GPU they are read by the kernel only (no host sync).
    """
    checks.tensor("q_lat", q_lat, dtype=torch.bfloat16, ndim=3, contiguous=True)
    checks.tensor("q_pe", q_pe, dtype=torch.bfloat16, ndim=3, contiguous=True)
    arch = target_arch()
    pool_dtype = POOL_DTYPES.get(arch, torch.float8_e4m3fnuz)
    checks.tensor("kv_pool", kv_pool)
    if kv_pool.dtype != pool_dtype:
        raise TypeError(f"kv_pool must have dtype {str(pool_dtype).replace('torch.', '')} on {arch} (its native fp8: "
                        f"gfx942 e4m3fnuz, gfx950 OCP e4m3fn); got {str(kv_pool.dtype).replace('torch.', '')}")
    checks.tensor("kv_pool", kv_pool, ndim=3, contiguous=True)
    checks.tensor("o_lat", o_lat, dtype=torch.bfloat16, ndim=3, contiguous=True)
    checks.tensor("seq_lens", seq_lens, dtype=torch.int32, ndim=1, contiguous=True)
    checks.tensor("kv_indices", kv_indices, dtype=torch.int32, ndim=1, contiguous=True)
    checks.tensor("kv_indptr", kv_indptr, dtype=torch.int32, ndim=1, contiguous=True)
    scale = checks.real("scale", scale, fp32=True)
    kv_scale_dev = _device_kv_scale(kv_scale, q_lat.device)
    kv_scale = 1.0 if kv_scale_dev is not None else checks.real("kv_scale", kv_scale, fp32=True)
    if lse is not None:
        checks.tensor("lse", lse, dtype=torch.float32, ndim=2, contiguous=True)
    if glen is not None:
        checks.tensor("glen", glen, dtype=torch.int32, ndim=1, contiguous=True)
    checks.i32("cp_world", cp_world, lo=1)
    checks.integer("cp_rank", cp_rank)
    if not 0 <= cp_rank < cp_world:
        raise ValueError(f"cp_rank must satisfy 0 <= cp_rank < cp_world ({cp_world}); got {cp_rank}")
    if cp_world > 1 and glen is None:
        raise ValueError(f"glen (the GLOBAL lengths, int32 [B]) is required when cp_world > 1; got None with "
                         f"cp_world={cp_world}")
    checks.same_device(q_lat=q_lat, q_pe=q_pe, kv_pool=kv_pool, o_lat=o_lat, seq_lens=seq_lens,
                       kv_indices=kv_indices, kv_indptr=kv_indptr, lse=lse, glen=glen)
    T, H, lat = q_lat.shape
    if lat != KV_LORA_RANK:
        raise ValueError(f"q_lat must be [T, H, {KV_LORA_RANK}] (kv_lora_rank {KV_LORA_RANK}); got {list(q_lat.shape)}")
    if not 1 <= H <= MAX_HEADS:
        raise ValueError(f"H (q_lat.shape[1]) must be in [1, {MAX_HEADS}]; got {H}")
    checks.tensor("q_pe", q_pe, shape=[T, H, ROPE_DIM])
    checks.tensor("o_lat", o_lat, shape=[T, H, KV_LORA_RANK])
    if kv_pool.shape[1] != 1 or kv_pool.shape[2] != ROW:
        raise ValueError(f"kv_pool must be [slots, 1, {ROW}] (page_size 1, fused latent+rope rows); got "
                         f"{list(kv_pool.shape)}")
    if kv_indptr.numel() < 2:
        raise ValueError(f"kv_indptr must have B + 1 >= 2 elements; got {kv_indptr.numel()}")
    B = kv_indptr.numel() - 1
    checks.tensor("seq_lens", seq_lens, shape=[B])
    if glen is not None:
        checks.tensor("glen", glen, shape=[B])
    if T < B or T % B:
        raise ValueError(f"T (q_lat.shape[0]) must be B * q_len with q_len >= 1 (B = kv_indptr.numel() - 1 = {B}); "
                         f"got T = {T}")
    q_len = T // B
    if lse is not None:
        checks.tensor("lse", lse, shape=[T, H])
    if checks.on_host(seq_lens, kv_indices, kv_indptr, glen):
        _check_values(seq_lens, kv_indices, kv_indptr, glen if cp_world > 1 else None, q_len, cp_rank, cp_world,
                      kv_pool.shape[0])
    _decode_op(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale, kv_scale, lse, glen, cp_rank,
               cp_world, kv_scale_dev)


def _device_kv_scale(kv_scale: object, device: torch.device) -> torch.Tensor | None:
    """kv_scale when it is a device-resident tensor (checked by its metadata only: no host read), else None."""
    if not isinstance(kv_scale, torch.Tensor) or not device_resident(kv_scale):
        return None
    if kv_scale.dtype != torch.float32:
        raise TypeError(f"kv_scale as a device tensor must be float32 (the kernels read one fp32); got "
                        f"{str(kv_scale.dtype).replace('torch.', '')}")
    if kv_scale.numel() != 1:
        raise ValueError(f"kv_scale must be a scalar (a float, or a tensor of one element); got a tensor of shape "
                         f"{tuple(kv_scale.shape)}")
    if kv_scale.device != device:
        raise ValueError(f"kv_scale is on {kv_scale.device} but q_lat is on {device}")
    if kv_scale.data_ptr() % 4:
        raise ValueError(f"kv_scale must be 4-byte aligned for the kernels' load; got address {kv_scale.data_ptr():#x}")
    return kv_scale


def _check_values(seq_lens, kv_indices, kv_indptr, glen, q_len, cp_rank, cp_world, slots) -> None:
    checks.values_in("kv_indptr", kv_indptr[:1], lo=0)
    checks.nondecreasing("kv_indptr", kv_indptr)
    if int(kv_indptr[-1]) > kv_indices.numel():
        raise ValueError(f"kv_indptr[-1] must be <= kv_indices.numel() ({kv_indices.numel()}); got "
                         f"{int(kv_indptr[-1])}")
    checks.values_in("seq_lens", seq_lens, lo=0)
    span = (kv_indptr[1:] - kv_indptr[:-1]).to(torch.int64)
    lens = seq_lens.to(torch.int64)
    if bool((lens > span).any()):
        b = int(torch.nonzero(lens > span)[0])
        raise ValueError(f"seq_lens[{b}] = {int(lens[b])} exceeds its kv_indices span kv_indptr[{b + 1}] - "
                         f"kv_indptr[{b}] = {int(span[b])}")
    if glen is not None:
        checks.values_in("glen", glen, lo=0)
        g = glen.to(torch.int64)
        local = torch.where(g > cp_rank, (g - cp_rank + cp_world - 1) // cp_world, torch.zeros_like(g))
        if bool((local > lens).any()):
            b = int(torch.nonzero(local > lens)[0])
            raise ValueError(f"glen[{b}] = {int(g[b])} puts {int(local[b])} positions on rank {cp_rank} of "
                             f"{cp_world} but seq_lens[{b}] = {int(lens[b])}")
    # Slots actually read: the first seq_lens[b] entries of each request's span, checked in one pass.
    total = int(lens.sum())
    if total:
        starts = kv_indptr[:-1].to(torch.int64)
        owner = torch.repeat_interleave(torch.arange(lens.numel()), lens)
        offs = torch.arange(total) - torch.repeat_interleave(torch.cumsum(lens, 0) - lens, lens)
        pos = starts[owner] + offs
        used = kv_indices[pos]
        bad = (used < 0) | (used >= slots)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0])
            b = int(owner[i])
            raise ValueError(f"kv_indices (request {b}) values must be in [0, {slots}) (the pool's rows); got "
                             f"{int(used[i])} at kv_indices[{int(pos[i])}]")


@torch.library.custom_op("moonmath::mla_decode_a16w8", mutates_args=("o_lat", "lse"))
def _decode_op(q_lat: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, o_lat: torch.Tensor,
               seq_lens: torch.Tensor, kv_indices: torch.Tensor, kv_indptr: torch.Tensor, scale: float,
               kv_scale: float, lse: torch.Tensor | None, glen: torch.Tensor | None, cp_rank: int,
               cp_world: int, kv_scale_dev: torch.Tensor | None = None) -> None:
    if get_backend() == "reference":
        if kv_scale_dev is not None:  # the reference is host code: it reads the value
            kv_scale = float(kv_scale_dev)
        o, l = reference.mla_decode_a16w8(q_lat, q_pe, kv_pool, seq_lens, kv_indices, kv_indptr, scale, kv_scale,
                                          glen, cp_rank, cp_world)
        o_lat.copy_(o)
        if lse is not None:
            lse.copy_(l)
    else:
        _run_kernel(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale,
                    kv_scale if kv_scale_dev is None else kv_scale_dev, lse, glen, cp_rank, cp_world)


@_decode_op.register_fake
def _(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale, kv_scale, lse, glen, cp_rank,
      cp_world, kv_scale_dev=None) -> None:
    return None


def _run_kernel(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale, kv_scale, lse, glen, cp_rank,
                cp_world) -> None:
    """The hip/emu path: the gfx942 / gfx950 kernels (kernel.py): the decode kernel, then its split-KV merge."""
    arch = target_arch()
    from .kernel import ARCHS

    if arch not in ARCHS:
        from .kernel import KERNELS

        # Raises NoKernelError saying whether the decode code object is not built or not implemented for
        # this arch (the package's merge kernel is built for more archs than the decode kernel).
        KERNELS.path(OP, arch, "mla_decode_a16w8")
    from . import kernel
    kernel.run(q_lat, q_pe, kv_pool, o_lat, seq_lens, kv_indices, kv_indptr, scale, kv_scale, lse, glen, cp_rank,
               cp_world)
