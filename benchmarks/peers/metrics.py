"""Comparison metrics of the peer report: errors vs float64, ULP differences of bf16 outputs, counters
per unit of work, bytes, modeled time."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

COUNTER_KEYS = ("mfma", "valu", "ds", "vmem", "salu", "waitcnt", "barrier", "wave_instructions")
BYTE_KEYS = ("vmem_load_bytes", "vmem_store_bytes", "lds_read_bytes", "lds_write_bytes", "global_lines")
ULP_BINS = ((0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, 1 << 30))


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative Frobenius error of x against the float64 reference (over finite reference entries)."""
    x, ref = x.double(), ref.double()
    m = torch.isfinite(ref)
    d = (x[m] - ref[m]).norm()
    n = ref[m].norm()
    return float(d / n) if n > 0 else float(d)


def _bf16_ordinal(t: torch.Tensor) -> torch.Tensor:
    """bf16 bit patterns mapped to a monotone integer line (so |a - b| counts representable steps)."""
    b = t.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    neg = b >= 0x8000
    return torch.where(neg, 0x8000 - b, b)


def ulp_histogram(a: torch.Tensor, b: torch.Tensor) -> dict[str, int]:
    """Counts of |a - b| in bf16 ULPs (finite entries of both), in the bins of ULP_BINS."""
    if a.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        raise TypeError("ulp_histogram compares bf16 tensors")
    fin = torch.isfinite(a.float()) & torch.isfinite(b.float())
    d = (_bf16_ordinal(a) - _bf16_ordinal(b)).abs()[fin]
    out = {}
    for lo, hi in ULP_BINS:
        key = f"{lo}" if lo == hi else (f"{lo}-{hi}" if hi < (1 << 30) else f">={lo}")
        out[key] = int(((d >= lo) & (d <= hi)).sum())
    return out


def same_nonfinite(a: torch.Tensor, b: torch.Tensor) -> bool:
    """NaN and Inf (with sign) at exactly the same positions."""
    a, b = a.float(), b.float()
    return bool(torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(torch.isposinf(a), torch.isposinf(b))
                and torch.equal(torch.isneginf(a), torch.isneginf(b)))


def sum_counters(launches: list[dict]) -> dict:
    """Counters of several launches (an op that runs a kernel and a merge) added up."""
    tot: dict = {"mfma_by_opcode": {}, "hazards": [], "launches": len(launches)}
    for c in launches:
        for k, v in c.items():
            if k == "mfma_by_opcode":
                for op, n in v.items():
                    tot["mfma_by_opcode"][op] = tot["mfma_by_opcode"].get(op, 0) + n
            elif k == "hazards":
                tot["hazards"] += list(v)
            elif isinstance(v, int):
                tot[k] = tot.get(k, 0) + v
    return tot


def per_unit(counters: dict, units: float) -> dict[str, float]:
    return {k: counters.get(k, 0) / units for k in COUNTER_KEYS + BYTE_KEYS}


def modeled(counters: dict, arch: str) -> dict:
    """perfmodel's modeled time, the HBM bytes taken as the distinct 64-byte lines touched (each line read
    or written once: an ideal cache; a lower bound on traffic)."""
    from moonmath_common import perfmodel

    return perfmodel.model(counters, arch, hbm_bytes=64.0 * counters.get("global_lines", 0))


@contextlib.contextmanager
def capture_launches() -> Iterator[list[dict]]:
    """Collect the emulator counters of every launch our ops make (moonmath_common's KernelSet) while
    the block runs, with the emu backend selected and its hazard checker on."""
    from moonmath_common import kernels, use_backend

    seen: list[dict] = []
    orig = kernels.KernelSet._launch_emu

    def spy(self, *a, **k):
        c = orig(self, *a, **k)
        seen.append(c)
        return c

    kernels.KernelSet._launch_emu = spy
    try:
        with use_backend("emu"):
            yield seen
    finally:
        kernels.KernelSet._launch_emu = orig


@contextlib.contextmanager
def emulated_arch(arch: str) -> Iterator[None]:
    old = os.environ.get("MOONMATH_EMU_ARCH")
    os.environ["MOONMATH_EMU_ARCH"] = arch
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MOONMATH_EMU_ARCH", None)
        else:
            os.environ["MOONMATH_EMU_ARCH"] = old
