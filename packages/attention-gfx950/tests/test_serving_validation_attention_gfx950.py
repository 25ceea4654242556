"""Bad input to the serving paths and the points of issue 18 (17) for the attention ops: a TypeError/ValueError
naming the argument, on the reference and emu backends; device-resident page lists are never read on the host."""
from __future__ import annotations

import pytest
import torch

import moonmath_attention_gfx950 as att
from moonmath_attention_gfx950 import as_emu_device, kernel
from moonmath_common import use_backend

bf, i32 = torch.bfloat16, torch.int32


@pytest.fixture(autouse=True, params=["reference", "emu"])
def _backend(request, monkeypatch):
    if request.param == "emu":
        pytest.importorskip("moonmath_emu")
        monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    with use_backend(request.param):
        yield request.param


def z(*shape, dtype=bf):
    return torch.zeros(shape, dtype=dtype)


def cu(*v):
    return torch.tensor(v, dtype=i32)


def test_out_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        att.forward(z(1, 2, 3, 128), z(1, 2, 3, 128), z(1, 2, 3, 128), out=[1])
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        att.forward_varlen(z(4, 2, 128), z(4, 2, 128), z(4, 2, 128), cu(0, 4), cu(0, 4), 4, 4, out="x")
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        att.forward_paged(z(4, 2, 128), z(2, 8, 2, 128), z(2, 8, 2, 128), cu(0, 4), cu(5), kv_indptr=cu(0, 1),
                          kv_page_indices=cu(1), out=3)


def test_self_overlapping_out_rejected():
    with pytest.raises(ValueError, match="out must not overlap itself"):
        att.forward_varlen(z(3, 2, 128), z(3, 2, 128), z(3, 2, 128), cu(0, 3), cu(0, 3), 3, 3,
                           out=z(1, 2, 128).expand(3, 2, 128))
    with pytest.raises(ValueError, match="out must not overlap itself"):
        att.forward(z(1, 2, 3, 128), z(1, 2, 3, 128), z(1, 2, 3, 128), out=z(1, 1, 3, 128).expand(1, 2, 3, 128))


def test_cpu_cu_seqlens_checked_beside_host_copies():
    good = cu(0, 5, 6, 7)
    with pytest.raises(ValueError, match="cu_seqlens_q must be non-decreasing"):
        att.forward_varlen(z(7, 2, 128), z(7, 2, 128), z(7, 2, 128), cu(0, 5, 3, 7), good, 7, 7,
                           host_cu_seqlens_q=good, host_cu_seqlens_k=good)


def test_plan_host_copies_checked():
    good = cu(0, 3, 5)
    with pytest.raises(ValueError, match="host_cu_seqlens_q must be a CPU tensor"):
        att.VarlenPlan().plan(good, good, 3, 3, 5, 5, heads=2, kv_heads=2, host_cu_seqlens_q=as_emu_device(good),
                              host_cu_seqlens_k=good)
    with pytest.raises(ValueError, match="give both host_cu_seqlens_q and host_cu_seqlens_k"):
        att.VarlenPlan().plan(good, good, 3, 3, 5, 5, heads=2, kv_heads=2, host_cu_seqlens_q=good)
    with pytest.raises(ValueError, match="max_seqlen_q must bound every sequence of host_cu_seqlens_q"):
        att.VarlenPlan().plan(as_emu_device(good), as_emu_device(good), 2, 3, 5, 5, heads=2, kv_heads=2,
                              host_cu_seqlens_q=good, host_cu_seqlens_k=good)
    with pytest.raises(ValueError, match="cu_seqlens_k\\[-1\\] must be <= total_k"):
        att.VarlenPlan().plan(good, good, 3, 3, 5, 4, heads=2, kv_heads=2)


def test_plan_run_checks_tensors_on_the_device_path(_backend):
    if _backend != "emu":
        pytest.skip("the device path runs on kernel backends")
    good = cu(0, 3, 5)
    plan = att.VarlenPlan().plan(as_emu_device(good), as_emu_device(good), 3, 3, 5, 5, heads=2, kv_heads=2)
    assert plan.on_device
    with pytest.raises(TypeError, match="q must have dtype bfloat16"):
        plan.run(z(5, 2, 128, dtype=torch.float32), z(5, 2, 128), z(5, 2, 128))
    with pytest.raises(ValueError, match="head dims"):
        plan.run(z(5, 2, 192), z(5, 2, 192), z(5, 2, 192))
    with pytest.raises(ValueError, match="out must not overlap itself"):
        plan.run(z(5, 2, 128), z(5, 2, 128), z(5, 2, 128), out=z(1, 2, 128).expand(5, 2, 128))
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        plan.run(z(5, 2, 128), z(5, 2, 128), z(5, 2, 128), out=1.0)


@pytest.mark.skipif(kernel.ARCH not in kernel.KERNELS.archs_built(), reason="no gfx950 code objects")
def test_device_page_list_is_not_read_on_the_host(_backend):
    """The page list stays on the device: a device-resident list (refusing host reads) runs; an index outside the
    cache, which the host cannot check there, reads zero keys instead of memory outside the cache."""
    if _backend != "emu":
        pytest.skip("kernel path")
    g = torch.Generator().manual_seed(0)
    q = torch.randn(4, 2, 128, generator=g).to(bf)
    kc = torch.randn(3, 8, 2, 128, generator=g).to(bf)
    vc = torch.randn(3, 8, 2, 128, generator=g).to(bf)
    lens, cq = cu(12), cu(0, 4)
    o = att.forward_paged(q, kc, vc, cq, lens, kv_indptr=cu(0, 2), kv_page_indices=as_emu_device(cu(2, 0)))
    ref = att.forward_paged(q, kc, vc, cq, lens, kv_indptr=cu(0, 2), kv_page_indices=cu(2, 0))
    assert torch.equal(o, ref)
    bad = att.forward_paged(q, kc, vc, cq, lens, block_table=as_emu_device(cu(2, 1 << 20).view(1, 2)))
    zero_tail = kc.clone(), vc.clone()
    zero_tail[0][1].zero_()
    zero_tail[1][1].zero_()
    want = att.forward_paged(q, zero_tail[0], zero_tail[1], cq, lens, block_table=cu(2, 1).view(1, 2))
    assert torch.equal(bad, want)
