"""Memory model: sanitizer (global, LDS, scratch), buffer resources (raw and structured range rules,
scalar buffer loads), direct-to-LDS loads, dynamic LDS, private memory through the flat aperture."""
import re

import numpy as np
import pytest
import torch
from _emu_build import kernel_source

import moonmath_emu as emu


@pytest.fixture
def mem(build, arch):
    return emu.Module(build(kernel_source("memory.hip"), arch))


def test_oob_store_is_reported_with_context(mem):
    out = torch.zeros(100, dtype=torch.int32)
    with pytest.raises(emu.MemoryViolation) as ei:
        mem.launch("fill", grid=2, block=64, args=[out, 128])
    msg = str(ei.value)
    assert "fill" in msg and "global_store_dword" in msg and "store" in msg
    assert re.search(r"pc 0x[0-9a-f]+", msg)
    addr = int(re.search(r"address 0x([0-9a-f]+)", msg).group(1), 16)
    assert addr == out.data_ptr() + 400                   # lane 100 is the first one past the end
    assert "arg 0" in msg and "0 bytes past its end" in msg  # nearest buffer named with its range
    # the in-bounds part must not have been... (stores of the faulting instruction may be partial);
    # the correct launch runs clean
    mem.launch("fill", grid=2, block=64, args=[out, 100])
    assert torch.equal(out, torch.arange(100, dtype=torch.int32) * 3)


def test_oob_load_is_reported(mem):
    src = torch.arange(64, dtype=torch.int32)
    idx = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    mem.launch("gather", grid=1, block=64, args=[src, idx, out])
    assert torch.equal(out, src)
    idx[5] = 64
    with pytest.raises(emu.MemoryViolation, match="load"):
        mem.launch("gather", grid=1, block=64, args=[src, idx, out])
    idx[5] = -1
    with pytest.raises(emu.MemoryViolation, match="before its start"):
        mem.launch("gather", grid=1, block=64, args=[src, idx, out])


def test_views_register_their_whole_storage(mem):
    # a view's storage extent is the valid range: reading outside the view but inside its storage is OK
    base = torch.arange(128, dtype=torch.int32)
    view = base[32:96]
    idx = torch.full((64,), -32, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    mem.launch("gather", grid=1, block=64, args=[view, idx, out])
    assert torch.equal(out, torch.zeros(64, dtype=torch.int32))


def test_lds_out_of_bounds(mem):
    idx = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    mem.launch("lds_oob", grid=1, block=64, args=[idx, out])
    assert torch.equal(out, idx)
    idx[3] = 64
    with pytest.raises(emu.MemoryViolation, match="LDS"):
        mem.launch("lds_oob", grid=1, block=64, args=[idx, out])


def test_dynamic_lds(mem):
    out = torch.zeros(64, dtype=torch.int32)
    mem.launch("dyn_lds", grid=1, block=64, args=[out, 200], dynamic_lds=800)
    assert torch.equal(out, torch.full((64,), 200 * 201 // 2, dtype=torch.int32))
    with pytest.raises(emu.MemoryViolation, match="LDS"):
        mem.launch("dyn_lds", grid=1, block=64, args=[out, 200], dynamic_lds=400)


@pytest.mark.parametrize("stride,num_records", [(8, 64), (8, 40), (12, 10), (4, 0)])
def test_structured_buffer_index_range(mem, stride, num_records):
    src = torch.arange(64 * stride // 4 + 4, dtype=torch.int32) + 1
    out = torch.full((64,), -9, dtype=torch.int32)
    mem.launch("struct_load", grid=1, block=64, args=[src, out, stride, num_records, 0])
    want = [int(src[i * stride // 4]) if i < num_records else 0 for i in range(64)]
    assert out.tolist() == want


def test_raw_buffer_in_range_but_outside_every_tensor_is_a_violation(mem):
    out = torch.zeros(32, dtype=torch.int32)
    mem.launch("raw_store", grid=1, block=64, args=[out, 32 * 4])   # lanes 32.. are out of range: dropped
    assert torch.equal(out, torch.arange(32, dtype=torch.int32))
    with pytest.raises(emu.MemoryViolation, match="buffer_store_dword"):
        mem.launch("raw_store", grid=1, block=64, args=[out, 64 * 4])  # in range for the V#, past the tensor


@pytest.mark.parametrize("num_records,want", [(64, (3, 4)), (16, (3, 4)), (12, (3, 0)), (8, (0, 0))])
def test_scalar_buffer_load_range(mem, num_records, want):
    src = torch.arange(16, dtype=torch.int32) + 1
    out = torch.zeros(64, dtype=torch.int32)
    mem.launch("sbuf", grid=1, block=64, args=[src, out, num_records])
    assert out[0].item() == want[0] * 1000 + want[1]


def test_direct_to_lds_with_wait(mem):
    src = torch.arange(64, dtype=torch.int32) * 7
    out = torch.zeros(64, dtype=torch.int32)
    cnt = mem.launch("lds_dma_ok", grid=1, block=64, args=[src, out])
    assert torch.equal(out, torch.roll(src, -1))
    assert cnt["vmem"] >= 1 and cnt["ds"] >= 1


def test_direct_to_lds_read_before_vmcnt_is_a_hazard(mem):
    src = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(emu.HazardError, match="direct-to-LDS"):
        mem.launch("lds_dma_early", grid=1, block=64, args=[src, out])
    # direct-to-LDS data lands when the load retires (s_waitcnt vmcnt): a read before the wait sees the
    # old LDS contents (zero at workgroup start); with the checker off the launch completes
    mem.launch("lds_dma_early", grid=1, block=64, args=[src, out], check_hazards=False)
    assert torch.equal(out, torch.zeros_like(out))
    # report-only mode: the one hazard site once, and the launch completes
    counters = mem.launch("lds_dma_early", grid=1, block=64, args=[src, out], check_hazards="warn")
    assert len(counters["hazards"]) == 1 and "direct-to-LDS" in counters["hazards"][0]
    assert torch.equal(out, torch.zeros_like(out))


def test_private_memory_through_flat_aperture(mem):
    idx = torch.randint(0, 40, (64,), dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    assert mem.kernel_info("scratch_array")["scratch"] >= 160
    mem.launch("scratch_array", grid=1, block=64, args=[idx, out])
    assert torch.equal(out, torch.arange(64, dtype=torch.int32) * 100 + idx)
    idx[7] = 1000
    with pytest.raises(emu.MemoryViolation, match="scratch"):
        mem.launch("scratch_array", grid=1, block=64, args=[idx, out])


def test_none_and_scalar_arguments(mem):
    out = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(emu.MemoryViolation):
        mem.launch("fill", grid=1, block=64, args=[None, 64])   # null pointer store
    with pytest.raises(TypeError):
        mem.launch("fill", grid=1, block=64, args=["x", 64])
    mem.launch("fill", grid=1, block=64, args=[out, np.int32(10)])
    assert out[:10].tolist() == [3 * i for i in range(10)] and out[10:].eq(0).all()


@pytest.mark.parametrize("num_records", [1024, 600])
def test_direct_to_lds_16_bytes_gfx950(build, num_records):
    mod = emu.Module(build(kernel_source("memory.hip"), "gfx950"))
    src = torch.arange(256, dtype=torch.int32) + 11
    out = torch.zeros(256, dtype=torch.int32)
    mod.launch("lds_dma_x4", grid=1, block=64, args=[src, out, num_records])
    byte = torch.arange(256) * 4
    want = torch.where(byte + 4 <= num_records, src, torch.zeros_like(src))  # per-dword range check
    assert torch.equal(out, want)
