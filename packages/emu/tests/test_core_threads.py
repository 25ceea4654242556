"""Workgroups on several threads: outputs, counters and hazard reports bit-identical to one thread; the
error raised is the one of the lowest-numbered failing workgroup, as on one thread."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from _emu_build import kernel_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_util import ARCHS, session_corpus  # noqa: E402

import moonmath_emu as emu  # noqa: E402


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return session_corpus(tmp_path_factory)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("threads", [2, 3])
def test_gemm_identical_on_threads(corpus, arch, threads):
    M = N = 128
    K = 64
    g = torch.Generator().manual_seed(5)
    A = torch.randn(M, K, generator=g).to(torch.bfloat16).view(torch.int16)
    B = torch.randn(K, N, generator=g).to(torch.bfloat16).view(torch.int16)
    mod = corpus.module("gemm_bf16", arch)
    outs, counters = [], []
    for t in (1, threads):
        C = torch.full((M, N), float("nan"))
        counters.append(mod.launch("gemm_bf16", grid=(N // 32, M // 32, 1), block=(256, 1, 1),
                                   args=[A, B, C, M, N, K], threads=t))
        outs.append(C)
    assert torch.equal(outs[0].view(torch.int32), outs[1].view(torch.int32))
    assert counters[0] == counters[1]
    assert counters[0]["workgroups"] == 16


@pytest.fixture
def hz(build, arch):
    return emu.Module(build(kernel_source("hazards_core.hip"), arch))


def test_warn_reports_identical_on_threads(hz):
    out = torch.zeros(128, dtype=torch.int32)
    one = hz.launch("lds_pass", grid=7, block=128, args=[out, 2], check_hazards="warn", threads=1)
    two = hz.launch("lds_pass", grid=7, block=128, args=[out, 2], check_hazards="warn", threads=2)
    assert one == two and "workgroup (0,0,0)" in one["hazards"][0] and "[448 times]" in one["hazards"][0]


@pytest.fixture
def mem(build, arch):
    return emu.Module(build(kernel_source("memory.hip"), arch))


def test_first_error_as_on_one_thread(mem):
    out = torch.zeros(64 * 5, dtype=torch.int32)
    msgs = []
    for t in (1, 2, 4):
        with pytest.raises(emu.MemoryViolation) as ei:
            mem.launch("fill", grid=8, block=64, args=[out, 64 * 8], threads=t)  # workgroups 5..7 overrun
        msgs.append(str(ei.value))
    assert msgs[0] == msgs[1] == msgs[2] and "workgroup (5,0,0)" in msgs[0]


def test_threads_argument_checked(mem):
    out = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(ValueError, match="threads"):
        mem.launch("fill", grid=1, block=64, args=[out, 64], threads=0)
