"""The LDS-tiled bf16 MFMA GEMM (tests/corpus/gemm_bf16.hip) in the emulator against torch:
gfx942 uses v_mfma_f32_16x16x16_bf16, gfx950 v_mfma_f32_16x16x32_bf16; 4 waves per workgroup
synchronised with s_barrier around the LDS staging."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_util import ARCHS, session_corpus  # noqa: E402


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return session_corpus(tmp_path_factory)


MFMA = {"gfx942": ("v_mfma_f32_16x16x16_bf16", 16), "gfx950": ("v_mfma_f32_16x16x32_bf16", 32)}


def run_gemm(corpus, arch, M, N, K, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(M, K, generator=g).to(torch.bfloat16)
    B = torch.randn(K, N, generator=g).to(torch.bfloat16)
    C = torch.full((M, N), float("nan"))
    counters = corpus.module("gemm_bf16", arch).launch(
        "gemm_bf16", grid=(N // 32, M // 32, 1), block=(256, 1, 1),
        args=[A.view(torch.int16), B.view(torch.int16), C, M, N, K])
    ref = A.double() @ B.double()
    return C, ref, counters


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("M,N,K", [(32, 32, 32), (64, 96, 128), (128, 64, 256)])
def test_gemm_bf16(corpus, arch, M, N, K):
    C, ref, counters = run_gemm(corpus, arch, M, N, K, seed=M + N + K)
    # bf16 products are exact in f32 and each MFMA rounds once; across K/BK MFMAs the f32 accumulator
    # rounds K/BK times: the error bound is a few f32 ulps of the partial sums
    torch.testing.assert_close(C.double(), ref, rtol=1e-5, atol=1e-5 * K ** 0.5)
    mnem, bk = MFMA[arch]
    waves = (M // 32) * (N // 32) * 4
    assert counters["mfma_by_opcode"] == {mnem: waves * (K // bk)}
    assert counters["barrier"] == waves * 2 * (K // bk)
    assert counters["waves"] == waves


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_bf16_256(corpus, arch):
    C, ref, counters = run_gemm(corpus, arch, 256, 256, 256, seed=3)
    torch.testing.assert_close(C.double(), ref, rtol=1e-5, atol=1e-4)
    assert counters["mfma"] == 256 * (256 // MFMA[arch][1])


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_bf16_exact_small_integers(corpus, arch):
    """Small integers make every product and partial sum exact: the result must be bit exact."""
    M = N = 64
    K = 128
    g = torch.Generator().manual_seed(11)
    A = torch.randint(-8, 9, (M, K), generator=g).to(torch.bfloat16)
    B = torch.randint(-8, 9, (K, N), generator=g).to(torch.bfloat16)
    C = torch.zeros(M, N)
    corpus.module("gemm_bf16", arch).launch(
        "gemm_bf16", grid=(N // 32, M // 32, 1), block=(256, 1, 1),
        args=[A.view(torch.int16), B.view(torch.int16), C, M, N, K])
    assert torch.equal(C, (A.float() @ B.float()))
