"""EPI_SILU (SwiGLU: silu(gate) * up, gate = columns [0, N), up = [N, 2N)) of mxfp4_moe_gateup.

Against the dense fp64 reference built from the stock weights (test_moe_kernel.Problem), held to
max|d| / max|ref| < 1e-2; the routed weight is applied after the GLU (docs/numerics.md); planner choices
(block_m, nt) never change a bit. Small shapes: the emulator is shared in CI.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import moonmath_mxfp4_moe as mm
from moonmath_common import get_backend, use_backend
from moonmath_mxfp4_moe import reference

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_moe_kernel import SENTINEL, TOL, Problem, bits, pytestmark, rel_err  # noqa: E402,F401
from test_moe_kernel import run_gateup as _run


@pytest.fixture(autouse=True)
def _kernel_backend(kernel_arch):
    with use_backend("hip" if get_backend() == "hip" else "emu"):
        yield


def run_gateup(p: Problem, block_m, epilogue, routed, nt=None):
    """test_moe_kernel.run_gateup with C sized for a gated epilogue (N_out = N / 2)."""
    n_out = p.N // 2 if epilogue != mm.EPI_NONE else p.N
    C = torch.full((p.nvt, n_out), 0, dtype=torch.int16).fill_(SENTINEL).view(torch.bfloat16)
    return _run(p, block_m, epilogue, routed, nt=nt, C=C)


def swiglu64(acc: torch.Tensor) -> torch.Tensor:
    n = acc.shape[1] // 2
    g, u = acc[:, :n], acc[:, n:]
    return g * torch.sigmoid(g) * u


def expected_silu(p: Problem, routed: bool) -> torch.Tensor:
    ref = swiglu64(p.dense())
    return ref * p.tw.reshape(-1, 1).double() if routed else ref


def test_epi_silu_value():
    assert mm.EPI_SILU == 2 and mm.EPI_SILU not in (mm.EPI_NONE, mm.EPI_SITU)


@pytest.mark.parametrize("T,I,K,routed,block_m", [
    (12, 256, 512, True, 32),
    (12, 384, 256, False, 48),
    (12, 101, 160, True, 16),    # N_out odd, K = 5 k-blocks (a partial slab), 2-byte edge stores
    (1, 384, 3584, True, 16),    # DeepSeek-like decode: one token, long K
])
def test_gateup_silu_vs_dense(T, I, K, routed, block_m):
    p = Problem(T, 4, 8, K, 2 * I, seed=I + K + T)
    got = run_gateup(p, block_m, mm.EPI_SILU, routed)
    assert not (bits(got) == SENTINEL).any()
    assert rel_err(got, expected_silu(p, routed)) < TOL


def test_gateup_silu_invariant_to_block_m_and_nt():
    p = Problem(10, 4, 6, 384, 2 * 256, seed=41)
    first = None
    for bm in (16, 32, 48):
        for nt in ((1, 0, 2) if bm == 16 else (1, 2)):  # nt 0: the shared gate/up tile, block_m 16 only
            C = run_gateup(p, bm, mm.EPI_SILU, True, nt=nt)
            first = C if first is None else first
            assert torch.equal(bits(C), bits(first)), f"bm={bm} nt={nt} differs from bm=16 nt=1"


def test_silu_routed_weight_applied_after_glu():
    p = Problem(6, 2, 4, 256, 256, seed=43)
    plain = run_gateup(p, 16, mm.EPI_SILU, False).double()
    routed = run_gateup(p, 16, mm.EPI_SILU, True).double()
    assert rel_err(routed, plain * p.tw.reshape(-1, 1).double()) < TOL
    assert rel_err(routed, expected_silu(p, True)) < TOL


def test_silu_differs_from_situ():
    """A mistaken epilogue dispatch (SILU running the SituGLU code) cannot pass: the two differ a lot here."""
    p = Problem(4, 2, 4, 256, 256, seed=47)
    silu, situ = run_gateup(p, 16, mm.EPI_SILU, False).double(), run_gateup(p, 16, mm.EPI_SITU, False).double()
    assert rel_err(situ, silu) > 0.1


def test_silu_public_op_emu_vs_reference_backend():
    p = Problem(6, 4, 8, 256, 2 * 128, seed=53)
    bm = mm.mxfp4_moe_gateup_block_m(p.nvt, int(torch.unique(p.ids).numel()))
    sid, eid, ntpp, nblk = mm.moe_align_block_size(p.ids, bm, p.E)
    outs = {}
    for backend in ("emu", "reference"):
        with use_backend(backend):
            h = torch.zeros(p.nvt, 128, dtype=torch.bfloat16)
            mm.mxfp4_moe_gateup(p.A, p.B, p.Bs, h, p.tw, sid, eid, ntpp, nblk, bm, p.nvt, p.top_k,
                                epilogue=mm.EPI_SILU, mul_routed_weight=True)
            outs[backend] = h
    ref = expected_silu(p, True)
    assert rel_err(outs["reference"], ref) < TOL
    assert rel_err(outs["emu"], outs["reference"].double()) < TOL


def test_silu_reference_backend_matches_dense():
    """The reference backend alone (no emulator run): fp32 SwiGLU against the fp64 dense one."""
    p = Problem(5, 2, 4, 128, 2 * 64, seed=59)
    sid, eid, ntpp, nblk = mm.moe_align_block_size(p.ids, 16, p.E)
    C = torch.zeros(p.nvt, 64, dtype=torch.bfloat16)
    reference.grouped_gemm(p.A, p.B, p.Bs, C, p.tw, sid, eid, ntpp, nblk, 16, p.nvt, p.top_k, reference.EPI_SILU, True)
    assert rel_err(C, expected_silu(p, True)) < 4e-3


def test_silu_validation_names_b():
    p = Problem(2, 1, 2, 64, 64, seed=61)
    sid, eid, ntpp, nblk = mm.moe_align_block_size(p.ids, 16, p.E)
    C = torch.zeros(p.nvt, 64, dtype=torch.bfloat16)  # needs N = 32 for B's 64 columns
    with use_backend("reference"), pytest.raises(ValueError, match="EPI_SILU, B must have 2 \\* N"):
        mm.mxfp4_moe_gateup(p.A, p.B, p.Bs, C, None, sid, eid, ntpp, nblk, 16, p.nvt, 1, epilogue=mm.EPI_SILU)
