"""VGPR index mode: s_set_gpr_idx_on adds M0[7:0] to the VGPR operands its mask enables (SRC0, SRC1,
SRC2, DST) of the VALU instructions until s_set_gpr_idx_off; SGPR/constant operands are not indexed.
(Used by AITER's mla_a8w8_qh16_qseqlen* and mla_dec_stage1_*_subQ16 objects.)"""
import pytest
import torch
from _emu_build import kernel_source

import moonmath_emu as emu


@pytest.fixture
def gi(build, arch):
    return emu.Module(build(kernel_source("gpr_idx.hip"), arch))


def _table():
    g = torch.Generator().manual_seed(3)
    return torch.randint(0, 1 << 20, (64, 8), generator=g, dtype=torch.int32)


def _expect(kernel: str, t: torch.Tensor, i: int) -> torch.Tensor:
    """out[lane, j] = v(30 + j) after the instruction, from the table v20..v27 = t[lane, 0..7]."""
    v = {20 + j: t[:, j] for j in range(8)}
    out = torch.zeros(64, 8, dtype=torch.int32)
    dst = 0
    if kernel == "idx_src0":
        r = v[20 + i] + v[21]
    elif kernel == "idx_src1":
        r = v[20] + v[21 + i]
    elif kernel == "idx_dst":
        r, dst = v[20] + v[21], i
    elif kernel == "idx_src2":
        r = v[20] + v[21] + v[22 + i]
    elif kernel == "idx_all":
        r, dst = v[20 + i] + v[21 + i] + v[22 + i], i
    elif kernel == "idx_const_src0":
        r = 5 + v[21 + i]
    else:
        r = v[20] + v[21]
    out[:, dst] = r
    return out


@pytest.mark.parametrize("kernel", ["idx_src0", "idx_src1", "idx_dst", "idx_src2", "idx_all", "idx_const_src0",
                                    "idx_none"])
@pytest.mark.parametrize("i", [0, 2, 5])
def test_indexed_operands(gi, kernel, i):
    t = _table()
    out = torch.zeros(64, 8, dtype=torch.int32)
    gi.launch(kernel, grid=1, block=64, args=[t, out, i])
    assert torch.equal(out, _expect(kernel, t, i))


def test_disassembly_prints_the_mode(gi):
    text = [t for k, _, t in gi.disassemble() if "gpr_idx" in t]
    assert any(t.startswith("s_set_gpr_idx_on s") and t.endswith(", gpr_idx(SRC0,SRC1,SRC2,DST)") for t in text)
    assert any(t.endswith(", gpr_idx(SRC0)") for t in text)
    assert any(t.endswith(", gpr_idx()") for t in text)
    assert "s_set_gpr_idx_off" in text


def test_disassembly_reassembles_bit_exact(build, arch):
    from test_core_decoder import roundtrip

    bad = roundtrip(build(kernel_source("gpr_idx.hip"), arch))
    assert not bad, "\n".join(bad[:20])


def test_index_past_v255_is_an_error(gi):
    t = _table()
    out = torch.zeros(64, 8, dtype=torch.int32)
    with pytest.raises(emu.EmuError, match="past v255"):
        gi.launch("idx_src0", grid=1, block=64, args=[t, out, 240])
