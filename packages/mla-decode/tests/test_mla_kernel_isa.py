"""ISA budgets of the gfx942 MLA decode kernels, read from the built code objects' metadata.

Declared budgets (docs/kernels/mla_decode_gfx942.md):
  mla_decode_a16w8_fwd    VGPR+AGPR <= 416 (AGPR <= 160): one wave per SIMD (512 available), 256 threads
                          per workgroup; SGPR <= 64; LDS 0; scratch 0; no spills. (Was 384 / 128 before the
                          pool became a structured buffer: each idxen load takes a (slot, column) VGPR pair,
                          +28 AGPR measured, 380 -> 408; the price of pools beyond 4 GiB with no 64-bit VALU.)
  mla_decode_a16w8_fwd_shared  VGPR+AGPR <= 384 (AGPR <= 128), SGPR <= 64; LDS <= 36096 (one widened
                          KV tile: K rows + V operand blocks); scratch 0; no spills.
  mla_decode_a16w8_merge  VGPR <= 72, AGPR 0, SGPR <= 64 (57 since the merge maps 1, 2 or 4 waves to a row
                          and locates a row's parts of the balanced split; SGPRs do not bound its
                          occupancy, its VGPRs do); LDS <= 6180 (three waves' running state); scratch 0;
                          no spills.
"""
from __future__ import annotations

import pytest

from moonmath_mla_decode.kernel import (
    ARCH,
    FWD_CODE_OBJECT,
    FWD_KERNEL,
    KERNELS,
    MERGE_CODE_OBJECT,
    MERGE_KERNEL,
    SHARED_CODE_OBJECT,
    SHARED_KERNEL,
)

BUDGETS = {
    (FWD_CODE_OBJECT, FWD_KERNEL): dict(vgpr=416, agpr=160, sgpr=64, lds=0, scratch=0, block=256),
    (SHARED_CODE_OBJECT, SHARED_KERNEL): dict(vgpr=384, agpr=128, sgpr=64, lds=36096, scratch=0, block=256),
    (MERGE_CODE_OBJECT, MERGE_KERNEL): dict(vgpr=72, agpr=0, sgpr=64, lds=6180, scratch=0, block=256),
}


@pytest.mark.parametrize("co,kernel", list(BUDGETS))
def test_isa_budget(co, kernel):
    if ARCH not in KERNELS.archs_built():
        pytest.skip("this build has no gfx942 code objects")
    m = KERNELS.kernel_meta("isa budget", ARCH, co, kernel)
    b = BUDGETS[(co, kernel)]
    assert m.vgpr <= b["vgpr"], f"{kernel}: {m.vgpr} VGPR+AGPR > {b['vgpr']}"
    assert m.agpr <= b["agpr"], f"{kernel}: {m.agpr} AGPR > {b['agpr']}"
    assert m.sgpr <= b["sgpr"], f"{kernel}: {m.sgpr} SGPR > {b['sgpr']}"
    assert m.lds <= b["lds"], f"{kernel}: {m.lds} bytes of LDS > {b['lds']}"
    assert m.scratch == b["scratch"], f"{kernel}: {m.scratch} bytes of scratch"
    assert m.raw.get(".vgpr_spill_count", 0) == 0 and m.raw.get(".sgpr_spill_count", 0) == 0
    assert m.max_workgroup_size == b["block"]
