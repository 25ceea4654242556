"""Helpers for the packages' tests (not used at run time).

`lazy_empty(n, dtype)`: a CPU tensor of n elements that only commits the pages written, for tests of
offsets beyond 2 or 4 GiB; skips the test when the machine refuses the virtual allocation.
`run_host_cpp_test(src, includes, workdir)` builds one C++ unit test of a host planner with the machine's
C++ compiler (moonmath-common's include/ on the path, for `moonmath/host/unit_check.hpp`), runs it, and
fails with its stderr when it exits non-zero. No compiler: the test is skipped, saying so.
`random_mxfp4_moe_weights(E, H, I, g, scales)`: stock-layout random MXFP4 gate/up and down weights and E8M0
scales for MoE layer tests and the demo.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from . import common_dir


def run_host_cpp_test(src: Path, includes: list[Path] | tuple[Path, ...], workdir: Path) -> None:
    import pytest

    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler (c++, g++ or clang++)")
    exe = Path(workdir) / Path(src).stem
    flags = [f"-I{Path(common_dir()) / 'include'}", *(f"-I{d}" for d in includes)]
    build = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", *flags, str(src), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, f"{Path(src).name} does not build:\n{build.stderr[:4000]}"
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, f"{Path(src).name} failed:\n{run.stderr[:4000]}"


def lazy_empty(n: int, dtype):
    """A CPU tensor of n elements that commits only the pages written (Linux maps large allocations lazily
    and torch.empty does not touch them). Skips the calling test when the machine refuses the mapping."""
    import pytest
    import torch

    try:
        return torch.empty(n, dtype=dtype)
    except RuntimeError as e:  # machines without overcommit
        pytest.skip(f"cannot map a {n * torch.empty(0, dtype=dtype).element_size() >> 20} MiB view: {e}")


def random_mxfp4_moe_weights(E: int, H: int, I: int, g, scales: tuple[int, int] = (119, 123)):
    """Random stock-layout MXFP4 MoE weights drawn from generator g, in this order: gate/up codes
    uint8 [E, 2I, H/2], their E8M0 scales [E, 2I, H/32] in [scales[0], scales[1]), down codes [E, H, I/2] and
    scales [E, H, I/32]."""
    import torch

    def codes(*shape):
        return torch.randint(0, 256, shape, generator=g, dtype=torch.int32).to(torch.uint8)

    def e8m0(*shape):
        return torch.randint(scales[0], scales[1], shape, generator=g, dtype=torch.int32).to(torch.uint8)

    w13, s13 = codes(E, 2 * I, H // 2), e8m0(E, 2 * I, H // 32)
    w2, s2 = codes(E, H, I // 2), e8m0(E, H, I // 32)
    return w13, s13, w2, s2
