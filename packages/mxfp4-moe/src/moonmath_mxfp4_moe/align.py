"""moe_align_block_size: route (token, k) slots to experts in block_m-row blocks, the format the MoE
GEMMs read. Vectorised torch on the ids' device; no host sync, static output shapes."""
from __future__ import annotations

import torch

from moonmath_common import checks


def moe_align_block_size(topk_ids: torch.Tensor, block_m: int, num_experts: int | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Group the slots of ``topk_ids`` by expert and pad each expert to a multiple of ``block_m`` rows.

    Args:
        topk_ids: int32/int64 ``[T, top_k]``: the experts of each token. Slot s = t * top_k + k. Ids
            outside [0, num_experts) are routed to no block (e.g. experts of another EP rank).
        block_m: rows per block (e.g. ``mxfp4_moe_gateup_block_m(...)``), in [1, 65536].
        num_experts: the number of experts E. None reads ``topk_ids.max() + 1`` (a host sync).

    Returns:
        ``(sorted_ids, expert_ids, num_tokens_post_padded, num_blocks)``:
        - sorted_ids: int32 ``[num_blocks * block_m]``: slots grouped by expert ascending, in slot order
          within an expert, each expert's run padded to a multiple of block_m with the sentinel T * top_k;
          entries past the padded total are the sentinel as well.
        - expert_ids: int32 ``[num_blocks]``: the expert of each block, -1 for blocks past the padded total.
        - num_tokens_post_padded: int32 ``[1]`` on the ids' device: the padded total (a multiple of block_m).
        - num_blocks: Python int, the static capacity ``(n + min(E, n) * (block_m - 1)) // block_m`` with
          n = T * top_k; pass it as num_m_blocks (the kernels skip blocks past the padded total).
    """
    checks.tensor("topk_ids", topk_ids, dtype=(torch.int32, torch.int64), ndim=2)
    checks.integer("block_m", block_m, lo=1)
    if num_experts is None:
        num_experts = int(topk_ids.max()) + 1 if topk_ids.numel() else 1
        num_experts = max(num_experts, 1)
    checks.integer("num_experts", num_experts, lo=1, hi=checks.I32_MAX)
    checks.integer("block_m", block_m, lo=1, hi=65536)  # the kernels take 16..64; beyond 2**16 is a mistake
    dev = topk_ids.device
    E, bm = num_experts, block_m
    flat = topk_ids.reshape(-1).to(torch.int64)
    n = flat.numel()
    num_blocks = (n + min(E, n) * (bm - 1)) // bm
    cap = num_blocks * bm
    if cap > checks.I32_MAX:  # the ids are int32 and index rows of the padded layout
        raise ValueError(f"block_m={bm} over {n} slots and {E} experts needs {cap} sorted ids; at most 2**31 - 1 "
                         f"fit the int32 layout (use a smaller block_m, or fewer tokens per call)")
    valid = (flat >= 0) & (flat < E)
    key = torch.where(valid, flat, torch.full_like(flat, E))          # bucket E: routed nowhere
    counts = torch.zeros(E + 1, dtype=torch.int64, device=dev).scatter_add_(0, key, torch.ones_like(key))
    order = torch.argsort(key, stable=True)                            # slots by expert, stable
    skey = key[order]
    raw_start = torch.cumsum(counts, 0) - counts
    padded = (counts[:E] + bm - 1) // bm * bm
    pad_end = torch.cumsum(padded, 0)
    pad_start = torch.cat((pad_end - padded, torch.full((1,), cap, dtype=torch.int64, device=dev)))
    rank = torch.arange(n, device=dev) - raw_start[skey]
    dest = torch.where(skey < E, pad_start[skey] + rank, torch.full_like(rank, cap))
    sorted_ids = torch.full((cap + 1,), n, dtype=torch.int64, device=dev)
    sorted_ids = sorted_ids.scatter(0, dest, order)[:cap].to(torch.int32)
    total = pad_end[-1:] if E else torch.zeros(1, dtype=torch.int64, device=dev)
    starts = torch.arange(num_blocks, device=dev) * bm
    eid = torch.searchsorted(pad_end, starts, right=True)
    expert_ids = torch.where(starts < total, eid, torch.full_like(eid, -1)).to(torch.int32)
    return sorted_ids, expert_ids, total.to(torch.int32), num_blocks
