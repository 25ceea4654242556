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


def test_launcher_rejections():
    with pytest.raises(ValueError, match="2 GiB"):
        kernel._check_ranges("op", A=(1 << 31) + 2)
    kernel._check_ranges("op", A=1 << 31)
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


def test_no_gfx950_kernels(monkeypatch):
    """Under the emulator at gfx950 the MoE ops say clearly that this build has no kernel for that arch."""
    import torch

    import moonmath_mxfp4_moe as mm
    from moonmath_common import NoKernelError, use_backend

    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    ids = torch.zeros(1, 1, dtype=torch.int32)
    sid, eid, ntpp, nblk = mm.moe_align_block_size(ids, 16, 1)
    A = torch.zeros(1, 256, dtype=torch.bfloat16)
    B = torch.zeros(1, 8, 32, 16, dtype=torch.uint8)
    Bs = torch.zeros(1, 8, 32, dtype=torch.uint8)
    C = torch.zeros(1, 32, dtype=torch.bfloat16)
    with use_backend("emu"), pytest.raises(NoKernelError, match="gfx950"):
        mm.mxfp4_moe_gateup(A, B, Bs, C, None, sid, eid, ntpp, nblk, 16, 1, 1)
