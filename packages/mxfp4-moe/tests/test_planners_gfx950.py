"""The gfx950 MoE planners (csrc/host/moe_planners_gfx950.hpp), pure C++ through the _C module."""
from __future__ import annotations

import pytest


def test_constants(planners_c):
    assert planners_c.GFX950_NUM_CUS == 256
    assert planners_c.GFX950_LDS_BYTES == 160 * 1024


@pytest.mark.parametrize("vgprs,lds,lds_cu,want", [
    (64, 12288, 160 * 1024, 4),      # 8 waves/SIMD by VGPRs = 4 workgroups; LDS allows 13
    (96, 53248, 160 * 1024, 2),      # 5 waves/SIMD -> 2 workgroups; LDS allows 3
    (96, 53248, 64 * 1024, 1),       # the same variant under gfx942's 64 KiB: LDS-bound to 1
    (176, 53248, 160 * 1024, 1),     # 2 waves/SIMD -> 1 workgroup
    (256, 28672, 160 * 1024, 1),
    (257, 4096, 160 * 1024, 0),      # one wave per SIMD cannot hold an 8-wave workgroup
    (64, 170000, 160 * 1024, 0),     # LDS too large
    (1, 0, 160 * 1024, 4),           # no LDS: VGPR-bound (8 waves per SIMD)
])
def test_workgroups_per_cu(planners_c, vgprs, lds, lds_cu, want):
    assert planners_c.gfx950_workgroups_per_cu(vgprs, lds, lds_cu) == want


def test_workgroups_per_cu_default_is_gfx950_lds(planners_c):
    assert planners_c.gfx950_workgroups_per_cu(96, 53248) == 2


@pytest.mark.parametrize("args,match", [
    ((0, 1024), "vgprs must be in"), ((513, 1024), "vgprs must be in"), ((64, -1), "lds_bytes must be"),
])
def test_workgroups_per_cu_rejects(planners_c, args, match):
    with pytest.raises(ValueError, match=match):
        planners_c.gfx950_workgroups_per_cu(*args)


def test_gateup_block_m_rules(planners_c):
    # The gfx942 thresholds (same kernel variants): 16 if pe <= 12, 32 if pe < 29, else 48.
    for nvt, n, want in ((12, 1, 16), (13, 1, 32), (28, 1, 32), (29, 1, 48), (256, 16, 32), (0, 4, 16)):
        assert planners_c.gfx950_mxfp4_moe_gateup_block_m(nvt, n) == want
        assert planners_c.gfx950_mxfp4_moe_gateup_block_m(nvt, n) == planners_c.mxfp4_moe_gateup_block_m(nvt, n)


def test_down_plan_same_tiles_as_gfx942_and_n_steps_by_residency(planners_c):
    c = planners_c
    # VGPR-bound variant (1 workgroup per CU on both archs): exactly the gfx942 plan at 256 CUs.
    for nvt, n, N, K, mb in ((128, 64, 7168, 384, 64), (16, 16, 3584, 512, 16), (4096, 64, 2048, 768, 300)):
        want = c.mxfp4_moe_down_plan(nvt, n, N, K, mb, 256)
        assert c.gfx950_mxfp4_moe_down_plan(nvt, n, N, K, mb, 0, 176, 49152) == want
    # LDS-bound on gfx942 (1) but 2 per CU on gfx950: n_steps planned as for 512 CUs.
    got = c.gfx950_mxfp4_moe_down_plan(8192, 32, 7168, 384, 4000, 256, 96, 53248)
    assert got == (64, 2, c.mxfp4_moe_down_n_steps(4000, 7168, 512, 64, 2))
    assert got[2] != c.mxfp4_moe_down_n_steps(4000, 7168, 256, 64, 2)  # the residency changed the plan
    # K the down kernel does not serve.
    assert c.gfx950_mxfp4_moe_down_plan(64, 8, 1024, 256, 4, 0, 96, 4096) == (0, 0, 0)


def test_down_plan_rejects(planners_c):
    with pytest.raises(ValueError, match="does not fit a gfx950 CU"):
        planners_c.gfx950_mxfp4_moe_down_plan(64, 8, 1024, 384, 4, 0, 300, 53248)
    with pytest.raises(ValueError, match="num_active_experts must be"):
        planners_c.gfx950_mxfp4_moe_down_plan(64, 0, 1024, 384, 4, 0, 96, 4096)
