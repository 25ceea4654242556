"""Lane checker (check_lanes): an MFMA reads all 64 lanes of its operands whatever EXEC is; lanes written
under a narrower EXEC (stale) or never written (undefined) that reach a global store are findings, lanes
that are computed but not stored are not. Cases in kernels/lanes.hip; the last one is clang's own
miscompile (docs/kernels/mxfp4_moe_gfx950.md, "Compiler pitfall")."""
import pytest
import torch
from _emu_build import kernel_source

import moonmath_emu as emu

ALL = (1 << 64) - 1
LOW_COLUMNS = sum(1 << lane for lane in range(64) if lane % 16 < 8)  # D columns j < 8 of a 16x16 tile


@pytest.fixture
def lanes(build, arch):
    return emu.Module(build(kernel_source("lanes.hip"), arch))


def _operands():
    g = torch.Generator().manual_seed(0)
    return (torch.rand(192 * 4, generator=g) * 2 - 1).half().view(torch.int64)


def _run(mod, mode, mask, check="warn"):
    out = torch.zeros(64 * 4)
    return mod.launch("lanes_mfma", grid=1, block=64, args=[_operands(), out, mode, mask], check_lanes=check)


def test_clean_mfma_has_no_finding(lanes):
    for mask in (ALL, LOW_COLUMNS):
        c = _run(lanes, 0, mask)
        assert c["lanes"] == [] and c["mfma_partial_exec"] == 0


def test_operand_recomputed_under_partial_exec_is_stale(lanes):
    c = _run(lanes, 1, ALL)
    assert c["mfma_partial_exec"] == 1
    (msg,) = c["lanes"]
    assert "store of undefined lanes 0xffffffffffffffff" in msg
    assert "are stale: its last write" in msg and "v_lshlrev_b64" in msg
    assert "under EXEC 0xffffffff and this MFMA runs under EXEC 0xffffffff" in msg
    assert "v_mfma_f32_16x16x16_f16" in msg and "lanes_mfma" in msg
    with pytest.raises(emu.LaneError, match="stale"):
        _run(lanes, 1, ALL, check=True)


def test_mfma_under_partial_exec_on_whole_operands_is_counted_not_reported(lanes):
    c = _run(lanes, 2, ALL)
    assert c["lanes"] == [] and c["mfma_partial_exec"] == 1
    _run(lanes, 2, ALL, check=True)


def test_undefined_columns_reported_only_when_stored(lanes):
    for mode in (3, 4):  # 4: through LDS
        (msg,) = _run(lanes, mode, ALL)["lanes"]
        undefined = (ALL ^ LOW_COLUMNS) if mode == 3 else None
        if undefined is not None:
            assert f"store of undefined lanes {undefined:#x}" in msg
        assert "v200 are undefined (never written)" in msg
        assert _run(lanes, mode, LOW_COLUMNS)["lanes"] == []  # the undefined columns are never stored


def test_off_by_default_and_environment(lanes, monkeypatch):
    monkeypatch.delenv("MOONMATH_EMU_CHECK_LANES", raising=False)
    out = torch.zeros(64 * 4)
    c = lanes.launch("lanes_mfma", grid=1, block=64, args=[_operands(), out, 1, ALL])
    assert c["lanes"] == [] and c["mfma_partial_exec"] == 1  # counted even with the checker off
    monkeypatch.setenv("MOONMATH_EMU_CHECK_LANES", "1")
    with pytest.raises(emu.LaneError):
        lanes.launch("lanes_mfma", grid=1, block=64, args=[_operands(), out, 1, ALL])
    monkeypatch.setenv("MOONMATH_EMU_CHECK_LANES", "loud")
    with pytest.raises(ValueError, match="MOONMATH_EMU_CHECK_LANES"):
        lanes.launch("lanes_mfma", grid=1, block=64, args=[_operands(), out, 1, ALL])
    with pytest.raises(ValueError, match="check_lanes"):
        lanes.launch("lanes_mfma", grid=1, block=64, args=[_operands(), out, 1, ALL], check_lanes="loud")


def test_lanes_log(lanes, monkeypatch, tmp_path):
    log = tmp_path / "lanes.log"
    monkeypatch.setenv("MOONMATH_EMU_LANES_LOG", str(log))
    _run(lanes, 1, ALL)
    text = log.read_text()
    assert text.startswith("launch lanes_mfma mfma_partial_exec=1 findings=1\n") and "stale" in text


def test_cndmask_takes_only_the_selected_source(lanes):
    out = torch.zeros(64, dtype=torch.int32)
    assert lanes.launch("lanes_cndmask", grid=1, block=64, args=[out, 1], check_lanes=True)["lanes"] == []
    assert torch.equal(out, torch.arange(64, dtype=torch.int32) + 1)
    with pytest.raises(emu.LaneError, match="v210 were never written"):
        lanes.launch("lanes_cndmask", grid=1, block=64, args=[out, 0], check_lanes=True)


@pytest.mark.parametrize("no_sink", [False, True])
def test_clang_sinks_a_scaled_mfma_into_a_divergent_branch(build, no_sink):
    extra = ("-mllvm", "-disable-machine-sink") if no_sink else ()
    mod = emu.Module(build(kernel_source("lanes.hip"), "gfx950", extra))
    text = [t for k, _, t in mod.disassemble() if k == "sunk_scaled_mfma"]
    mfma = next(i for i, t in enumerate(text) if t.startswith("v_mfma_scale"))
    saveexec = next(i for i, t in enumerate(text) if t.startswith("s_and_saveexec_b64"))
    assert (mfma > saveexec) == (not no_sink), "the compiler's placement of the MFMA changed"
    g = torch.Generator().manual_seed(1)
    a = torch.randint(0, 256, (64 * 32,), dtype=torch.uint8, generator=g)
    b = torch.randint(0, 256, (64 * 32,), dtype=torch.uint8, generator=g)
    sc = torch.full((64,), 127, dtype=torch.uint8)
    out = torch.zeros(64 * 4)
    args = [a, b, sc, out, 20]
    c = mod.launch("sunk_scaled_mfma", grid=1, block=64, args=args, check_lanes="warn")
    assert c["mfma_partial_exec"] == (0 if no_sink else 1)
    if no_sink:
        assert c["lanes"] == []
    else:
        (msg,) = c["lanes"]
        assert "are stale" in msg and "v_mfma_scale_f32_16x16x128_f8f6f4" in msg


def test_low_dword_of_a_64bit_mad_needs_only_low_addend(lanes):
    out = torch.zeros(64, dtype=torch.int32)
    lanes.launch("lanes_mad64", grid=1, block=64, args=[out, 0], check_lanes=True)
    assert torch.equal(out, 4 * torch.arange(64, dtype=torch.int32))  # t * 3 + t (the emulator's v213 is 0)
    with pytest.raises(emu.LaneError, match="v213 were never written"):
        lanes.launch("lanes_mad64", grid=1, block=64, args=[out, 1], check_lanes=True)
