"""a4w4 MXFP4 MoE GEMMs: MXFP4 activations (codes + E8M0 scales, from mxfp4_quantize or from the fused
stage-1 epilogue) x the repacked MXFP4 weights, on gfx950's scaled MFMA (csrc/device/gfx950/mxfp4_moe_a4w4.hip).

The a4w4 path reproduces AITER's fused_moe per_1x32 (a4w4) numerics: the activations are quantised by
AITER's rule (quant.py), stage 1 computes the gated epilogue in fp32, rounds it to bf16 and quantises that
again by the same rule (here fused into the gate/up kernel: ``C_scales=`` given), stage 2 multiplies by the
routed weight. docs/numerics.md has the contract.
"""
from __future__ import annotations

import torch

from moonmath_common import checks, get_backend, target_arch

from . import quant, reference
from .ops import EPI_NONE, EPI_SILU, EPI_SITU, _common

A4W4_BLOCK_MS = (16, 32, 48)
SLAB_K = 128
THREADS = 512
COLS_PER_NT = 128
EPI_NAMES = {EPI_NONE: "none", EPI_SITU: "situ", EPI_SILU: "silu"}
_BUFFER_LIMIT = (1 << 32) - 1
DOWN_MAX_K = 2048  # the resident-tile down kernel's LDS tile (16 slabs of 128 k)


def _check_scales(name: str, s: object, rows: int, k: int) -> None:
    checks.tensor(name, s, dtype=torch.uint8, ndim=2, contiguous=True)
    if s.shape[1] != k // 32 or s.shape[0] < rows:
        raise ValueError(f"{name} must be uint8 [>= {rows}, {k // 32}] (one E8M0 byte per 32 k of each row); got "
                         f"{list(s.shape)}")


def mxfp4_moe_gateup_a4w4(A: torch.Tensor, A_scales: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                          topk_weights: torch.Tensor | None, sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor,
                          num_tokens_post_padded: torch.Tensor, num_m_blocks: int, block_m: int,
                          num_valid_tokens: int, top_k: int, epilogue: int = EPI_SILU, mul_routed_weight: bool = False,
                          situ_beta: float = 1.0, situ_linear_beta: float = 1.0,
                          C_scales: torch.Tensor | None = None) -> None:
    """Grouped a4w4 GEMM of the gate/up projection (gfx950), optional fused SwiGLU / SituGLU; writes C in place.

    Args:
        A: MXFP4 codes uint8 ``[T, K/2]`` (byte b: k = 2b low nibble, 2b + 1 high nibble; contiguous k, any
            row stride), row of slot s = s // top_k; K a positive multiple of 128.
        A_scales: E8M0 uint8 ``[T, K/32]``, contiguous (mxfp4_quantize writes both).
        B, Bs: repacked weights ``[E, K/32, Nb, 16]`` and scales ``[E, K/32, Nb]`` (repack_mxfp4, the a16w4
            layout). Gated epilogues: Nb = 2N (gate then up), else Nb = N.
        C: bf16 ``[rows, N]``; or, with ``C_scales``, MXFP4 codes uint8 ``[rows, N/2]`` (a gated epilogue
            only, N % 32 == 0): the bf16-rounded epilogue output quantised by mxfp4_quantize's rule, fused.
        C_scales: uint8 ``[rows, N/32]`` when C is quantised, else None.
        topk_weights: fp32 or bf16, contiguous, >= num_valid_tokens elements (flat index = slot); required
            when mul_routed_weight (as mxfp4_moe_gateup).
        sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks: from moe_align_block_size (or
            vLLM's / SGLang's aligner), as mxfp4_moe_gateup.
        block_m: 16, 32 or 48 (mxfp4_moe_gateup_block_m).
        num_valid_tokens: slots s < it are live.
        top_k: slots per token (the row of A read for slot s is s // top_k).
        epilogue: EPI_NONE, EPI_SITU (SituGLU) or EPI_SILU (SwiGLU, default).
        mul_routed_weight: bool; multiply each slot's row by its topk_weights entry.
        situ_beta, situ_linear_beta: b and L of EPI_SITU's (b tanh(g/b) sigmoid(g)) * (L tanh(u/L)); finite, > 0.
    """
    _gateup(False, A, A_scales, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
            num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta,
            C_scales)


def mxfp4_moe_gateup_a8w4(A: torch.Tensor, A_scales: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                          topk_weights: torch.Tensor | None, sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor,
                          num_tokens_post_padded: torch.Tensor, num_m_blocks: int, block_m: int,
                          num_valid_tokens: int, top_k: int, epilogue: int = EPI_SILU, mul_routed_weight: bool = False,
                          situ_beta: float = 1.0, situ_linear_beta: float = 1.0) -> None:
    """Grouped a8w4 GEMM of the gate/up projection (gfx950): MXFP8 activations (e4m3 codes + E8M0 scales per 32 k,
    mxfp8_quantize) x the repacked MXFP4 weights on the scaled MFMA (fp8 x fp4), optional fused SwiGLU / SituGLU;
    writes bf16 C in place.

    Args:
        A: MXFP8 codes float8_e4m3fn ``[T, K]`` (contiguous k, any row stride), row of slot s = s // top_k; K a
            positive multiple of 128.
        A_scales: E8M0 uint8 ``[T, K/32]``, contiguous (mxfp8_quantize writes both).
        B, Bs, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks, block_m,
            num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta: as
            mxfp4_moe_gateup_a4w4.
        C: bf16 ``[rows, N]`` contiguous output, row = slot (rows >= num_valid_tokens).
    """
    _gateup(True, A, A_scales, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
            num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta,
            None)


def mxfp4_moe_down_a8w4(A: torch.Tensor, A_scales: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                        topk_weights: torch.Tensor | None, sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor,
                        num_tokens_post_padded: torch.Tensor, num_m_blocks: int, block_m: int,
                        num_valid_tokens: int, top_k: int = 1, mul_routed_weight: bool = False) -> None:
    """Grouped a8w4 GEMM of the down projection (gfx950): C bf16 ``[rows, N]`` = w(slot) * A[slot // top_k] . W^T,
    A the MXFP8 intermediate (e.g. mxfp8_quantize of the gate/up output), any K % 128 == 0; block_m 16, 32 or 48.

    Args:
        A: MXFP8 codes float8_e4m3fn ``[rows, K]`` (contiguous k, any row stride); K % 128 == 0.
        A_scales: E8M0 uint8 ``[rows, K/32]``, contiguous.
        B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks, block_m,
            num_valid_tokens, top_k, mul_routed_weight: as mxfp4_moe_down_a4w4.
    """
    mxfp4_moe_gateup_a8w4(A, A_scales, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                          num_m_blocks, block_m, num_valid_tokens, top_k, EPI_NONE, mul_routed_weight)


def _gateup(fp8, A, A_scales, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
            num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta,
            C_scales) -> None:
    """Checks and dispatch of the a4w4 (fp8 False) and a8w4 (fp8 True) GEMMs."""
    checks.integer("epilogue", epilogue)
    checks.choice("epilogue", epilogue, (EPI_NONE, EPI_SITU, EPI_SILU))
    situ_beta = checks.real("situ_beta", situ_beta, positive=True, fp32=True)
    situ_linear_beta = checks.real("situ_linear_beta", situ_linear_beta, positive=True, fp32=True)
    qout = C_scales is not None
    E, K, ncols = _common(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                          num_m_blocks, block_m, A4W4_BLOCK_MS, num_valid_tokens, top_k, mul_routed_weight,
                          a_codes=not fp8, c_codes=qout, a_fp8=fp8)
    if K % SLAB_K or K == 0:
        what = "A.shape[1]" if fp8 else "2 * A.shape[1]"
        raise ValueError(f"K ({what}) must be a positive multiple of 128 for the {'a8w4' if fp8 else 'a4w4'} GEMMs; "
                         f"got {K}")
    _check_scales("A_scales", A_scales, A.shape[0], K)
    gated = epilogue in (EPI_SITU, EPI_SILU)
    n_out = ncols // 2 if gated else ncols
    if gated and ncols % 2:
        raise ValueError(f"with a gated epilogue, B must have an even number of columns (gate then up); got {ncols}")
    c_cols = C.shape[1] * 2 if qout else C.shape[1]
    if c_cols != n_out:
        what = "C (codes, two per byte)" if qout else "C"
        raise ValueError(f"{what} must have N = {n_out} columns for B's {ncols} columns under "
                         f"{EPI_NAMES[epilogue].upper()}; got {c_cols}")
    if qout:
        if not gated:
            raise ValueError("C_scales (MXFP4 output) needs a gated epilogue (EPI_SILU or EPI_SITU); got EPI_NONE")
        if n_out % 32:
            raise ValueError(f"MXFP4 output needs N % 32 == 0 (one scale per 32 columns); got N = {n_out}")
        _check_scales("C_scales", C_scales, C.shape[0], n_out)
        if C_scales.shape[0] < num_valid_tokens:
            raise ValueError(f"C_scales must have at least num_valid_tokens = {num_valid_tokens} rows; got "
                             f"{C_scales.shape[0]}")
    checks.same_device(A=A, A_scales=A_scales, C=C, C_scales=C_scales)
    checks.no_overlap("C", C, A=A, A_scales=A_scales, B=B, Bs=Bs, topk_weights=topk_weights,
                      sorted_token_ids=sorted_token_ids, expert_ids=expert_ids,
                      num_tokens_post_padded=num_tokens_post_padded, C_scales=C_scales)
    if qout:
        checks.no_overlap("C_scales", C_scales, A=A, A_scales=A_scales, B=B, Bs=Bs, topk_weights=topk_weights)
    _a4w4_op(A, A_scales, B, Bs, C, C_scales, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
             num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta)


def mxfp4_moe_down_a4w4(A: torch.Tensor, A_scales: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                        topk_weights: torch.Tensor | None, sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor,
                        num_tokens_post_padded: torch.Tensor, num_m_blocks: int, block_m: int,
                        num_valid_tokens: int, top_k: int = 1, mul_routed_weight: bool = False) -> None:
    """Grouped a4w4 GEMM of the down projection (gfx950): C bf16 ``[rows, N]`` = w(slot) * A[slot // top_k] .
    W^T, A the MXFP4 intermediate (codes ``[rows, K/2]`` + scales ``[rows, K/32]``, e.g. written by
    mxfp4_moe_gateup_a4w4 with C_scales; top_k = 1 then), any K % 128 == 0; block_m 16, 32 or 48.

    K <= 2048 runs the resident-tile down kernel (the A tile staged in LDS once, column chunks swept: its
    column steps and tiles from a4w4_down_plan); larger K the gate/up kernel with EPI_NONE. Both give the same
    bits (one accumulation chain).

    Args:
        A: MXFP4 codes uint8 ``[rows, K/2]`` of the intermediate (contiguous k, any row stride); K % 128 == 0.
        A_scales: E8M0 uint8 ``[rows, K/32]``, contiguous.
        B: repacked down weights uint8 ``[E, K/32, N, 16]`` (repack_mxfp4).
        Bs: repacked E8M0 scales uint8 ``[E, K/32, N]`` (repack_mxfp4_scales).
        C: bf16 ``[rows_out, N]`` contiguous output, row = slot; must not overlap the inputs.
        topk_weights: fp32 or bf16, contiguous, >= num_valid_tokens elements; required when mul_routed_weight.
        sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks: from moe_align_block_size (or
            vLLM's / SGLang's aligner), as mxfp4_moe_down.
        block_m: 16, 32 or 48.
        num_valid_tokens: slots s < it are live.
        top_k: the row of A read for slot s is s // top_k (1 when A holds one row per slot).
        mul_routed_weight: bool; multiply each slot's row by its topk_weights entry.
    """
    mxfp4_moe_gateup_a4w4(A, A_scales, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                          num_m_blocks, block_m, num_valid_tokens, top_k, EPI_NONE, mul_routed_weight)


@torch.library.custom_op("moonmath::mxfp4_moe_a4w4", mutates_args=("C", "C_scales"))
def _a4w4_op(A: torch.Tensor, A_scales: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
             C_scales: torch.Tensor | None, topk_weights: torch.Tensor | None, sorted_ids: torch.Tensor,
             expert_ids: torch.Tensor, ntpp: torch.Tensor, num_m_blocks: int, block_m: int, num_valid_tokens: int,
             top_k: int, epilogue: int, mul_routed_weight: bool, situ_beta: float, situ_linear_beta: float) -> None:
    if get_backend() == "reference":
        _reference(A, A_scales, B, Bs, C, C_scales, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks,
                   block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta)
    elif epilogue == EPI_NONE and C_scales is None and A.dtype == torch.uint8 and 2 * A.shape[1] <= DOWN_MAX_K:
        launch_a4w4_down(A, A_scales, B, Bs, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
                         num_valid_tokens, top_k, mul_routed_weight)
    else:
        launch_a4w4(A, A_scales, B, Bs, C, C_scales, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks,
                    block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta)


@_a4w4_op.register_fake
def _(A, A_scales, B, Bs, C, C_scales, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
      num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta) -> None:
    return None


def _reference(A, A_scales, B, Bs, C, C_scales, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
               num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta) -> None:
    """The reference backend: A decoded exactly, the a16w4 reference GEMM, then (MXFP4 output) the rule."""
    decode = quant.dequantize_mxfp8 if A.dtype == torch.float8_e4m3fn else quant.dequantize
    Af = decode(A, A_scales[:A.shape[0]])
    if C_scales is None:
        reference.grouped_gemm(Af, B, Bs, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
                               num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta)
        return
    n_out = C.shape[1] * 2
    tmp = torch.zeros(C.shape[0], n_out, dtype=torch.bfloat16, device=C.device)
    reference.grouped_gemm(Af, B, Bs, tmp, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
                           num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta)
    rows, _ = reference.live_slots(sorted_ids, expert_ids, ntpp, num_m_blocks, block_m, num_valid_tokens, B.shape[0])
    if rows.numel():
        q, s = quant.quantize_reference(tmp[rows])
        C[rows] = q
        C_scales[rows] = s


def _a_operand(A: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(A, row stride in bytes) as the kernels read it (one-byte elements): 16-byte aligned rows (else a
    contiguous copy)."""
    T, row_bytes = A.shape
    a_stride = A.stride(0) if T > 1 else row_bytes
    if A.data_ptr() % 16 or (T > 1 and a_stride % 16):
        return A.clone(memory_format=torch.contiguous_format), row_bytes
    return A, a_stride


def _check_reach(op: str, sizes: dict[str, int]) -> None:
    for name, nbytes in sizes.items():
        if nbytes > _BUFFER_LIMIT:
            raise ValueError(f"{op}: {name} spans {nbytes} bytes; the kernels address each buffer with 32-bit byte "
                             f"offsets, at most 4 GiB - 1 bytes (split the call)")


def a4w4_nt(block_m: int, n_out: int, quantised_out: bool) -> int:
    """Column tiles of 16 per wave: 2 for MXFP4 output (whole 32-column groups per wave); else 1 at block_m 16
    (more workgroups at decode) and 2 when it covers no more padded columns than 1 does. Never changes results."""
    if quantised_out:
        return 2
    if block_m == 16:
        return 1
    cover1 = -(-n_out // COLS_PER_NT) * COLS_PER_NT
    return 2 if -(-n_out // (2 * COLS_PER_NT)) * 2 * COLS_PER_NT <= cover1 else 1


def launch_a4w4(A, A_scales, B, Bs, C, C_scales, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
                num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta=1.0, situ_linear_beta=1.0,
                nt: int | None = None, op: str = "moonmath_mxfp4_moe.mxfp4_moe_gateup_a4w4") -> dict | None:
    """Run mxfp4_moe_a4w4_bm<BM>_nt<NT>_<epi>[_q]; returns the emulator's counters (emu) or None (hip)."""
    from .kernel import KERNELS, _check_b, _topk, _weight_reach

    E, G, nb, _ = B.shape
    T, row_bytes = A.shape
    fp8 = A.dtype == torch.float8_e4m3fn
    K = row_bytes if fp8 else 2 * row_bytes
    qout = C_scales is not None
    n_out = nb // 2 if epilogue in (EPI_SITU, EPI_SILU) else nb
    if nt is None:
        nt = a4w4_nt(block_m, n_out, qout)
    if nt not in ((2,) if qout else (1, 2)):
        raise ValueError(f"{op}: nt must be {'2' if qout else '1 or 2'}; got {nt}")
    if num_m_blocks == 0 or num_valid_tokens == 0:
        return None
    A, a_stride = _a_operand(A)
    sizes = {"A": (T - 1) * a_stride + row_bytes, "A_scales": A_scales.numel(), "B_per_expert": _weight_reach(K, nb),
             "C": num_valid_tokens * n_out * (1 if qout else 2)}
    _check_reach(op, sizes)
    _check_b(op, B)
    name = f"mxfp4_moe_{'a8w4' if fp8 else 'a4w4'}_bm{block_m}_nt{nt}_{EPI_NAMES[epilogue]}{'_q' if qout else ''}"
    grid = (-(-n_out // (COLS_PER_NT * nt)), num_m_blocks, 1)
    args = [A, A_scales, B, Bs, C, C_scales, _topk(topk_weights, mul_routed_weight), sorted_ids, expert_ids, ntpp,
            sorted_ids.numel(), num_valid_tokens, T, top_k, K, nb, E, int(bool(mul_routed_weight)), float(situ_beta),
            float(situ_linear_beta), a_stride]
    return KERNELS.launch(op, target_arch(), "mxfp4_moe_a4w4", name, grid, THREADS, args)


def a4w4_down_plan(num_m_blocks: int, N: int, block_m: int, num_cus: int = 256) -> tuple[int, int]:
    """(nt, n_steps) of the resident-tile down kernel: nt as a4w4_nt; n_steps = the column chunks one
    workgroup sweeps, as many as keep >= 4 workgroups per CU (each extra step saves one staging of the A tile),
    then evened out (steps = total / ceil(total / steps)). Never changes results."""
    nt = a4w4_nt(block_m, N, False)
    total = -(-N // (COLS_PER_NT * nt))
    steps = max(1, min(total, total * num_m_blocks // (4 * num_cus)))
    steps = -(-total // -(-total // steps))
    return nt, steps


def launch_a4w4_down(A, A_scales, B, Bs, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
                     num_valid_tokens, top_k, mul_routed_weight, nt: int | None = None, n_steps: int | None = None,
                     op: str = "moonmath_mxfp4_moe.mxfp4_moe_down_a4w4") -> dict | None:
    """Run mxfp4_moe_a4w4_down_bm<BM>_nt<NT> (K <= 2048); returns the emulator's counters (emu) or None (hip)."""
    from .kernel import KERNELS, _check_b, _topk, _weight_reach

    E, G, N, _ = B.shape
    T, half = A.shape
    K = 2 * half
    if K > DOWN_MAX_K:
        raise ValueError(f"{op}: the resident-tile down kernel serves K <= {DOWN_MAX_K}; got {K}")
    pnt, psteps = a4w4_down_plan(num_m_blocks, N, block_m)
    nt = pnt if nt is None else nt
    n_steps = (psteps if nt == pnt else 1) if n_steps is None else n_steps
    if nt not in (1, 2) or n_steps < 1:
        raise ValueError(f"{op}: nt must be 1 or 2 and n_steps >= 1; got nt={nt}, n_steps={n_steps}")
    if num_m_blocks == 0 or num_valid_tokens == 0:
        return None
    A, a_stride = _a_operand(A)
    sizes = {"A": (T - 1) * a_stride + half, "A_scales": A_scales.numel(), "B_per_expert": _weight_reach(K, N),
             "C": num_valid_tokens * N * 2}
    _check_reach(op, sizes)
    _check_b(op, B)
    chunks = -(-N // (COLS_PER_NT * nt))
    grid = (-(-chunks // n_steps), num_m_blocks, 1)
    args = [A, A_scales, B, Bs, C, _topk(topk_weights, mul_routed_weight), sorted_ids, expert_ids, ntpp,
            sorted_ids.numel(), num_valid_tokens, T, top_k, K, N, E, int(bool(mul_routed_weight)), n_steps, a_stride]
    return KERNELS.launch(op, target_arch(), "mxfp4_moe_a4w4", f"mxfp4_moe_a4w4_down_bm{block_m}_nt{nt}", grid,
                          THREADS, args)


LAYER_INTERS = (256, 512)  # intermediate sizes of the one-launch layer kernel (the whole I per workgroup)


def mxfp4_moe_layer_a4w4_block_m(topk_ids: torch.Tensor, num_experts: int, num_cus: int = 0) -> int:
    """M tile of mxfp4_moe_layer_a4w4 for this routing (csrc/host/moe_planners_gfx950.hpp, layer_block_m): the
    gate/up rule's tile unless a taller one (32, 48) puts fewer M blocks on the busiest CU. Never changes results.

    Args:
        topk_ids: int32 or int64 ``[T, top_k]`` expert of each slot; ids outside [0, num_experts) are routed
            nowhere (as moe_align_block_size).
        num_experts: int in [1, 2^31).
        num_cus: int in [0, 65535]; 0 asks the live device (hip) or the target arch (256 on gfx950).

    Returns:
        16, 32 or 48.
    """
    from .planners import MAX_I32, _c, _cus

    checks.tensor("topk_ids", topk_ids, dtype=(torch.int32, torch.int64), ndim=2)
    checks.integer("num_experts", num_experts, lo=1, hi=MAX_I32)
    ids = topk_ids.reshape(-1).to("cpu", torch.int64)
    ids = ids[(ids >= 0) & (ids < num_experts)]
    rows = torch.bincount(ids, minlength=num_experts).tolist()
    return _c().gfx950_mxfp4_moe_layer_block_m(rows, _cus(num_cus))


MAX_DOWN_SPLITS = 4


def mxfp4_moe_layer_a4w4_down_splits(topk_ids: torch.Tensor, num_experts: int, block_m: int, num_cus: int = 0) -> int:
    """Workgroups per M block of mxfp4_moe_layer_a4w4 (its ``down_splits``) for this routing: the down columns
    are split over s workgroups, each computing the block's stage 1 in full, when s x the live blocks still fit
    one per CU (s = CUs // blocks, at most MAX_DOWN_SPLITS; 1 when the blocks fill the CUs). A small batch leaves
    CUs idle, and a workgroup's time is its bytes over its CU's share of HBM: split, each reads the gate/up
    weights and 1/s of the down weights. Never changes results.

    Args:
        topk_ids: int32 or int64 ``[T, top_k]`` expert of each slot; ids outside [0, num_experts) are routed
            nowhere.
        num_experts: int in [1, 2^31).
        block_m: the layer's M tile (16, 32 or 48).
        num_cus: int in [0, 65535]; 0 asks the live device (hip) or the target arch (256 on gfx950).

    Returns:
        An int in [1, MAX_DOWN_SPLITS].
    """
    from .planners import MAX_I32, _cus

    checks.tensor("topk_ids", topk_ids, dtype=(torch.int32, torch.int64), ndim=2)
    checks.integer("num_experts", num_experts, lo=1, hi=MAX_I32)
    checks.choice("block_m", block_m, A4W4_BLOCK_MS)
    ids = topk_ids.reshape(-1).to("cpu", torch.int64)
    ids = ids[(ids >= 0) & (ids < num_experts)]
    rows = torch.bincount(ids, minlength=num_experts)
    blocks = int(((rows + block_m - 1) // block_m).sum())
    return max(1, min(MAX_DOWN_SPLITS, _cus(num_cus) // max(blocks, 1)))


def mxfp4_moe_layer_a4w4(A: torch.Tensor, A_scales: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor,
                         B2: torch.Tensor, Bs2: torch.Tensor, C: torch.Tensor, topk_weights: torch.Tensor | None,
                         sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor,
                         num_tokens_post_padded: torch.Tensor, num_m_blocks: int, block_m: int,
                         num_valid_tokens: int, top_k: int, epilogue: int = EPI_SILU, mul_routed_weight: bool = True,
                         situ_beta: float = 1.0, situ_linear_beta: float = 1.0, down_splits: int = 1) -> None:
    """The a4w4 MoE layer of every routed slot in one launch (gfx950): gate/up, the gated epilogue quantised to
    MXFP4, the down projection times the routed weight; writes C in place. Bit-equal to mxfp4_moe_gateup_a4w4
    (with C_scales) followed by mxfp4_moe_down_a4w4 (top_k = 1) on the same inputs; the MXFP4 intermediate stays
    in LDS. Served intermediate sizes: I in LAYER_INTERS (256, 512); others use the two ops.

    Args:
        A: MXFP4 codes uint8 ``[T, K/2]`` of the activations (mxfp4_quantize), row of slot s = s // top_k; K a
            positive multiple of 128.
        A_scales: E8M0 uint8 ``[T, K/32]``, contiguous.
        B: repacked gate/up weights uint8 ``[E, K/32, 2I, 16]`` (gate columns [0, I), up [I, 2I)).
        Bs: their repacked E8M0 scales uint8 ``[E, K/32, 2I]``.
        B2: repacked down weights uint8 ``[E, I/32, N, 16]``.
        Bs2: their repacked E8M0 scales uint8 ``[E, I/32, N]``.
        C: bf16 ``[rows, N]`` contiguous output, row = slot (rows >= num_valid_tokens), N % 4 == 0, 8-byte aligned;
            must not overlap the inputs.
        topk_weights: fp32 or bf16, contiguous, >= num_valid_tokens elements (flat index = slot); required when
            mul_routed_weight. Applied after the down projection (stage 2), as AITER's a4w4 path does.
        sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks: from moe_align_block_size (or vLLM's /
            SGLang's aligner), as mxfp4_moe_gateup.
        block_m: 16, 32 or 48.
        num_valid_tokens: slots s < it are live.
        top_k: slots per token (the row of A read for slot s is s // top_k).
        epilogue: EPI_SILU (SwiGLU, default) or EPI_SITU (SituGLU).
        mul_routed_weight: bool; multiply each slot's output row by its topk_weights entry (default True).
        situ_beta, situ_linear_beta: b and L of EPI_SITU; finite, > 0.
        down_splits: int in [1, MAX_DOWN_SPLITS]: workgroups per M block, the down columns split between them
            (each computes the block's stage 1); mxfp4_moe_layer_a4w4_down_splits plans it. Never changes results.
    """
    checks.integer("epilogue", epilogue)
    checks.choice("epilogue", epilogue, (EPI_SITU, EPI_SILU))
    checks.integer("down_splits", down_splits, lo=1, hi=MAX_DOWN_SPLITS)
    situ_beta = checks.real("situ_beta", situ_beta, positive=True, fp32=True)
    situ_linear_beta = checks.real("situ_linear_beta", situ_linear_beta, positive=True, fp32=True)
    E, K, ncols = _common(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                          num_m_blocks, block_m, A4W4_BLOCK_MS, num_valid_tokens, top_k, mul_routed_weight,
                          a_codes=True)
    if K % SLAB_K or K == 0:
        raise ValueError(f"K (2 * A.shape[1]) must be a positive multiple of 128 for the a4w4 GEMMs; got {K}")
    _check_scales("A_scales", A_scales, A.shape[0], K)
    inter = ncols // 2
    if ncols % 2 or inter not in LAYER_INTERS:
        raise ValueError(f"B must have 2I columns (gate then up) with I in {LAYER_INTERS} for the one-launch layer; "
                         f"got {ncols} (use mxfp4_moe_gateup_a4w4 + mxfp4_moe_down_a4w4)")
    checks.tensor("B2", B2, dtype=torch.uint8, ndim=4, contiguous=True)
    n = C.shape[1]
    if n % 4 or C.data_ptr() % 8:
        raise ValueError(f"C must have N % 4 == 0 columns and start on an 8-byte boundary (the layer stores 4 bf16 "
                         f"at a time); got N = {n}, address mod 8 = {C.data_ptr() % 8}")
    checks.tensor("B2", B2, shape=[E, inter // 32, n, 16])
    checks.tensor("Bs2", Bs2, dtype=torch.uint8, shape=[E, inter // 32, n], contiguous=True)
    checks.same_device(A=A, A_scales=A_scales, B2=B2, Bs2=Bs2, C=C)
    checks.no_overlap("C", C, A=A, A_scales=A_scales, B=B, Bs=Bs, B2=B2, Bs2=Bs2, topk_weights=topk_weights,
                      sorted_token_ids=sorted_token_ids, expert_ids=expert_ids,
                      num_tokens_post_padded=num_tokens_post_padded)
    _layer_op(A, A_scales, B, Bs, B2, Bs2, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
              num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta,
              down_splits)


@torch.library.custom_op("moonmath::mxfp4_moe_layer_a4w4", mutates_args=("C",))
def _layer_op(A: torch.Tensor, A_scales: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, B2: torch.Tensor,
              Bs2: torch.Tensor, C: torch.Tensor, topk_weights: torch.Tensor | None, sorted_ids: torch.Tensor,
              expert_ids: torch.Tensor, ntpp: torch.Tensor, num_m_blocks: int, block_m: int, num_valid_tokens: int,
              top_k: int, epilogue: int, mul_routed_weight: bool, situ_beta: float, situ_linear_beta: float,
              down_splits: int) -> None:
    if get_backend() == "reference":
        inter = B.shape[2] // 2
        hq = torch.zeros(num_valid_tokens, inter // 2, dtype=torch.uint8, device=C.device)
        hs = torch.zeros(num_valid_tokens, inter // 32, dtype=torch.uint8, device=C.device)
        _reference(A, A_scales, B, Bs, hq, hs, None, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
                   num_valid_tokens, top_k, epilogue, False, situ_beta, situ_linear_beta)
        _reference(hq, hs, B2, Bs2, C, None, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
                   num_valid_tokens, 1, EPI_NONE, mul_routed_weight, situ_beta, situ_linear_beta)
    else:
        launch_a4w4_layer(A, A_scales, B, Bs, B2, Bs2, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks,
                          block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta,
                          down_splits=down_splits)


@_layer_op.register_fake
def _(A, A_scales, B, Bs, B2, Bs2, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
      num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta, down_splits) -> None:
    return None


def launch_a4w4_layer(A, A_scales, B, Bs, B2, Bs2, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks,
                      block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta=1.0,
                      situ_linear_beta=1.0, down_splits: int = 1,
                      op: str = "moonmath_mxfp4_moe.mxfp4_moe_layer_a4w4") -> dict | None:
    """Run mxfp4_moe_a4w4_layer_bm<BM>_i<I>_<epi> on grid (down_splits, num_m_blocks); returns the emulator's
    counters (emu) or None (hip)."""
    from .kernel import KERNELS, _check_b, _topk, _weight_reach

    E, G, ncols, _ = B.shape
    inter, n = ncols // 2, B2.shape[2]
    K = 2 * A.shape[1]
    if num_m_blocks == 0 or num_valid_tokens == 0:
        return None
    T = A.shape[0]
    A, a_stride = _a_operand(A)
    _check_reach(op, {"A": (T - 1) * a_stride + K // 2, "A_scales": A_scales.numel(),
                      "B_per_expert": _weight_reach(K, ncols), "B2_per_expert": _weight_reach(inter, n),
                      "C": num_valid_tokens * n * 2})
    _check_b(op, B)
    _check_b(op, B2)
    name = f"mxfp4_moe_a4w4_layer_bm{block_m}_i{inter}_{EPI_NAMES[epilogue]}"
    args = [A, A_scales, B, Bs, B2, Bs2, C, _topk(topk_weights, mul_routed_weight), sorted_ids, expert_ids, ntpp,
            sorted_ids.numel(), num_valid_tokens, T, top_k, K, n, E, int(bool(mul_routed_weight)), float(situ_beta),
            float(situ_linear_beta), a_stride]
    # I / 64 waves (4 gate + 4 up tiles each): 256 threads at I = 256, 512 at I = 512
    return KERNELS.launch(op, target_arch(), "mxfp4_moe_a4w4", name, (down_splits, num_m_blocks, 1), inter, args)
