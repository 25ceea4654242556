"""Launching the MXFP4 MoE kernels (csrc/device/gfx942/, gfx950/) through moonmath_common's runtime.

Code objects: ``mxfp4_moe_gateup.hsaco`` (kernels ``mxfp4_moe_gateup_bm{16,32,48}_nt{1,2,3}_none`` and
``..._nt{1,2}_situ`` / ``..._nt{1,2}_silu``) and ``mxfp4_moe_down.hsaco``
(``mxfp4_moe_down_bm{BM}_k{K}_nt{1,2}`` for the (BM, K) pairs whose A tile fits LDS), for gfx942 and gfx950
(csrc/device/gfx950/: the same kernels on the 16x16x32 bf16 MFMA). Both take the same leading arguments
(A, W, S, C, topk_w, sorted_ids, expert_ids, ntpp, num_sorted, num_valid, a_rows, a_row_div) and A's row
stride last; see the .hip files.
num_sorted is sorted_ids' length: a block row at or past it is a padding row (the aligners of vLLM and
SGLang allocate fewer than num_m_blocks * block_m entries).

The callers (ops.py) have validated every tensor; this module only picks the kernel variant, checks the
32-bit buffer ranges the kernels build (4 GiB - 1 bytes each) and B's 16-byte alignment (an A view off
16 bytes is copied; C may start anywhere: the kernels fall back to 2-byte stores where an 8-byte one would
be misaligned), and launches. docs/kernels/mxfp4_moe_gfx942.md has the design.
"""
from __future__ import annotations

import functools

import torch

from moonmath_common import target_arch
from moonmath_common.arch import CU_COUNT
from moonmath_common.kernels import KernelSet

EPI_NONE = 0
EPI_SITU = 1
EPI_SILU = 2
GATED = (EPI_SITU, EPI_SILU)  # epilogues that read gate columns [0, N) and up columns [N, 2N)
EPI_NAMES = {EPI_NONE: "none", EPI_SITU: "situ", EPI_SILU: "silu"}
THREADS = 512       # 8 waves per workgroup, both kernels
COLS_PER_NT = 128   # output columns per workgroup (gate/up) or per column step (down) at nt = 1
# nt 0 (gated only, block_m 16): one 16-column tile per wave shared by the gate and up columns of 8 outputs,
# so a workgroup is 64 output columns wide (docs/kernels/mxfp4_moe_gfx942.md, "Finer workgroups at decode").
GATEUP_NTS = {EPI_NONE: (1, 2, 3), EPI_SITU: (0, 1, 2), EPI_SILU: (0, 1, 2)}
GATEUP_SHARED_TILE_COLS = 64  # output columns of an nt-0 workgroup
DOWN_VARIANTS = {(16, 384), (16, 512), (16, 768), (32, 384), (32, 512), (32, 768), (64, 384)}
# Buffers are addressed by 32-bit byte offsets: each may span up to 4 GiB - 1 bytes. (The kernels' out-of-
# range offset is 0xFFFFFFF0, at or past the end of every A buffer, whose size is a multiple of 16.)
_BUFFER_LIMIT = (1 << 32) - 1

KERNELS = KernelSet("moonmath_mxfp4_moe")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gateup_cols(nt: int) -> int:
    """Output columns of one gate/up workgroup at nt column tiles per wave."""
    return COLS_PER_NT * nt if nt else GATEUP_SHARED_TILE_COLS


def gateup_nt(block_m: int, n_out: int, epilogue: int, rows: int | None = None, num_cus: int | None = None) -> int:
    """Column tiles of 16 per wave for mxfp4_moe_gateup (workgroup width gateup_cols(nt) output columns).

    At block_m 16: 1, or 0 (gated epilogues, when `rows` and `num_cus` are given) where the half-width
    workgroups cut the columns the busiest CU computes by at least 15 % (decode: a few hundred workgroups
    on 304 CUs leave some CUs two full ones). `rows` is the caller's estimate of the live m-blocks
    (launch_gateup: expected_live_blocks). Otherwise the largest of 3 (EPI_NONE only) or 2 whose
    workgroups cover no more padded columns than nt = 1 does. The choice never changes the result (each
    output element has the same accumulation chain at every nt).
    """
    if block_m == 16:
        if epilogue in GATED and rows and num_cus:
            def busiest(nt):  # output columns the busiest CU computes
                return _cdiv(_cdiv(n_out, gateup_cols(nt)) * rows, num_cus) * gateup_cols(nt)
            if 20 * busiest(0) <= 17 * busiest(1):
                return 0
        return 1
    covered = _cdiv(n_out, COLS_PER_NT) * COLS_PER_NT
    for nt in sorted((n for n in GATEUP_NTS[epilogue] if n), reverse=True):
        if _cdiv(n_out, COLS_PER_NT * nt) * COLS_PER_NT * nt <= covered:
            return nt
    return 1


def expected_live_blocks(num_experts: int, num_valid_tokens: int, num_m_blocks: int) -> int:
    """Live block_m-16 blocks of a decode launch, estimated without a host sync (ntpp stays on the device):
    the expected number of distinct experts num_valid_tokens uniform picks among num_experts hit (at
    decode each holds one block), at most num_m_blocks. An estimate for the nt choice only."""
    if num_experts < 1 or num_valid_tokens < 1:
        return 0
    hit = num_experts * (1.0 - (1.0 - 1.0 / num_experts) ** num_valid_tokens)
    return min(num_m_blocks, num_valid_tokens, max(1, round(hit)))


def _topk(topk_weights: torch.Tensor | None, mul_routed_weight: bool) -> torch.Tensor | None:
    if not mul_routed_weight or topk_weights is None:
        return None
    # The kernels read fp32; a bf16 weight upcasts exactly.
    return topk_weights if topk_weights.dtype == torch.float32 else topk_weights.float()


def _aligned_a(A: torch.Tensor) -> torch.Tensor:
    """The kernels load A in 16-byte granules from rows A.stride(0) elements apart: a view whose start or
    row stride is off a 16-byte boundary is copied (contiguous k is validated by the op)."""
    if A.data_ptr() % 16 == 0 and (A.shape[0] <= 1 or A.stride(0) * 2 % 16 == 0):
        return A
    return A.clone(memory_format=torch.contiguous_format)


def _a_stride(A: torch.Tensor) -> int:
    return A.stride(0) if A.shape[0] > 1 else A.shape[1]


def _a_bytes(A: torch.Tensor) -> int:
    """Bytes the kernel's A buffer spans: up to the last row's K-th element."""
    return ((A.shape[0] - 1) * _a_stride(A) + A.shape[1]) * 2 if A.shape[0] else 0


def _check_b(op: str, B: torch.Tensor) -> None:
    if B.data_ptr() % 16:
        raise ValueError(f"{op}: B must start on a 16-byte boundary (the kernel loads 16-byte granules); its address "
                         f"is {B.data_ptr() % 16} bytes past one: pass a fresh tensor (e.g. B.clone())")


def _weight_reach(K: int, nb: int) -> int:
    """Bytes past one expert's weight base that the kernels' 32-bit weight offsets reach: 4 k-blocks per
    slab over ceil(K/128) slabs plus the one-slab prefetch, times nb columns, plus up to 384 padding
    columns of the last column tile. Reads past the expert's K/32 blocks must fall out of range, not wrap."""
    return 16 * ((4 * _cdiv(K, 128) + 4) * nb + 384)


def _check_ranges(op: str, **sizes: int) -> None:
    for name, nbytes in sizes.items():
        if nbytes > _BUFFER_LIMIT:
            raise ValueError(f"{op}: {name} spans {nbytes} bytes; the kernels address each buffer with 32-bit "
                             f"byte offsets, at most 4 GiB - 1 bytes (split the call)")


def launch_gateup(A: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                  topk_weights: torch.Tensor | None, sorted_ids: torch.Tensor, expert_ids: torch.Tensor,
                  ntpp: torch.Tensor, num_m_blocks: int, block_m: int, num_valid_tokens: int, top_k: int,
                  epilogue: int, mul_routed_weight: bool, situ_beta: float = 1.0, situ_linear_beta: float = 1.0,
                  nt: int | None = None, op: str = "moonmath_mxfp4_moe.mxfp4_moe_gateup") -> dict | None:
    """Run the gate/up kernel (also the down projection at K the down kernel does not serve).

    A bf16 [T, K] (K % 32 == 0), B uint8 [E, K/32, Nb, 16], Bs uint8 [E, K/32, Nb], C bf16 [>= nvt, N_out]
    with N_out = Nb (EPI_NONE) or Nb / 2 (EPI_SITU, EPI_SILU). nt = None lets gateup_nt choose. Returns the
    emulator's counters (emu) or None (hip).
    """
    E, G, nb, _ = B.shape
    T, K = A.shape
    n_out = nb // 2 if epilogue in GATED else nb
    if nt is None:
        rows = expected_live_blocks(E, num_valid_tokens, num_m_blocks)
        nt = gateup_nt(block_m, n_out, epilogue, rows, CU_COUNT[target_arch()])
    if nt not in GATEUP_NTS[epilogue]:
        raise ValueError(f"{op}: nt must be one of {GATEUP_NTS[epilogue]}; got {nt}")
    if nt == 0 and block_m != 16:
        raise ValueError(f"{op}: nt 0 (the shared gate/up tile) is built for block_m 16 only; got block_m={block_m}")
    if num_m_blocks == 0 or num_valid_tokens == 0:
        return None
    A = _aligned_a(A)
    _check_ranges(op, A=_a_bytes(A), B_per_expert=_weight_reach(K, nb), C=num_valid_tokens * n_out * 2)
    _check_b(op, B)
    name = f"mxfp4_moe_gateup_bm{block_m}_nt{nt}_{EPI_NAMES[epilogue]}"
    grid = (_cdiv(n_out, gateup_cols(nt)), num_m_blocks, 1)
    args = [A, B, Bs, C, _topk(topk_weights, mul_routed_weight), sorted_ids, expert_ids, ntpp,
            sorted_ids.numel(), num_valid_tokens, T, top_k, K, nb, E, int(bool(mul_routed_weight)),
            float(situ_beta), float(situ_linear_beta), _a_stride(A)]
    return KERNELS.launch(op, target_arch(), "mxfp4_moe_gateup", name, grid, THREADS, args)


@functools.lru_cache(maxsize=256)
def _down_plan(T: int, K: int, a_stride: int, E: int, G: int, N: int, block_m: int, n_steps: int, nt: int,
               num_m_blocks: int, num_valid_tokens: int, op: str) -> tuple[str, tuple[int, int, int]]:
    """Kernel name and grid of one down call, after its buffer range checks: cached by shape (a rejected
    shape raises each time, it is never cached)."""
    a_bytes = ((T - 1) * a_stride + K) * 2 if T else 0
    _check_ranges(op, A=a_bytes, B_per_expert=_weight_reach(K, N), C=num_valid_tokens * N * 2)
    name = f"mxfp4_moe_down_bm{block_m}_k{K}_nt{nt}"
    return name, (_cdiv(_cdiv(N, COLS_PER_NT * nt), n_steps), num_m_blocks, 1)


def launch_down(A: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                topk_weights: torch.Tensor | None, sorted_ids: torch.Tensor, expert_ids: torch.Tensor,
                ntpp: torch.Tensor, num_m_blocks: int, block_m: int, n_steps: int, nt: int, num_valid_tokens: int,
                top_k: int, mul_routed_weight: bool, op: str = "moonmath_mxfp4_moe.mxfp4_moe_down") -> dict | None:
    """Run the down kernel: A bf16 [rows, K] with K in {384, 512, 768}, B [E, K/32, N, 16], C [>= nvt, N]."""
    E, G, N, _ = B.shape
    T, K = A.shape
    if (block_m, K) not in DOWN_VARIANTS:
        raise ValueError(f"{op}: no down kernel for block_m={block_m}, K={K}; pairs built: {sorted(DOWN_VARIANTS)}")
    if nt not in (1, 2):
        raise ValueError(f"{op}: nt must be 1 or 2; got {nt}")
    if n_steps < 1:
        raise ValueError(f"{op}: n_steps must be >= 1; got {n_steps}")
    if num_m_blocks == 0 or num_valid_tokens == 0:
        return None
    A = _aligned_a(A)
    a_stride = _a_stride(A)
    name, grid = _down_plan(T, K, a_stride, E, G, N, block_m, n_steps, nt, num_m_blocks, num_valid_tokens, op)
    _check_b(op, B)
    args = [A, B, Bs, C, _topk(topk_weights, mul_routed_weight), sorted_ids, expert_ids, ntpp,
            sorted_ids.numel(), num_valid_tokens, T, top_k, N, E, int(bool(mul_routed_weight)), n_steps, a_stride]
    return KERNELS.launch(op, target_arch(), "mxfp4_moe_down", name, grid, THREADS, args)
