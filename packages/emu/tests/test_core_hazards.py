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
