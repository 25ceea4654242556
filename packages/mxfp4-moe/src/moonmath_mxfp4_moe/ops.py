"""The MXFP4 MoE grouped GEMMs: mxfp4_moe_gateup (optional fused SituGLU or SwiGLU) and mxfp4_moe_down."""
from __future__ import annotations

import torch

from moonmath_common import checks, get_backend

from . import reference

EPI_NONE = 0
EPI_SITU = 1
EPI_SILU = 2
GATEUP_BLOCK_MS = (16, 32, 48)
DOWN_BLOCK_MS = (16, 32, 64)
DOWN_KS = (384, 512, 768)


def _common(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks,
            block_m, block_ms, num_valid_tokens, top_k, mul_routed_weight, sorted_name="sorted_token_ids",
            ntpp_name="num_tokens_post_padded", a_codes=False, c_codes=False, a_fp8=False):
    """Checks shared by gate/up and down; returns (E, K, Ncols of B). a_codes / c_codes: A / C hold MXFP4 codes
    (uint8, two k per byte: K = 2 * A.shape[1]) instead of bf16 (the a4w4 ops); a_fp8: A holds MXFP8 codes
    (float8_e4m3fn, K = A.shape[1]; the a8w4 ops)."""
    key = _shape_key(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks,
                     block_m, block_ms, num_valid_tokens, top_k, mul_routed_weight, sorted_name, ntpp_name, a_codes,
                     c_codes, a_fp8)
    dims = _SHAPES_CHECKED.get(key) if key is not None else None
    if dims is None:
        dims = _shape_checks(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                             num_m_blocks, block_m, block_ms, num_valid_tokens, top_k, mul_routed_weight, sorted_name,
                             ntpp_name, a_codes, c_codes, a_fp8)
        if key is not None:
            if len(_SHAPES_CHECKED) >= 1024:
                _SHAPES_CHECKED.clear()
            _SHAPES_CHECKED[key] = dims
    E = dims[0]
    if checks.on_host(sorted_token_ids, expert_ids, num_tokens_post_padded):
        padded = int(num_tokens_post_padded[0])  # one element: read once, not reduced twice
        if padded < 0:
            raise ValueError(f"{ntpp_name} values must be >= 0; got {padded} (first bad at flat index 0)")
        # Only blocks below the padded total are read (aligners may leave the rest uninitialised).
        live = min(num_m_blocks, -(-padded // block_m))
        checks.values_in("expert_ids", expert_ids[:live], hi=E)
        checks.values_in(sorted_name, sorted_token_ids[:live * block_m], lo=0)
    return dims


# Argument metadata (dtypes, shapes, strides, devices, scalar values) whose shape checks passed -> (E, K, Ncols):
# a serving engine repeats a handful of shapes, so each is checked once. Values are still checked every call.
_SHAPES_CHECKED: dict[tuple, tuple[int, int, int]] = {}


def _shape_key(*args) -> tuple | None:
    """The metadata a call's shape checks depend on, or None when an argument is not a plain tensor (a subclass,
    e.g. a FakeTensor while torch.compile traces, has symbolic shapes), None, an exact int / bool / str or a
    tuple (then every check runs)."""
    key = []
    for a in args:
        if type(a) is torch.Tensor:
            key.append((a.dtype, a.shape, a.stride(), a.device))
        elif a is None or type(a) in (int, bool, str, tuple):
            key.append((type(a), a))
        else:
            return None
    return tuple(key)


def _shape_checks(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks,
                  block_m, block_ms, num_valid_tokens, top_k, mul_routed_weight, sorted_name, ntpp_name,
                  a_codes=False, c_codes=False, a_fp8=False):
    """The checks of _common that depend only on argument metadata; returns (E, K, Ncols of B)."""
    a_dtype = torch.float8_e4m3fn if a_fp8 else torch.uint8 if a_codes else torch.bfloat16
    checks.tensor("A", A, dtype=a_dtype, ndim=2, last_dim_contiguous=True)
    if B is not None and isinstance(B, torch.Tensor) and B.dim() == 3:
        raise ValueError(f"B must be the repacked weights [E, K/32, N, 16] (repack_mxfp4 output); got a 3-D tensor "
                         f"{list(B.shape)}, which looks like the stock layout [E, N, K/2]: pass repack_mxfp4(B)")
    checks.tensor("B", B, dtype=torch.uint8, ndim=4, contiguous=True)
    checks.tensor("Bs", Bs, dtype=torch.uint8, ndim=3, contiguous=True)
    checks.tensor("C", C, dtype=torch.uint8 if c_codes else torch.bfloat16, ndim=2, contiguous=True)
    if topk_weights is not None:
        checks.tensor("topk_weights", topk_weights, dtype=(torch.float32, torch.bfloat16), contiguous=True)
    checks.tensor(sorted_name, sorted_token_ids, dtype=torch.int32, ndim=1, contiguous=True)
    checks.tensor("expert_ids", expert_ids, dtype=torch.int32, ndim=1, contiguous=True)
    checks.tensor(ntpp_name, num_tokens_post_padded, dtype=torch.int32, shape=[1])
    checks.integer("block_m", block_m)
    if block_m not in block_ms:
        raise ValueError(f"block_m must be {', '.join(map(str, block_ms[:-1]))} or {block_ms[-1]}; got {block_m}")
    # The kernels index block rows as uint32 (num_m_blocks * block_m) and take these as 32-bit fields.
    checks.integer("num_m_blocks", num_m_blocks, lo=0, hi=checks.U32_MAX // block_m)
    checks.u32("num_valid_tokens", num_valid_tokens)
    checks.u32("top_k", top_k, lo=1)
    checks.boolean("mul_routed_weight", mul_routed_weight)
    checks.same_device(A=A, B=B, Bs=Bs, C=C, topk_weights=topk_weights, **{sorted_name: sorted_token_ids},
                       expert_ids=expert_ids, **{ntpp_name: num_tokens_post_padded})
    E, G, ncols, gran = B.shape
    T, K = A.shape
    if a_codes:
        K *= 2
    if gran != 16:
        raise ValueError(f"B must be [E, K/32, N, 16] (repack_mxfp4 output); got last dim {gran}")
    if K != 32 * G:
        raise ValueError(f"B must have K/32 = {K // 32 if K % 32 == 0 else K / 32} scale groups (dim 1) for A's "
                         f"K = {K}; got {G}")
    checks.tensor("Bs", Bs, shape=[E, G, ncols])
    if mul_routed_weight and topk_weights is None:
        raise ValueError("topk_weights is required when mul_routed_weight=True; got None")
    if topk_weights is not None and topk_weights.numel() < num_valid_tokens:
        raise ValueError(f"topk_weights must have at least num_valid_tokens = {num_valid_tokens} elements (one per "
                         f"slot); got {topk_weights.numel()}")
    if C.shape[0] < num_valid_tokens:
        raise ValueError(f"C must have at least num_valid_tokens = {num_valid_tokens} rows (row = slot); got "
                         f"{C.shape[0]}")
    if T * top_k < num_valid_tokens:
        raise ValueError(f"A must have at least ceil(num_valid_tokens / top_k) = {-(-num_valid_tokens // top_k)} rows "
                         f"(row = slot // top_k); got {T}")
    # sorted_token_ids may be shorter than num_m_blocks * block_m (vLLM's and SGLang's aligners allocate
    # n + E*(bm-1) entries): the kernels are given its length and treat block rows past it as padding.
    if sorted_token_ids.numel() > checks.U32_MAX:
        raise ValueError(f"{sorted_name} must have at most 2**32 - 1 elements; got {sorted_token_ids.numel()}")
    if expert_ids.numel() < num_m_blocks:
        raise ValueError(f"expert_ids must have at least num_m_blocks = {num_m_blocks} elements; got "
                         f"{expert_ids.numel()}")
    return E, K, ncols


def mxfp4_moe_gateup(A: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                     topk_weights: torch.Tensor | None, sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor,
                     num_tokens_post_padded: torch.Tensor, num_m_blocks: int, block_m: int, num_valid_tokens: int,
                     top_k: int, epilogue: int = EPI_NONE, mul_routed_weight: bool = False, situ_beta: float = 1.0,
                     situ_linear_beta: float = 1.0) -> None:
    """Grouped MXFP4 GEMM of the gate/up projection, optional fused SiLU-GLU; writes ``C`` in place.

    Args:
        A: bf16 ``[T, K]`` activations, one row per token (row of slot s is s // top_k), contiguous k and
            any row stride (a row-strided view is read in place). K a positive multiple of 32.
        B: repacked weights uint8 ``[E, K/32, Nb, 16]`` (repack_mxfp4). Under EPI_SITU/EPI_SILU, Nb = 2N: gate
            columns [0, N), up columns [N, 2N); under EPI_NONE, Nb = N.
        Bs: repacked E8M0 scales uint8 ``[E, K/32, Nb]`` (repack_mxfp4_scales).
        C: bf16 ``[rows, N]`` contiguous output, row = slot (rows >= num_valid_tokens).
        topk_weights: fp32 or bf16, contiguous, >= num_valid_tokens elements (flat index = slot); required
            when mul_routed_weight. Applied in fp32 under every epilogue (after the SituGLU / SwiGLU).
        sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks: from moe_align_block_size (or
            vLLM's / SGLang's aligner: sorted_token_ids may be shorter than num_m_blocks * block_m; rows
            past its end are padding).
        block_m: 16, 32 or 48 (mxfp4_moe_gateup_block_m). num_valid_tokens: slots s < it are live.
        top_k: slots per token. epilogue: EPI_NONE, EPI_SITU (SituGLU) or EPI_SILU (SwiGLU:
            silu(gate) * up, the DeepSeek-V3/R1 and Qwen3 MLP activation).
        situ_beta, situ_linear_beta: b and L of (b tanh(g/b) sigmoid(g)) * (L tanh(u/L)); finite, > 0.
        mul_routed_weight: bool; multiply each slot's row by its topk_weights entry.
    """
    checks.integer("epilogue", epilogue)
    checks.choice("epilogue", epilogue, (EPI_NONE, EPI_SITU, EPI_SILU))
    situ_beta = checks.real("situ_beta", situ_beta, positive=True, fp32=True)
    situ_linear_beta = checks.real("situ_linear_beta", situ_linear_beta, positive=True, fp32=True)
    E, K, ncols = _common(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                          num_m_blocks, block_m, GATEUP_BLOCK_MS, num_valid_tokens, top_k, mul_routed_weight)
    if K % 32 or K == 0:
        raise ValueError(f"K (A.shape[1]) must be a positive multiple of 32 (one E8M0 scale per 32 k) for "
                         f"mxfp4_moe_gateup; got {K}")
    if epilogue in (EPI_SITU, EPI_SILU):
        if ncols % 2 or C.shape[1] * 2 != ncols:
            name = "EPI_SITU" if epilogue == EPI_SITU else "EPI_SILU"
            raise ValueError(f"with {name}, B must have 2 * N columns (gate then up) for C's N = {C.shape[1]}; "
                             f"got {ncols}")
    elif C.shape[1] != ncols:
        raise ValueError(f"with EPI_NONE, C must have B's N = {ncols} columns; got {C.shape[1]}")
    _gateup_op(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks,
               block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta)


@torch.library.custom_op("moonmath::mxfp4_moe_gateup", mutates_args=("C",))
def _gateup_op(A: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor, topk_weights: torch.Tensor | None,
               sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor, num_tokens_post_padded: torch.Tensor,
               num_m_blocks: int, block_m: int, num_valid_tokens: int, top_k: int, epilogue: int,
               mul_routed_weight: bool, situ_beta: float, situ_linear_beta: float) -> None:
    if get_backend() == "reference":
        reference.grouped_gemm(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                               num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight,
                               situ_beta, situ_linear_beta)
    else:
        _run_kernel_gateup(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                           num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta,
                           situ_linear_beta)


@_gateup_op.register_fake
def _(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks, block_m,
      num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta, situ_linear_beta) -> None:
    return None


def _run_kernel_gateup(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                       num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta,
                       situ_linear_beta) -> None:
    """The hip/emu path of mxfp4_moe_gateup: the gfx942 kernel (kernel.launch_gateup picks the column tiles)."""
    from . import kernel

    kernel.launch_gateup(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                         num_m_blocks, block_m, num_valid_tokens, top_k, epilogue, mul_routed_weight, situ_beta,
                         situ_linear_beta)


def mxfp4_moe_down(A: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor,
                   topk_weights: torch.Tensor | None, sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor,
                   num_tokens_post_padded: torch.Tensor, num_m_blocks: int, block_m: int, n_steps: int, nt: int,
                   num_valid_tokens: int, top_k: int, mul_routed_weight: bool = False) -> None:
    """Grouped MXFP4 GEMM of the down projection (short K); writes ``C`` in place.

    Args:
        A: bf16 ``[rows, K]`` with K in {384, 512, 768}, contiguous k and any row stride (the gate/up
            output; row = slot // top_k, so a standard MoE passes top_k = 1). Must not overlap C.
        B: repacked weights uint8 ``[E, K/32, N, 16]`` (repack_mxfp4).
        Bs: repacked E8M0 scales uint8 ``[E, K/32, N]`` (repack_mxfp4_scales).
        C: bf16 ``[rows_out, N]`` contiguous, row = slot. C sharing memory with A (or any other input) is
            rejected: down sweeps its columns in steps while other workgroups still read A.
        topk_weights: as mxfp4_moe_gateup (fp32 or bf16; required when mul_routed_weight).
        sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks: from moe_align_block_size (or
            vLLM's / SGLang's aligner: sorted_token_ids may be shorter than num_m_blocks * block_m; rows
            past its end are padding).
        block_m: 16, 32 or 64 (64 only with K = 384). Use mxfp4_moe_down_plan for block_m, n_steps and nt.
        n_steps: >= 1 (32-bit): column steps per CTA (any value gives the same result).
        nt: 1 or 2 (2 needs an even N).
        num_valid_tokens: slots s < it are live (as mxfp4_moe_gateup).
        top_k: the row of A read for slot s is s // top_k (a standard MoE passes 1: A holds one row per slot).
        mul_routed_weight: bool; multiply each slot's row by its topk_weights entry.
    """
    checks.u32("n_steps", n_steps, lo=1)
    checks.integer("nt", nt)
    checks.choice("nt", nt, (1, 2))
    E, K, ncols = _common(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                          num_m_blocks, block_m, DOWN_BLOCK_MS, num_valid_tokens, top_k, mul_routed_weight)
    if K not in DOWN_KS:
        raise ValueError(f"K (A.shape[1]) must be 384, 512 or 768 for mxfp4_moe_down (mxfp4_moe_down_block_m returns "
                         f"0 otherwise: use mxfp4_moe_gateup with EPI_NONE); got {K}")
    if block_m == 64 and K != 384:
        raise ValueError(f"block_m 64 needs K = 384 (its staged A tile must fit in LDS); got block_m=64 with K={K}")
    if C.shape[1] != ncols:
        raise ValueError(f"C must have B's N = {ncols} columns; got {C.shape[1]}")
    if nt == 2 and ncols % 2:
        raise ValueError(f"nt = 2 needs an even N (two adjacent columns per lane); got N = {ncols}")
    checks.no_overlap("C", C, A=A, B=B, Bs=Bs, topk_weights=topk_weights, sorted_token_ids=sorted_token_ids,
                      expert_ids=expert_ids, num_tokens_post_padded=num_tokens_post_padded)
    _down_op(A, B, Bs, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, num_m_blocks, block_m,
             n_steps, nt, num_valid_tokens, top_k, mul_routed_weight)


@torch.library.custom_op("moonmath::mxfp4_moe_down", mutates_args=("C",))
def _down_op(A: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor, topk_weights: torch.Tensor | None,
             sorted_ids: torch.Tensor, expert_ids: torch.Tensor, ntpp: torch.Tensor, num_m_blocks: int, block_m: int,
             n_steps: int, nt: int, num_valid_tokens: int, top_k: int, mul_routed_weight: bool) -> None:
    if get_backend() == "reference":
        reference.grouped_gemm(A, B, Bs, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m,
                               num_valid_tokens, top_k, EPI_NONE, mul_routed_weight)
    else:
        _run_kernel_down(A, B, Bs, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m, n_steps, nt,
                         num_valid_tokens, top_k, mul_routed_weight)


@_down_op.register_fake
def _(A, B, Bs, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m, n_steps, nt, num_valid_tokens,
      top_k, mul_routed_weight) -> None:
    return None


def _run_kernel_down(A, B, Bs, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m, n_steps, nt,
                     num_valid_tokens, top_k, mul_routed_weight) -> None:
    """The hip/emu path of mxfp4_moe_down: the gfx942 kernel."""
    from . import kernel

    kernel.launch_down(A, B, Bs, C, topk_weights, sorted_ids, expert_ids, ntpp, num_m_blocks, block_m, n_steps, nt,
                       num_valid_tokens, top_k, mul_routed_weight)
