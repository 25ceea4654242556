"""A simple issue-rate model that turns an emulator launch's instruction mix into a modeled time.

This is a guide and a regression guard, never a speed claim: it ignores latency, occupancy limits,
cache behaviour, bank conflicts and clock behaviour. It assumes:

- the launch's waves spread evenly over every SIMD of the part (CUs x 4 SIMDs);
- per SIMD, instructions issue back to back: an MFMA occupies the matrix core for its pass count in
  cycles; a wave64 VALU op takes 4 cycles on the 16-lane SIMD; a transcendental op 16 (quarter rate);
  SALU, waitcnt, branch, barrier 1 cycle of issue; DS and VMEM 4 cycles of issue (their latency is
  assumed hidden);
- memory time is the bytes the caller says the launch moves over HBM bandwidth;
- the modeled time is max(compute, memory) (perfect overlap); the no-overlap sum is reported too.

Rates are the published ones (shared/design/hardware-and-anchors.md): MI300X 304 CUs, 2.1 GHz,
5.3 TB/s; MI355X 256 CUs, 2.4 GHz, 8 TB/s; bf16 16x16x16 (gfx942) and 16x16x32 (gfx950) MFMAs issue
every 16 cycles (8192 and 16384 FLOP: the 1307 and 2500 TFLOP/s dense peaks).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    name: str
    cus: int
    clock_ghz: float
    hbm_tbps: float
    simds_per_cu: int = 4

    @property
    def simd_cycles_per_s(self) -> float:
        return self.cus * self.simds_per_cu * self.clock_ghz * 1e9


PARTS = {
    "gfx942": Part("MI300X", cus=304, clock_ghz=2.1, hbm_tbps=5.3),
    "gfx950": Part("MI355X", cus=256, clock_ghz=2.4, hbm_tbps=8.0),
}

# (cycles per issue, FLOP per instruction) by MFMA mnemonic; unlisted shapes fall back on the
# bf16 rate for their FLOP count.
MFMA = {
    "v_mfma_f32_16x16x16_bf16": (16, 2 * 16 * 16 * 16),
    "v_mfma_f32_16x16x16bf16_1k": (16, 2 * 16 * 16 * 16),
    "v_mfma_f32_32x32x8_bf16": (32, 2 * 32 * 32 * 8),
    "v_mfma_f32_32x32x8bf16_1k": (32, 2 * 32 * 32 * 8),
    "v_mfma_f32_16x16x16_f16": (16, 2 * 16 * 16 * 16),
    "v_mfma_f32_16x16x32_bf16": (16, 2 * 16 * 16 * 32),
    "v_mfma_f32_32x32x16_bf16": (32, 2 * 32 * 32 * 16),
    "v_mfma_f32_16x16x32_fp8_fp8": (16, 2 * 16 * 16 * 32),
    "v_mfma_scale_f32_16x16x128_f8f6f4": (16, 2 * 16 * 16 * 128),  # 32 cycles with an fp8 operand
    "v_mfma_scale_f32_32x32x64_f8f6f4": (32, 2 * 32 * 32 * 64),
}

ISSUE_CYCLES = {"valu": 4, "trans": 16, "salu": 1, "smem": 1, "ds": 4, "vmem": 4, "waitcnt": 1, "barrier": 1,
                "branch": 1}


def model(counters: dict, arch: str, hbm_bytes: float = 0.0, useful_flop: float | None = None) -> dict:
    """Modeled seconds for one launch from its emulator counters (and the HBM bytes it moves)."""
    part = PARTS[arch]
    mfma_cycles, mfma_flop = 0.0, 0.0
    for op, n in counters.get("mfma_by_opcode", {}).items():
        cyc, flop = MFMA.get(op, (16, 0))
        mfma_cycles += cyc * n
        mfma_flop += flop * n
    # trans ops are also counted as valu by the emulator: charge them the difference only.
    other = sum(ISSUE_CYCLES[k] * counters.get(k, 0) for k in ISSUE_CYCLES if k != "trans")
    other += (ISSUE_CYCLES["trans"] - ISSUE_CYCLES["valu"]) * counters.get("trans", 0)
    compute_s = (mfma_cycles + other) / part.simd_cycles_per_s
    memory_s = hbm_bytes / (part.hbm_tbps * 1e12)
    t = max(compute_s, memory_s)
    flop = useful_flop if useful_flop is not None else mfma_flop
    return {
        "part": part.name, "compute_s": compute_s, "mfma_s": mfma_cycles / part.simd_cycles_per_s,
        "memory_s": memory_s, "modeled_s": t, "no_overlap_s": compute_s + memory_s,
        "bound": "memory" if memory_s >= compute_s else "compute",
        "tflops": flop / t / 1e12 if t > 0 else 0.0, "tbps": hbm_bytes / t / 1e12 if t > 0 else 0.0,
    }
