"""ISA budgets of the gfx942 MXFP4 MoE kernels, read from the built code objects' metadata.

Budget (docs/kernels/mxfp4_moe_gfx942.md): 512-thread workgroups (8 waves, 2 per SIMD), so at most 256
VGPRs per lane; no AGPRs, no scratch; SGPRs <= 80; LDS exactly the A staging, 2 * block_m * 256 bytes
(gate/up, double-buffered 128-k slabs) or block_m * K * 2 bytes (down, the whole A tile), plus 4 KiB of
dequantisation tables.
"""
from __future__ import annotations

import re

import pytest

from moonmath_common.codeobject import CodeObject
from moonmath_mxfp4_moe import kernel

# Per-variant VGPR ceilings: the counts clang 22 gives today plus headroom of ~10%. A jump past them is a
# regression to look at (spills come next), not noise.
GATEUP_VGPR = {(16, 1, "none"): 64, (16, 2, "none"): 84, (16, 3, "none"): 104, (32, 1, "none"): 64,
               (32, 2, "none"): 112, (32, 3, "none"): 132, (48, 1, "none"): 76, (48, 2, "none"): 144,
               (48, 3, "none"): 168, (16, 1, "situ"): 88, (16, 2, "situ"): 120, (32, 1, "situ"): 120,
               (32, 2, "situ"): 156, (48, 1, "situ"): 148, (48, 2, "situ"): 200}
GATEUP_VGPR[(16, 0, "situ")] = 68  # the shared gate/up tile: one accumulator tile per row subtile
# SwiGLU variants hold the same accumulators as SituGLU (gate and up tiles): same ceilings.
GATEUP_VGPR.update({(bm, nt, "silu"): v for (bm, nt, epi), v in list(GATEUP_VGPR.items()) if epi == "situ"})
DOWN_VGPR_MAX = 176
TABLES = 256 * 16  # the 256 dequantisation tables (one per E8M0 byte) in LDS


def _co(stem: str) -> CodeObject:
    path = kernel.KERNELS.path(stem, "gfx942", stem)
    return CodeObject.parse(path.read_bytes())


def test_gateup_budget():
    co = _co("mxfp4_moe_gateup")
    assert co.arch == "gfx942"
    names = set(co.kernels)
    want = {f"mxfp4_moe_gateup_bm{bm}_nt{nt}_{epi}" for (bm, nt, epi) in GATEUP_VGPR}
    assert names == want
    for name, k in co.kernels.items():
        bm, nt, epi = re.fullmatch(r"mxfp4_moe_gateup_bm(\d+)_nt(\d+)_(none|situ|silu)", name).groups()
        key = (int(bm), int(nt), epi)
        assert k.scratch == 0, name
        assert k.agpr == 0, name
        assert k.vgpr <= GATEUP_VGPR[key], f"{name}: {k.vgpr} VGPRs > budget {GATEUP_VGPR[key]}"
        assert k.sgpr <= 80, name
        assert k.lds == 2 * int(bm) * 256 + TABLES, name
        assert k.max_workgroup_size == kernel.THREADS, name


def test_down_budget():
    co = _co("mxfp4_moe_down")
    names = set(co.kernels)
    want = {f"mxfp4_moe_down_bm{bm}_k{K}_nt{nt}" for (bm, K) in kernel.DOWN_VARIANTS for nt in (1, 2)}
    assert names == want
    for name, k in co.kernels.items():
        bm, K, _ = map(int, re.fullmatch(r"mxfp4_moe_down_bm(\d+)_k(\d+)_nt(\d+)", name).groups())
        assert k.scratch == 0 and k.agpr == 0, name
        assert k.vgpr <= DOWN_VGPR_MAX, f"{name}: {k.vgpr} VGPRs"
        assert k.sgpr <= 80, name
        assert k.lds == bm * K * 2 + TABLES <= 65536, name


@pytest.mark.parametrize("block_m,n_out,epi,want", [
    (16, 384, kernel.EPI_SITU, 1), (32, 384, kernel.EPI_SITU, 1), (48, 512, kernel.EPI_SITU, 2),
    (32, 768, kernel.EPI_NONE, 3), (48, 512, kernel.EPI_NONE, 2), (32, 200, kernel.EPI_NONE, 2),
    (48, 100, kernel.EPI_NONE, 1),
])
def test_gateup_nt_choice(block_m, n_out, epi, want):
    assert kernel.gateup_nt(block_m, n_out, epi) == want


# The decode choice of the shared gate/up tile (nt 0, when it cuts the busiest CU's columns by >= 15 %):
# 128 live blocks (384 full-width workgroups on 304 CUs: the busiest CU computes 256 columns, at nt 0 192)
# take it; 512 (768 vs 704 columns) and EPI_NONE, larger block_m or no CU count do not.
@pytest.mark.parametrize("block_m,n_out,epi,rows,cus,want", [
    (16, 384, kernel.EPI_SILU, 128, 304, 0), (16, 384, kernel.EPI_SITU, 128, 304, 0),
    (16, 384, kernel.EPI_SILU, 512, 304, 1), (16, 384, kernel.EPI_NONE, 128, 304, 1),
    (32, 384, kernel.EPI_SILU, 128, 304, 1), (16, 384, kernel.EPI_SILU, 128, None, 1),
])
def test_gateup_nt_choice_decode(block_m, n_out, epi, rows, cus, want):
    assert kernel.gateup_nt(block_m, n_out, epi, rows, cus) == want


def test_expected_live_blocks():
    # Kimi-K3 decode (896 experts, top-16): the expected distinct experts of T * 16 uniform picks; the
    # routings of count_moe.py hit 118 / 234 / 379 at T = 8 / 16 / 32.
    assert [kernel.expected_live_blocks(896, 16 * T, 10**6) for T in (8, 16, 32)] == [119, 223, 390]
    assert kernel.expected_live_blocks(896, 128, 100) == 100  # at most the grid's blocks
    assert kernel.expected_live_blocks(8, 3, 100) == 3  # at most one block per row
    assert kernel.expected_live_blocks(8, 0, 100) == 0
    # So the launcher takes the shared tile at T = 8 and 16 on 304 CUs, not at 32.
    assert [kernel.gateup_nt(16, 384, kernel.EPI_SILU, kernel.expected_live_blocks(896, 16 * T, 10**6), 304)
            for T in (8, 16, 32)] == [0, 0, 1]


def test_launcher_rejections():
    with pytest.raises(ValueError, match="4 GiB"):
        kernel._check_ranges("op", A=1 << 32)
    kernel._check_ranges("op", A=(1 << 32) - 1)
    import torch

    A = torch.zeros(4, 512, dtype=torch.bfloat16)
    B = torch.zeros(1, 16, 64, 16, dtype=torch.uint8)
    Bs = torch.zeros(1, 16, 64, dtype=torch.uint8)
    C = torch.zeros(4, 64, dtype=torch.bfloat16)
    ids = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(ValueError, match="no down kernel for block_m=64, K=512"):
        kernel.launch_down(A, B, Bs, C, None, ids, ids[:1], ids[:1], 1, 64, 1, 1, 4, 1, False)
    with pytest.raises(ValueError, match="nt must be one of"):
        kernel.launch_gateup(A, B, Bs, C, None, ids, ids[:1], ids[:1], 1, 16, 4, 1, kernel.EPI_SITU, False, nt=3)
    with pytest.raises(ValueError, match="nt must be one of"):  # no shared gate/up tile without a gate
        kernel.launch_gateup(A, B, Bs, C, None, ids, ids[:1], ids[:1], 1, 16, 4, 1, kernel.EPI_NONE, False, nt=0)
    with pytest.raises(ValueError, match="nt 0 .* block_m 16 only"):
        kernel.launch_gateup(A, B, Bs, C, None, ids, ids[:1], ids[:1], 1, 32, 4, 1, kernel.EPI_SITU, False, nt=0)


@pytest.mark.parametrize("stem", ["mxfp4_moe_gateup", "mxfp4_moe_down"])
def test_gfx950_a16w4_build(stem):
    """gfx950 has every gfx942 variant (the a16w4 build of csrc/device/gfx950/), on v_mfma_f32_16x16x32_bf16:
    per kernel exactly half the static MFMA count of its gfx942 twin, no 16x16x16 left; the same LDS, no
    scratch, no AGPRs."""
    from collections import Counter

    import moonmath_emu

    objs = {a: kernel.KERNELS.path(stem, a, stem).read_bytes() for a in ("gfx942", "gfx950")}
    cos = {a: CodeObject.parse(b) for a, b in objs.items()}
    assert cos["gfx950"].arch == "gfx950"
    assert set(cos["gfx950"].kernels) == set(cos["gfx942"].kernels)
    mfma = {a: Counter(k for k, _, text in moonmath_emu.disassemble(b) if text.startswith("v_mfma"))
            for a, b in objs.items()}
    ops950 = {text.split()[0] for _, _, text in moonmath_emu.disassemble(objs["gfx950"]) if text.startswith("v_mfma")}
    assert ops950 == {"v_mfma_f32_16x16x32_bf16"}
    for name, k in cos["gfx950"].kernels.items():
        assert mfma["gfx950"][name] * 2 == mfma["gfx942"][name], name
        assert k.scratch == 0 and k.agpr == 0, name
        assert k.lds == cos["gfx942"].kernels[name].lds, name
        assert k.max_workgroup_size == kernel.THREADS, name
