"""ISA budgets of the gfx950 attention forward kernels, read from the built code objects' metadata.

Declared budgets (docs/kernels/attention_gfx950.md):
  attn_fwd_d128      VGPR+AGPR <= 256 (8 waves per workgroup: two waves per SIMD share the 512-entry
                     file), SGPR <= 96 (no occupancy cost at 2 waves per SIMD); LDS = 65536 (two
                     stages of a 64-key K and V block); scratch 0.
  attn_fwd_d192_128  VGPR+AGPR <= 256, SGPR <= 96; LDS = 81920; scratch 0.
  attn_fwd_merge     VGPR <= 40, AGPR 0, SGPR <= 72; LDS 0; scratch 0.
  attn_fwd_plan_varlen  (the device planner, one workgroup) VGPR <= 64, AGPR 0, SGPR <= 102; LDS = 7168.
  attn_fwd*_softcap, *_window, *_softcap_window and their *_sinks  (issue 17) the budget of the plain
                     twin, SGPR <= 106 (the largest count the metadata reports without spills: 102 addressable
                     + VCC + XNACK; no occupancy cost at 2 waves per SIMD either).
  attn_fwd_paged_*   SGPR <= 102 (the paged partitioner's resources; same reasoning).
  attn_fwd[_paged]_d64 / _d80 / _d96 and their feature twins  (issue 17, attention_fwd[_paged]_dims.hsaco)
                     VGPR+AGPR <= 256, SGPR <= 104 (the metadata count includes VCC: 102 addressable + 2; paged
                     and the feature twins <= 106 as above), LDS =
                     two K and two V buffers of the head dims (d64 32768, d80 45056: V padded to 96, d96 49152).
  attn_fwd_merge_dv64 / _dv80 / _dv96  the merge's budget.
  attn_fwd_fp8_d64 / _d128 and their feature twins  (fp8 K/V) VGPR+AGPR <= 256, SGPR <= 104, LDS as bf16;
                     attn_fwd_paged_fp8_*: SGPR <= 106 (the most the wave is granted), no spill.
  attn_fwd[_paged]_d256_128 and their feature twins  (issue 17: the kernels of head dims 256's two column passes)
                     VGPR+AGPR <= 256, SGPR <= 96 (paged 102; twins 106 as above), LDS = 98304.
  attn_fwd[_paged]_fp8_d256_128 and their feature twins  (fp8 K/V at head dims 256) VGPR+AGPR <= 256, SGPR <= 104
                     (paged 106), LDS = 122880 (98304 + one block's fp8 K/V rows staged: 24576).
No spills anywhere (SGPR or VGPR; the paged window+sinks twins spilled SGPRs before the epilogue's resources were
resolved ahead of the key loop).
"""
from __future__ import annotations

import pytest

from moonmath_attention_gfx950.kernel import (
    ARCH,
    FWD_BLOCK,
    FWD_CODE_OBJECT,
    KERNELS,
    MERGE_BLOCK,
    MERGE_CODE_OBJECT,
    MERGE_KERNEL,
)

BUDGETS = {
    (FWD_CODE_OBJECT, "attn_fwd_d128"): dict(vgpr=256, agpr=256, sgpr=96, lds=65536, block=FWD_BLOCK),
    (FWD_CODE_OBJECT, "attn_fwd_d192_128"): dict(vgpr=256, agpr=256, sgpr=96, lds=81920, block=FWD_BLOCK),
    (MERGE_CODE_OBJECT, MERGE_KERNEL): dict(vgpr=40, agpr=0, sgpr=72, lds=0, block=MERGE_BLOCK),
    # serving paths (issue 13): the paged partitioner on the same pipeline, and the device planner
    ("attention_fwd_paged", "attn_fwd_paged_d128"): dict(vgpr=256, agpr=256, sgpr=102, lds=65536, block=FWD_BLOCK),
    ("attention_fwd_paged", "attn_fwd_paged_d192_128"): dict(vgpr=256, agpr=256, sgpr=102, lds=81920,
                                                             block=FWD_BLOCK),
    # the planner is one workgroup (occupancy is moot): LDS = 2 scan rows + 4 waves' digit counts + 256 bin starts
    ("attention_plan", "attn_fwd_plan_varlen"): dict(vgpr=64, agpr=0, sgpr=102, lds=7168, block=256),
}
# issue 17, head dims 64, 80, 96: the plain kernels of their own code objects, two K buffers [64][Dqk] + two V buffers
# [64][Dv padded to 32] bf16 of LDS.
for _d, _lds in ((64, 32768), (80, 45056), (96, 49152)):
    BUDGETS[("attention_fwd_dims", f"attn_fwd_d{_d}")] = dict(vgpr=256, agpr=256, sgpr=104, lds=_lds, block=FWD_BLOCK)
    # paged: up to 106 as the paged feature twins (102 addressable + VCC + XNACK; no spill, checked below)
    BUDGETS[("attention_fwd_paged_dims", f"attn_fwd_paged_d{_d}")] = dict(vgpr=256, agpr=256, sgpr=106, lds=_lds,
                                                                          block=FWD_BLOCK)
    BUDGETS[(MERGE_CODE_OBJECT, f"attn_fwd_merge_dv{_d}")] = BUDGETS[(MERGE_CODE_OBJECT, MERGE_KERNEL)]
# issue 17, fp8 K/V (attention_fwd_fp8.hsaco): the dense budget of the head dim (LDS holds bf16, as without fp8).
for _d, _lds in ((64, 32768), (128, 65536)):
    BUDGETS[("attention_fwd_fp8", f"attn_fwd_fp8_d{_d}")] = dict(vgpr=256, agpr=256, sgpr=104, lds=_lds,
                                                                  block=FWD_BLOCK)
    # paged fp8: up to 106 (.sgpr_count counts VCC and the reserved XNACK / flat-scratch pair beside the 102
    # addressable), no spill (checked below)
    BUDGETS[("attention_fwd_paged_fp8", f"attn_fwd_paged_fp8_d{_d}")] = dict(vgpr=256, agpr=256, sgpr=106, lds=_lds,
                                                                              block=FWD_BLOCK)
# issue 17, head dims 256: the (256, 128) kernels of its column passes, LDS two K buffers [64][256] + two V [64][128].
BUDGETS[("attention_fwd_d256", "attn_fwd_d256_128")] = dict(vgpr=256, agpr=256, sgpr=96, lds=98304, block=FWD_BLOCK)
BUDGETS[("attention_fwd_paged_d256", "attn_fwd_paged_d256_128")] = dict(vgpr=256, agpr=256, sgpr=102, lds=98304,
                                                                        block=FWD_BLOCK)
# fp8 K/V at head dims 256 (attention_fwd[_paged]_fp8_d256.hsaco): the bf16 buffers plus one block's fp8 K and V rows
# staged in LDS (64 x (256 + 128) bytes), so that no fp8 load is held in VGPRs.
BUDGETS[("attention_fwd_fp8_d256", "attn_fwd_fp8_d256_128")] = dict(vgpr=256, agpr=256, sgpr=104, lds=122880,
                                                                    block=FWD_BLOCK)
BUDGETS[("attention_fwd_paged_fp8_d256", "attn_fwd_paged_fp8_d256_128")] = dict(vgpr=256, agpr=256, sgpr=106,
                                                                                lds=122880, block=FWD_BLOCK)
# issue 17: the compile-time feature instantiations keep their plain twin's budget, but SGPR <= 106 (the features'
# scalars on the ping-pong pipeline; the paged window kernels report 103 .. 106): at 2 waves per SIMD any count the
# metadata can report (102 addressable + VCC + XNACK) costs nothing, and no spill is allowed (below).
BUDGETS.update({(co, n + sfx): dict(b, sgpr=106) for (co, n), b in list(BUDGETS.items())
                if co.startswith("attention_fwd") and not n.startswith("attn_fwd_merge")
                for f in ("_softcap", "_window", "_softcap_window", "")
                for sfx in ((f,) if f else ()) + (f + "_sinks",)})


@pytest.mark.parametrize("co,kernel", list(BUDGETS))
def test_isa_budget(co, kernel):
    if ARCH not in KERNELS.archs_built():
        pytest.skip("this build has no gfx950 code objects")
    m = KERNELS.kernel_meta("isa budget", ARCH, co, kernel)
    b = BUDGETS[(co, kernel)]
    assert m.vgpr <= b["vgpr"], f"{kernel}: {m.vgpr} VGPR+AGPR > {b['vgpr']}"
    assert m.agpr <= b["agpr"], f"{kernel}: {m.agpr} AGPR > {b['agpr']}"
    assert m.sgpr <= b["sgpr"], f"{kernel}: {m.sgpr} SGPR > {b['sgpr']}"
    assert m.lds == b["lds"], f"{kernel}: {m.lds} bytes of LDS, declared {b['lds']}"
    assert m.scratch == 0, f"{kernel}: {m.scratch} bytes of scratch"
    assert m.raw.get(".vgpr_spill_count", 0) == 0, f"{kernel}: VGPR spills"
    assert m.raw.get(".sgpr_spill_count", 0) == 0, f"{kernel}: {m.raw.get('.sgpr_spill_count', 0)} SGPR spills"
    assert m.max_workgroup_size == b["block"]


def test_fwd_kernels_use_the_gfx950_instructions():
    """The kernels are what the design says: 32x32x16 bf16 MFMAs for QK and PV (and the row sums of Dqk 256),
    16x16x32 bf16 ones for the row sums of the others, 16-byte direct-to-LDS loads, transposing LDS reads for V;
    no other MFMA shape."""
    emu = pytest.importorskip("moonmath_emu")
    if ARCH not in KERNELS.archs_built():
        pytest.skip("this build has no gfx950 code objects")
    row_sums = {"v_mfma_f32_32x32x16_bf16", "v_mfma_f32_16x16x32_bf16"}
    only_32 = {"v_mfma_f32_32x32x16_bf16"}   # Dqk 256: its row sums stay 32x32x16
    for co, kernels, mfmas in ((FWD_CODE_OBJECT, ("attn_fwd_d128", "attn_fwd_d192_128"), row_sums),
                               ("attention_fwd_dims", ("attn_fwd_d64", "attn_fwd_d80", "attn_fwd_d96"), row_sums),
                               ("attention_fwd_d256", ("attn_fwd_d256_128",), only_32),
                               # fp8 K/V at 256: the fp8 rows staged by direct-to-LDS loads (no VGPRs in flight)
                               ("attention_fwd_fp8_d256",
                                ("attn_fwd_fp8_d256_128", "attn_fwd_fp8_d256_128_softcap_window_sinks"), only_32),
                               ("attention_fwd_paged_fp8_d256", ("attn_fwd_paged_fp8_d256_128",), only_32)):
        code = KERNELS.path("isa", ARCH, co).read_bytes()
        ops = emu.opcodes_in(code)
        assert {"v_mfma_f32_32x32x16_bf16", "ds_read_b64_tr_b16"} <= ops
        assert {o for o in ops if o.startswith("v_mfma")} == mfmas
        for kernel in kernels:
            text = [t for k, _, t in emu.disassemble(code) if k == kernel]
            assert any(t.startswith("buffer_load_dwordx4") and t.endswith(" lds") for t in text), kernel
