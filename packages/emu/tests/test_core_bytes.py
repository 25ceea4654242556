"""Byte counters per launch: bytes requested by VMEM loads / stores, scalar loads, LDS reads / writes,
and the distinct 64-byte global lines VMEM touches (for bytes per token and re-read factors)."""
import pytest
import torch
from _emu_build import kernel_source

import moonmath_emu as emu


@pytest.fixture
def mem(build, arch):
    return emu.Module(build(kernel_source("memory.hip"), arch))


@pytest.fixture
def hz(build, arch):
    return emu.Module(build(kernel_source("hazards_core.hip"), arch))


def _lines(t: torch.Tensor, idx) -> set[int]:
    return {(t.data_ptr() + 4 * int(i)) // 64 for i in idx}


def test_global_load_store_bytes_and_lines(mem):
    src = torch.arange(256, dtype=torch.int32)
    idx = (torch.arange(64, dtype=torch.int32) * 37) % 256  # scattered: one line per few lanes
    idx[10] = idx[11] = idx[12] = 5                          # re-reads count as bytes, not as new lines
    out = torch.zeros(64, dtype=torch.int32)
    c = mem.launch("gather", grid=1, block=64, args=[src, idx, out])
    assert torch.equal(out, src[idx.long()])
    assert c["vmem_load_bytes"] == 64 * 4 * 2          # idx[t], then in[idx[t]]
    assert c["vmem_store_bytes"] == 64 * 4
    want = _lines(idx, range(64)) | _lines(src, idx.tolist()) | _lines(out, range(64))
    assert c["global_lines"] == len(want)
    assert c["lds_read_bytes"] == 0 and c["lds_write_bytes"] == 0
    assert c["smem_bytes"] > 0                          # the kernel arguments


def test_lds_bytes(hz):
    out = torch.zeros(128, dtype=torch.int32)
    c = hz.launch("lds_pass", grid=3, block=128, args=[out, 0])
    assert c["lds_write_bytes"] == 3 * 64 * 4 and c["lds_read_bytes"] == 3 * 64 * 4
    assert c["vmem_store_bytes"] == 3 * 128 * 4 and c["vmem_load_bytes"] == 0
    assert c["global_lines"] == len(_lines(out, range(128)))  # three workgroups store the same lines


def test_direct_to_lds_counts_as_a_vmem_load(hz):
    src = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(128, dtype=torch.int32)
    c = hz.launch("lds_pass_late", grid=1, block=128, args=[src, out, 2])
    assert c["vmem_load_bytes"] == 64 * 4                # the buffer_load ... lds of wave 0
    assert c["lds_read_bytes"] == 64 * 4 and c["lds_write_bytes"] == 0  # DS instructions only
    assert c["global_lines"] == len(_lines(src, range(64)) | _lines(out, range(128)))


def test_pc_counts_sum_to_the_wave_instructions(mem):
    src = torch.arange(256, dtype=torch.int32)
    idx = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    c = mem.launch("gather", grid=3, block=64, args=[src, idx, out])
    pcs = c["pc_counts"]
    assert sum(pcs.values()) == c["wave_instructions"]
    assert set(pcs.values()) == {3}  # straight-line code: every instruction once per wave, 3 waves
    text = {pc: t for k, pc, t in mem.disassemble() if k == "gather"}
    assert set(pcs) <= set(text) and any(text[pc].startswith("s_endpgm") for pc in pcs)
