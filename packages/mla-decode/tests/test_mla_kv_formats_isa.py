"""ISA budgets of the KV-format decode kernels (csrc/device/mla_decode_a16w16.hip, gfx950/mla_decode_mxfp4.hip,
gfx950/mla_decode_a8w8.hip over mla_decode_lds_tile.hpp; mla_q_amax.hip), read from the built code objects.

Budgets (docs/kernels/mla_decode_formats.md): one wave per SIMD (waves_per_eu 1, 256 threads), so the VGPR
budget is a margin over today's count, not an occupancy step: a16w16 <= 352 (AGPR <= 96), mxfp4 <= 336
(AGPR <= 64), a8w8 <= 352 (AGPR <= 96; Q is held as fp8, the raw 32-token tile is 20 VGPRs a buffer);
SGPR <= 80 (a8w8 <= 88: the balanced split is located lane-parallel in
mla_decode_common.hpp; one wave per SIMD, so SGPRs do not bound occupancy); LDS one tile (36096 bytes); no
scratch, no spills. The gfx950 one-wave kernels (`*_fwd_w1`, 64
threads, four fetch roles per lane: their raw tile registers are four times larger): a16w16 <= 464 (AGPR <=
208), mxfp4 <= 384 (AGPR <= 128), a8w8 <= 480 (AGPR <= 224); the gfx950 `_kv4` kernels (256 threads, four one-wave
decoders merged in LDS): the one-wave budgets (mxfp4 <= 400, AGPR <= 144), LDS 132096 bytes (every wave's
accumulators for the merge). mla_q_amax_r<R> (one wave per workgroup): VGPR <= 80 (up to 18 chunk loads in
flight per lane), no LDS. Static MFMA mix (the loop unrolled by two tiles, plus the peeled first tile of the
one-wave decoders: every `_w1`, a16w16's and a8w8's `_kv4`): per 16-token tile 18 QK (gfx950 16x16x32 bf16;
gfx942 36 x 16x16x16) and 32 PV 16x16x16 bf16; a8w8 per 32-token tile 2 x 18 QK and 32 PV, all
v_mfma_f32_16x16x32_fp8_fp8.
"""
from __future__ import annotations

import collections

import pytest

from moonmath_mla_decode import formats
from moonmath_mla_decode.formats import FORMATS
from moonmath_mla_decode.kernel import KERNELS

BUDGETS = {
    "a16w16": dict(vgpr=352, agpr=96, sgpr=80, lds=36096),
    "mxfp4": dict(vgpr=336, agpr=64, sgpr=80, lds=36096),
    "a8w8": dict(vgpr=352, agpr=96, sgpr=88, lds=36096),
}
BUDGETS_W1 = {
    "a16w16": dict(vgpr=464, agpr=208, sgpr=80, lds=36096),
    "mxfp4": dict(vgpr=384, agpr=128, sgpr=80, lds=36096),
    "a8w8": dict(vgpr=480, agpr=224, sgpr=88, lds=36096),
}
BUDGETS_KV4 = {
    "a16w16": dict(vgpr=464, agpr=208, sgpr=80, lds=132096),
    "mxfp4": dict(vgpr=400, agpr=144, sgpr=80, lds=132096),
    "a8w8": dict(vgpr=480, agpr=224, sgpr=88, lds=132096),
}
BF16_950 = {"v_mfma_f32_16x16x32_bf16": 18, "v_mfma_f32_16x16x16_bf16": 32}
TILE_MFMA = {  # one tile's MFMAs
    ("a16w16", "gfx950"): BF16_950, ("mxfp4", "gfx950"): BF16_950,
    ("a16w16", "gfx942"): {"v_mfma_f32_16x16x16_bf16": 36 + 32},
    ("a8w8", "gfx950"): {"v_mfma_f32_16x16x32_fp8_fp8": 2 * 18 + 32},
}
PEELED = {(f, "_w1") for f in ("a16w16", "mxfp4", "a8w8")} | {("a16w16", "_kv4"), ("a8w8", "_kv4")}
CASES = ([(fmt, arch, "") for fmt in BUDGETS for arch in FORMATS[fmt][0]] + [(fmt, "gfx950", "_w1") for fmt in BUDGETS]
         + [(fmt, "gfx950", "_kv4") for fmt in BUDGETS_KV4])


def _need(arch, co):
    if arch not in KERNELS.archs_built():
        pytest.skip(f"this build has no {arch} code objects")


@pytest.mark.parametrize("fmt,arch,suffix", CASES)
def test_isa_budget(fmt, arch, suffix):
    _, co, kernel, _ = FORMATS[fmt]
    _need(arch, co)
    m = KERNELS.kernel_meta("isa budget", arch, co, kernel + suffix)
    b = {"": BUDGETS, "_w1": BUDGETS_W1, "_kv4": BUDGETS_KV4}[suffix][fmt]
    assert m.vgpr <= b["vgpr"] and m.agpr <= b["agpr"] and m.sgpr <= b["sgpr"], (m.vgpr, m.agpr, m.sgpr)
    assert m.lds <= b["lds"] and m.scratch == 0
    assert m.raw.get(".vgpr_spill_count", 0) == 0 and m.raw.get(".sgpr_spill_count", 0) == 0
    assert m.max_workgroup_size == (64 if suffix == "_w1" else 256)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("R", formats.AMAX_ROWS_PER_WAVE)
def test_q_amax_budget(arch, R):
    _need(arch, "mla_q_amax")
    m = KERNELS.kernel_meta("isa budget", arch, "mla_q_amax", f"mla_q_amax_r{R}")
    assert m.vgpr <= 80 and m.agpr == 0 and m.lds == 0 and m.scratch == 0
    assert m.max_workgroup_size == 64


@pytest.mark.parametrize("fmt,arch,suffix", CASES)
def test_mfma_mix(fmt, arch, suffix):
    _, co, kernel, _ = FORMATS[fmt]
    _need(arch, co)
    emu = pytest.importorskip("moonmath_emu")
    with open(KERNELS.path("mfma mix", arch, co), "rb") as f:
        module = emu.Module(f.read())
    ops = collections.Counter(text.split()[0] for name, _, text in module.disassemble() if name == kernel + suffix)
    copies = 3 if (fmt, suffix) in PEELED else 2  # tile steps in the code: the unrolled pair (+ the peeled first)
    assert {op: n for op, n in ops.items() if op.startswith("v_mfma")} == {
        op: copies * n for op, n in TILE_MFMA[(fmt, arch)].items()}
