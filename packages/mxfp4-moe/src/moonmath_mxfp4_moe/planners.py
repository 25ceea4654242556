"""Tile planners of the MXFP4 MoE GEMMs. The logic is pure C++ (csrc/host/moe_planners.hpp), bound in
the package's ``_C`` module; these wrappers type-check arguments and fill in the CU count.

Every argument is bounded by the kernel field it reaches (token and column counts uint32, expert
counts and block counts int32): out of range is a ValueError naming it, never a wrapped value.
"""
from __future__ import annotations

import functools

from moonmath_common import checks

MAX_U32 = 2**32 - 1   # num_valid_tokens, N, K
MAX_I32 = 2**31 - 1   # num_active_experts, num_m_blocks
MAX_CUS = 65535


def _c():
    try:
        from . import _C
    except ImportError as e:  # pragma: no cover - only in a source tree without a build
        raise ImportError("moonmath_mxfp4_moe._C (the host planners) is not built: install the package "
                          "(pip install ./packages/mxfp4-moe)") from e
    return _C


def _tokens(num_valid_tokens: int, num_active_experts: int) -> None:
    checks.integer("num_valid_tokens", num_valid_tokens, lo=0, hi=MAX_U32)
    checks.integer("num_active_experts", num_active_experts, lo=1, hi=MAX_I32)


@functools.lru_cache(maxsize=4096)
def _cached(name: str, *args: int):
    """The C planner `name` on validated ints (plans repeat by shape: one C call per distinct shape)."""
    return getattr(_c(), name)(*args)


def mxfp4_moe_gateup_block_m(num_valid_tokens: int, num_active_experts: int) -> int:
    """M tile of mxfp4_moe_gateup: 16 if rows per active expert <= 12, 32 if < 29, else 48.

    Args:
        num_valid_tokens: int in [0, 2^32): the live slots (tokens x top_k).
        num_active_experts: int in [1, 2^31): the experts that receive any slot.

    Returns:
        16, 32 or 48.
    """
    _tokens(num_valid_tokens, num_active_experts)
    return _cached("mxfp4_moe_gateup_block_m", num_valid_tokens, num_active_experts)


def mxfp4_moe_gateup_supports_k(K: int) -> bool:
    """Whether mxfp4_moe_gateup serves this K.

    Args:
        K: int, the reduction length (A.shape[1]).

    Returns:
        True for a positive multiple of 32 up to 2**32 - 1.
    """
    checks.integer("K", K)
    return 0 < K <= MAX_U32 and _c().mxfp4_moe_gateup_supports_k(K)


def mxfp4_moe_down_block_m(num_valid_tokens: int, num_active_experts: int, K: int) -> int:
    """M tile of mxfp4_moe_down, or 0 when the down kernel does not serve K.

    Args:
        num_valid_tokens: int in [0, 2^32): the live slots (tokens x top_k).
        num_active_experts: int in [1, 2^31): the experts that receive any slot.
        K: int in [1, 2^32): the down projection's reduction length; the kernel serves 384, 512 and 768.

    Returns:
        16, 32 or 64; 0 for another K (then run the down projection with mxfp4_moe_gateup and EPI_NONE).
    """
    _tokens(num_valid_tokens, num_active_experts)
    checks.integer("K", K, lo=1, hi=MAX_U32)
    return _cached("mxfp4_moe_down_block_m", num_valid_tokens, num_active_experts, K)


def mxfp4_moe_down_nt(num_valid_tokens: int, num_active_experts: int) -> int:
    """Column tiles per lane group of mxfp4_moe_down: 1 if rows per active expert <= 4, else 2.

    Args:
        num_valid_tokens: int in [0, 2^32): the live slots (tokens x top_k).
        num_active_experts: int in [1, 2^31): the experts that receive any slot.

    Returns:
        1 or 2.
    """
    _tokens(num_valid_tokens, num_active_experts)
    return _cached("mxfp4_moe_down_nt", num_valid_tokens, num_active_experts)


def _cus(num_cus: int) -> int:
    checks.integer("num_cus", num_cus, lo=0, hi=MAX_CUS)
    if num_cus:
        return num_cus
    from moonmath_common.backend import cu_count, target_arch

    return cu_count(target_arch())


def mxfp4_moe_down_n_steps(num_m_blocks: int, N: int, num_cus: int, block_m: int, nt: int) -> int:
    """Column steps (chunks of 128 * nt columns) each down CTA sweeps.

    Args:
        num_m_blocks: int in [0, 2^31): the M blocks of the launch (moe_align_block_size's num_blocks).
        N: int in [1, 2^32): the output columns.
        num_cus: int in [0, 65535]; 0 asks the live device (hip) or the target arch (304 gfx942, 256 gfx950).
        block_m: 16, 32 or 64.
        nt: 1 or 2.

    Returns:
        n_steps >= 1 (any value gives the same result; this one balances the CUs).
    """
    checks.integer("num_m_blocks", num_m_blocks, lo=0, hi=MAX_I32)
    checks.integer("N", N, lo=1, hi=MAX_U32)
    checks.choice("block_m", block_m, (16, 32, 64))
    checks.choice("nt", nt, (1, 2))
    return _cached("mxfp4_moe_down_n_steps", num_m_blocks, N, _cus(num_cus), block_m, nt)


def mxfp4_moe_down_plan(num_valid_tokens: int, num_active_experts: int, N: int, K: int, num_m_blocks: int,
                        num_cus: int = 0) -> tuple[int, int, int]:
    """The launch parameters of mxfp4_moe_down: its block_m, nt and n_steps planners in one call.

    Args:
        num_valid_tokens: int in [0, 2^32): the live slots (tokens x top_k).
        num_active_experts: int in [1, 2^31): the experts that receive any slot.
        N: int in [1, 2^32): the output columns.
        K: int in [1, 2^32): the reduction length.
        num_m_blocks: int in [0, 2^31): the M blocks of the launch.
        num_cus: int in [0, 65535]; 0 uses the live device's CU count (hip) or the target arch's (304 on gfx942,
            256 on gfx950).

    Returns:
        (block_m, nt, n_steps); (0, 0, 0) when the down kernel does not serve K (nt 1 when N is odd).
    """
    _tokens(num_valid_tokens, num_active_experts)
    checks.integer("N", N, lo=1, hi=MAX_U32)
    checks.integer("K", K, lo=1, hi=MAX_U32)
    checks.integer("num_m_blocks", num_m_blocks, lo=0, hi=MAX_I32)
    return tuple(_cached("mxfp4_moe_down_plan", num_valid_tokens, num_active_experts, N, K, num_m_blocks,
                         _cus(num_cus)))
