"""mla_dcp_lse_merge_ranks: combine decode-context-parallel partial outputs across ranks."""
from __future__ import annotations

import torch

from moonmath_common import checks, get_backend, target_arch
from moonmath_common.kernels import KernelSet
from moonmath_common.numerics import round_bf16

KV_LORA_RANK = 512
MAX_RANKS = 16
# An LSE at or beyond this magnitude, or NaN, marks an empty partial.
EMPTY_LSE = 3e38

_kernels = KernelSet("moonmath_mla_decode")


def _validate(parts_in, lse_in, out, lse_out) -> None:
    checks.tensor("parts_in", parts_in, dtype=torch.bfloat16, ndim=4, contiguous=True)
    R, T, H, D = parts_in.shape
    if D != KV_LORA_RANK:
        raise ValueError(f"parts_in must have last dim {KV_LORA_RANK} (kv_lora_rank); got shape {list(parts_in.shape)}")
    if not 1 <= R <= MAX_RANKS:
        raise ValueError(f"parts_in must hold 1 to {MAX_RANKS} ranks (dim 0); got {R}")
    checks.tensor("lse_in", lse_in, dtype=torch.float32, shape=(R, T, H), contiguous=True)
    checks.tensor("out", out, dtype=torch.bfloat16, shape=(T, H, D), contiguous=True)
    if lse_out is not None:
        checks.tensor("lse_out", lse_out, dtype=torch.float32, shape=(T, H), contiguous=True)
    checks.same_device(parts_in=parts_in, lse_in=lse_in, out=out, lse_out=lse_out)
    from . import _C

    if T * H > _C.MERGE_MAX_ROWS:
        raise ValueError(f"parts_in has T*H = {T * H} rows; at most {_C.MERGE_MAX_ROWS} are supported per call")
    # By address range, whatever storage each tensor comes from (two storages can share memory,
    # e.g. from_blob/DLPack views); skipped while torch.compile traces (addresses are not traceable).
    checks.no_overlap("out", out, parts_in=parts_in, lse_in=lse_in, lse_out=lse_out)
    checks.no_overlap("lse_out", lse_out, parts_in=parts_in, lse_in=lse_in)


def reference(parts_in: torch.Tensor, lse_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The documented semantics in fp32: returns (out bf16 [T,H,512] RTNE, lse_out fp32 [T,H]).

    Ranks are accumulated in order 0..R-1 and normalised by multiplying with the fp32 reciprocal of
    the weight sum, as the kernels do. An empty rank (|lse| >= 3e38, +-inf included) has weight 0 and
    its part is never read (NaN there does not propagate). A rank with a NaN lse (its inputs held
    NaN/Inf) makes the row NaN: out NaN (0x7FFF), lse_out NaN — it is never dropped as if empty.
    """
    lse = lse_in.to(torch.float32)
    empty = ~(lse.abs() < EMPTY_LSE)
    neg_inf = torch.tensor(float("-inf"), dtype=torch.float32, device=lse.device)
    m = torch.where(empty, neg_inf, lse).amax(dim=0)
    all_empty = torch.isneginf(m)
    m_safe = torch.where(all_empty, torch.zeros_like(m), m)
    w = torch.where(empty, torch.zeros_like(lse), torch.exp2(lse - m_safe))
    acc = torch.zeros(parts_in.shape[1:], dtype=torch.float32, device=parts_in.device)
    sum_w = torch.zeros_like(m)
    for r in range(parts_in.shape[0]):
        wr = w[r]
        sum_w = sum_w + wr
        contrib = wr.unsqueeze(-1) * parts_in[r].to(torch.float32)
        acc = acc + torch.where(wr.unsqueeze(-1) > 0, contrib, torch.zeros_like(contrib))
    live = sum_w > 0
    inv = torch.where(live, 1.0 / torch.where(live, sum_w, torch.ones_like(sum_w)), torch.zeros_like(sum_w))
    poisoned = torch.isnan(lse).any(dim=0)
    inv = torch.where(poisoned, torch.full_like(inv, float("nan")), inv)
    out = round_bf16(acc * inv.unsqueeze(-1), "rtne")
    lse_out = torch.where(live, m_safe + torch.log2(torch.where(live, sum_w, torch.ones_like(sum_w))), neg_inf)
    lse_out = torch.where(poisoned, torch.full_like(lse_out, float("nan")), lse_out)
    return out, lse_out


def _run_kernel(parts_in, lse_in, out, lse_out) -> None:
    from . import _C

    R, T, H, _ = parts_in.shape
    rows = T * H
    if rows == 0:
        return
    grid, block = _C.plan_merge(rows)
    _kernels.launch("mla_dcp_lse_merge_ranks", target_arch(), "mla_dcp_lse_merge", "mla_dcp_lse_merge_ranks",
                    grid=grid, block=block, args=[parts_in, lse_in, out, lse_out, R, rows])


@torch.library.custom_op("moonmath::mla_dcp_lse_merge_ranks", mutates_args=("out", "lse_out"))
def _merge_op(parts_in: torch.Tensor, lse_in: torch.Tensor, out: torch.Tensor, lse_out: torch.Tensor | None) -> None:
    if get_backend() == "reference":
        o, lse = reference(parts_in, lse_in)
        out.copy_(o)
        if lse_out is not None:
            lse_out.copy_(lse)
        return
    _run_kernel(parts_in, lse_in, out, lse_out)


@_merge_op.register_fake
def _(parts_in, lse_in, out, lse_out) -> None:
    return None


def mla_dcp_lse_merge_ranks(parts_in: torch.Tensor, lse_in: torch.Tensor, out: torch.Tensor,
                            lse_out: torch.Tensor | None = None) -> None:
    """Merge the partial MLA decode outputs of R context-parallel ranks into `out` (in place).

    Args:
        parts_in: bf16 ``[R, T, H, 512]`` contiguous, each rank's normalised partial output; R is 1..16.
        lse_in: fp32 ``[R, T, H]`` contiguous, each rank's base-2 log-sum-exp (|lse| >= 3e38: empty rank; NaN:
            the row is NaN).
        out: bf16 ``[T, H, 512]`` contiguous, written: sum_r w_r part_r / sum_r w_r, w_r = exp2(lse_r - max lse).
            Must not overlap the inputs (address ranges are compared).
        lse_out: optional fp32 ``[T, H]`` contiguous, written: max + log2(sum_r w_r) (-inf where every rank is
            empty, whose out rows are 0).

    All tensors on one device; deterministic (ranks summed in order).
    """
    _validate(parts_in, lse_in, out, lse_out)
    _merge_op(parts_in, lse_in, out, lse_out)
