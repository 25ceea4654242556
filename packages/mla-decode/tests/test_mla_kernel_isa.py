"""ISA budgets of the MLA decode kernels on gfx942 and gfx950, read from the built code objects.

One kernel source serves both archs (csrc/device/mla_decode_a16w8_ws.hip); only the QK MFMA stage differs
(csrc/device/<arch>/mla_decode_stages.hpp). Declared budgets (docs/kernels/mla_decode_gfx942.md,
docs/kernels/mla_decode_gfx950.md), the same on both archs:
  mla_decode_a16w8_fwd_ws VGPR+AGPR <= 256: two waves per SIMD (the 8-wave workgroup, one per CU); SGPR
                          <= 96; LDS <= 65024 (three widened KV tiles + two P/alpha buffers); scratch 0;
                          no spills; 512 threads per workgroup.
  mla_decode_merge_*      (one kernel per partial layout, kernel.MERGE_KERNELS) VGPR <= 64 with fp16 partials and
                          <= 96 with fp32 (eighteenth session: the occupancy the planner's merge_waves_per_cu
                          assumes; one kernel of every layout held 192 before), AGPR 0, SGPR <= 80; a row may be split
                          into 4 column blocks of up to 8 waves each: up to 512 threads per workgroup; LDS 0 static
                          (the waves' running state is dynamic LDS, sized per launch); scratch 0; no spills.
MFMA mix (static, the ws kernel's stage instances): 144 QK + 160 PV v_mfma_f32_16x16x16_bf16 on gfx942; on
gfx950 the QK contraction is 72 v_mfma_f32_16x16x32_bf16 and PV stays 160 16x16x16.
"""
from __future__ import annotations

import collections

import pytest

from moonmath_mla_decode.kernel import (
    ARCHS,
    KERNELS,
    MERGE_CODE_OBJECT,
    MERGE_KERNELS,
    OP,
    WS_CODE_OBJECT,
    WS_KERNEL,
)

BUDGETS = {
    (WS_CODE_OBJECT, WS_KERNEL): dict(vgpr=256, agpr=256, sgpr=96, lds=65024, scratch=0, block=512),
    # the planner's merge_waves_per_cu counts on these: fp16 partials <= 64 VGPRs, fp32 <= 96 (mla_planner.hpp)
    **{(MERGE_CODE_OBJECT, k): dict(vgpr=64 if "_half" in k else 96, agpr=0, sgpr=80, lds=0, scratch=0, block=512)
       for k in MERGE_KERNELS},
}
# Static MFMA counts of the ws kernel (all its QK and PV stage instances): {opcode: count}. gfx950 contracts
# QK with half as many 16x16x32 MFMAs (72 for gfx942's 144 16x16x16); PV (160) is the same on both.
MFMA_MIX = {
    "gfx942": {"v_mfma_f32_16x16x16_bf16": 144 + 160},
    "gfx950": {"v_mfma_f32_16x16x32_bf16": 72, "v_mfma_f32_16x16x16_bf16": 160},
}


def _need(arch):
    if arch not in KERNELS.archs_built():
        pytest.skip(f"this build has no {arch} code objects")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("co,kernel", list(BUDGETS))
def test_isa_budget(co, kernel, arch):
    _need(arch)
    m = KERNELS.kernel_meta("isa budget", arch, co, kernel)
    b = BUDGETS[(co, kernel)]
    assert m.vgpr <= b["vgpr"], f"{kernel}: {m.vgpr} VGPR+AGPR > {b['vgpr']}"
    assert m.agpr <= b["agpr"], f"{kernel}: {m.agpr} AGPR > {b['agpr']}"
    assert m.sgpr <= b["sgpr"], f"{kernel}: {m.sgpr} SGPR > {b['sgpr']}"
    assert m.lds <= b["lds"], f"{kernel}: {m.lds} bytes of LDS > {b['lds']}"
    assert m.scratch == b["scratch"], f"{kernel}: {m.scratch} bytes of scratch"
    assert m.raw.get(".vgpr_spill_count", 0) == 0 and m.raw.get(".sgpr_spill_count", 0) == 0
    assert m.max_workgroup_size == b["block"]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("co,kernel", [(WS_CODE_OBJECT, WS_KERNEL)])
def test_mfma_mix(co, kernel, arch):
    """The arch's QK stage is what the code object runs: gfx950 contracts QK with 16x16x32 bf16 MFMAs."""
    _need(arch)
    emu = pytest.importorskip("moonmath_emu")
    with open(KERNELS.path(OP, arch, co), "rb") as f:
        module = emu.Module(f.read())
    ops = collections.Counter(text.split()[0] for name, _, text in module.disassemble() if name == kernel)
    assert {op: n for op, n in ops.items() if op.startswith("v_mfma")} == MFMA_MIX[arch]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("co,kernel", [(WS_CODE_OBJECT, WS_KERNEL)])
def test_decode_kernels_take_one_args_struct(co, kernel, arch):
    """The decode kernels take one by-value MlaDecodeArgs (csrc/device/mla_decode_args.hpp), of the size the
    host module packs (_C.pack_mla_decode_args): one layout for host and device."""
    _need(arch)
    from moonmath_mla_decode import _C

    m = KERNELS.kernel_meta("isa budget", arch, co, kernel)
    assert [(a.size, a.value_kind) for a in m.explicit_args] == [(_C.MLA_DECODE_ARGS_BYTES, "by_value")]
    assert len(_C.pack_mla_decode_args(*range(1, 25))) == _C.MLA_DECODE_ARGS_BYTES == 144
