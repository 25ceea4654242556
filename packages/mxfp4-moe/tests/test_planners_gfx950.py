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


def _blocks(rows, bm):
    return sum(-(-r // bm) for r in rows)


@pytest.mark.parametrize("rows,cus,want", [
    # 250 experts of 4 rows + a shared expert of 128: 258 blocks of 16 (two CUs get a second), 254 of 32
    ([4] * 250 + [128], 256, 32),
    # 32 rows still leave 260 blocks, 48 rows 255: the shortest tile that fits one per CU
    ([4] * 245 + [480], 256, 48),
    # no taller tile helps (264 / 260 / 259 blocks: two per CU on some CUs either way): the gate/up rule's 16
    ([4] * 256 + [128], 256, 16),
    # few blocks: 16 (the gate/up rule), whatever the CU count
    ([1] * 16 + [16], 256, 16),
    ([3] * 20, 8, 16),
    # fewer CUs: 10 experts of 20 rows + 10 of 4 = 30 blocks of 16, 20 of 32: over 20 CUs 32, over 16 CUs 16
    ([20] * 10 + [4] * 10, 20, 32),
    ([20] * 10 + [4] * 10, 16, 16),
    # the gate/up rule already picks 48 (pe >= 29): kept
    ([64] * 8, 256, 48),
    # nothing routed (unused experts only)
    ([0] * 8, 256, 16),
])
def test_layer_block_m(planners_c, rows, cus, want):
    got = planners_c.gfx950_mxfp4_moe_layer_block_m(rows, cus)
    assert got == want
    nvt, active = sum(rows), sum(r > 0 for r in rows)
    base = planners_c.gfx950_mxfp4_moe_gateup_block_m(nvt, max(active, 1))
    assert got >= base
    # the chosen tile has the fewest blocks per CU of the tiles >= base, and is the shortest such
    per_cu = {bm: -(-_blocks(rows, bm) // cus) for bm in (16, 32, 48) if bm >= base}
    assert per_cu[got] == min(per_cu.values())
    assert all(per_cu[bm] > per_cu[got] for bm in per_cu if bm < got)


def test_layer_block_m_default_cus_is_mi355x(planners_c):
    rows = [4] * 250 + [128]
    assert planners_c.gfx950_mxfp4_moe_layer_block_m(rows, 0) == 32
    assert planners_c.gfx950_mxfp4_moe_layer_block_m(rows, 512) == 16  # 258 blocks fit 512 CUs at 16


@pytest.mark.parametrize("rows,cus,match", [
    ([4, -1], 256, "expert_rows"), ([2**32], 256, "expert_rows"), ([2**31, 2**31], 256, "sum"),
    ([4], 70000, "num_cus"),
])
def test_layer_block_m_rejects(planners_c, rows, cus, match):
    with pytest.raises(ValueError, match=match):
        planners_c.gfx950_mxfp4_moe_layer_block_m(rows, cus)


def test_layer_block_m_from_topk_ids():
    import torch

    from moonmath_mxfp4_moe import mxfp4_moe_layer_a4w4_block_m

    # 250 experts get 4 slots each, expert 250 (shared) 128; ids outside [0, E) are routed nowhere
    ids = torch.cat((torch.arange(250).repeat_interleave(4), torch.full((128,), 250)))
    ids = torch.cat((ids, torch.tensor([-1, 251, 999] * 4))).reshape(-1, 4).to(torch.int32)
    assert mxfp4_moe_layer_a4w4_block_m(ids, 251, 256) == 32
    assert mxfp4_moe_layer_a4w4_block_m(ids.long(), 251, 512) == 16
    with pytest.raises(TypeError, match="topk_ids"):
        mxfp4_moe_layer_a4w4_block_m(ids.float(), 251)
    with pytest.raises(ValueError, match="num_experts"):
        mxfp4_moe_layer_a4w4_block_m(ids, 0)
