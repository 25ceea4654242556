"""Hazard checker: the counter rules (vmcnt in order, LDS in order, SMEM out of order), write-after-
outstanding-load, LDS writes retired before another wave reads them, LDS races (RAW/WAR) across waves."""
import pytest
import torch
from _emu_build import kernel_source

import moonmath_emu as emu


@pytest.fixture
def hz(build, arch):
    return emu.Module(build(kernel_source("hazards_core.hip"), arch))


def test_smem_out_of_order(hz):
    p = torch.tensor([10, 20], dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    hz.launch("smem_order", grid=1, block=64, args=[p, out, 1])
    assert (out == 30).all()
    with pytest.raises(emu.HazardError, match=r"read of s\d+ .*scalar memory"):
        hz.launch("smem_order", grid=1, block=64, args=[p, out, 0])


def test_lds_in_order(hz):
    out = torch.zeros(64, dtype=torch.int32)
    hz.launch("ds_order", grid=1, block=64, args=[out, 0])      # first of two reads after lgkmcnt(1): fine
    t = torch.arange(64)
    b = 2 * (t + 1)
    assert torch.equal(out, (2 * t + 1 + b).to(torch.int32))
    with pytest.raises(emu.HazardError, match="LDS"):
        hz.launch("ds_order", grid=1, block=64, args=[out, 1])


def test_vmem_in_order(hz):
    p = torch.arange(80, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    hz.launch("vm_order", grid=1, block=64, args=[p, out, 0])
    t = torch.arange(64, dtype=torch.int32)
    assert torch.equal(out, t + 1 + t + 1)
    with pytest.raises(emu.HazardError, match="vmcnt"):
        hz.launch("vm_order", grid=1, block=64, args=[p, out, 1])


def test_write_to_outstanding_load_destination(hz):
    p = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(emu.HazardError, match="write of v"):
        hz.launch("waw", grid=1, block=64, args=[p, out])


def test_lds_handoff_between_waves(hz):
    out = torch.zeros(128, dtype=torch.int32)
    hz.launch("lds_pass", grid=1, block=128, args=[out, 0])
    assert torch.equal(out[64:], torch.arange(64, dtype=torch.int32) + 5)
    with pytest.raises(emu.HazardError, match="before the s_waitcnt retiring the LDS write"):
        hz.launch("lds_pass", grid=1, block=128, args=[out, 1])
    with pytest.raises(emu.HazardError, match="LDS race"):
        hz.launch("lds_pass", grid=1, block=128, args=[out, 2])
    hz.launch("lds_pass", grid=1, block=128, args=[out, 2], check_hazards=False)


def test_lds_write_after_read_race(hz):
    out = torch.zeros(128, dtype=torch.int32)
    with pytest.raises(emu.HazardError, match="LDS race: write .* read by wave 0"):
        hz.launch("lds_war", grid=1, block=128, args=[out])


@pytest.mark.parametrize("mode,legal", [(0, True), (1, False), (2, True), (3, False)])
def test_lds_write_retired_one_barrier_later(hz, mode, legal):
    """A write retired before the SECOND barrier still precedes the reader: clean. Never retired: hazard."""
    src = torch.arange(64, dtype=torch.int32) * 3 + 1
    out = torch.zeros(128, dtype=torch.int32)
    want = src if mode >= 2 else torch.arange(64, dtype=torch.int32) + 5
    if legal:
        hz.launch("lds_pass_late", grid=1, block=128, args=[src, out, mode])
        assert torch.equal(out[64:], want)
        return
    kind = "LDS write" if mode == 1 else "direct-to-LDS load"
    with pytest.raises(emu.HazardError, match=f"before the s_waitcnt retiring the {kind}"):
        hz.launch("lds_pass_late", grid=1, block=128, args=[src, out, mode])
    counters = hz.launch("lds_pass_late", grid=1, block=128, args=[src, out, mode], check_hazards="warn")
    assert len(counters["hazards"]) == 1 and "lds_pass_late" in counters["hazards"][0]


def test_warn_mode_reports_each_site_once(hz):
    """Report-only mode: the racy handoff runs to the end, its one site reported once with its count."""
    out = torch.zeros(128, dtype=torch.int32)
    counters = hz.launch("lds_pass", grid=2, block=128, args=[out, 2], check_hazards="warn")
    assert len(counters["hazards"]) == 1
    assert counters["hazards"][0].startswith("LDS race") and "[128 times]" in counters["hazards"][0]
    assert hz.launch("lds_pass", grid=1, block=128, args=[out, 0], check_hazards="warn")["hazards"] == []
    with pytest.raises(ValueError, match="check_hazards"):
        hz.launch("lds_pass", grid=1, block=128, args=[out, 0], check_hazards="loud")
