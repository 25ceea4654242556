"""`python -m moonmath_amd demo`: every op on the default backend, checked against its reference.

On a machine without an AMD GPU the default backend is the emulator: the real gfx942/gfx950 code
objects run on the CPU. Each case runs the op on that backend and on `reference` with the same
inputs and prints the error metric next to the op's documented tolerance.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

import moonmath_amd as ma


@dataclass
class Case:
    op: str
    shape: str
    archs: tuple[str, ...]
    run: Callable[[], tuple]           # runs on the current backend, returns the outputs
    check: Callable[[tuple, tuple], tuple[str, bool]]  # (backend outputs, reference outputs) -> (metric, ok)


def _bf16_ulps(a: torch.Tensor, b: torch.Tensor) -> int:
    def ordered(x):
        i = x.contiguous().view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -(i & 0x7FFF), i)
    return int((ordered(a) - ordered(b)).abs().max()) if a.numel() else 0


def _merge_case() -> Case:
    g = torch.Generator().manual_seed(0)
    R, T, H = 8, 4, 16
    parts = torch.randn(R, T, H, 512, generator=g).to(torch.bfloat16)
    lse = torch.randn(R, T, H, generator=g) * 4
    lse[R - 1, 0] = float("-inf")  # an empty rank

    def run():
        out = torch.empty(T, H, 512, dtype=torch.bfloat16)
        lse_out = torch.empty(T, H)
        ma.mla_dcp_lse_merge_ranks(parts, lse, out, lse_out)
        return out, lse_out

    def check(got, ref):
        ulps = _bf16_ulps(got[0], ref[0])
        dl = float((got[1] - ref[1]).abs().max())
        return f"out {ulps} bf16 ulp, lse {dl:.1e} (tol 1 ulp, 1e-5)", ulps <= 1 and dl <= 1e-5

    return Case("mla_dcp_lse_merge_ranks", f"R={R} T={T} H={H}", ("gfx942", "gfx950"), run, check)


def cases() -> list[Case]:
    return [_merge_case()]


def run_demo(archs: list[str] | None = None) -> int:
    backend = ma.get_backend()
    if backend == "hip":
        arch_list = [ma.live_arch()]
    elif backend == "emu":
        arch_list = archs or ["gfx942", "gfx950"]
    else:
        arch_list = archs or [ma.emulated_arch()]
    print(f"moonmath-amd demo: backend {backend!r}"
          + (" (no AMD GPU found: the code objects run in moonmath-emu on the CPU)" if backend == "emu" else ""))
    rows, failed = [], 0
    saved = os.environ.get("MOONMATH_EMU_ARCH")
    try:
        for arch in arch_list:
            os.environ["MOONMATH_EMU_ARCH"] = arch
            for c in cases():
                if arch not in c.archs:
                    rows.append((c.op, arch, c.shape, "-", "not offered on this arch", "n/a"))
                    continue
                t0 = time.perf_counter()
                try:
                    got = c.run()
                except ma.NoKernelError:
                    rows.append((c.op, arch, c.shape, "-", "no kernel in this build (reference only)", "n/a"))
                    continue
                dt = time.perf_counter() - t0
                with ma.use_backend("reference"):
                    ref = c.run()
                metric, ok = c.check(got, ref)
                failed += not ok
                rows.append((c.op, arch, c.shape, f"{dt:.2f}s", metric, "PASS" if ok else "FAIL"))
    finally:
        if saved is None:
            os.environ.pop("MOONMATH_EMU_ARCH", None)
        else:
            os.environ["MOONMATH_EMU_ARCH"] = saved
    head = ("op", "arch", "shape", "time", "vs reference", "result")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
    print(f"\n{len(rows)} rows, {failed} failed" + ("" if backend != "emu" else " (times are emulator wall time, not GPU time)"))
    return 1 if failed else 0
