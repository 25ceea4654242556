"""VarlenPlan on the gfx950 kernels (emulator): the device-planned path (cu_seqlens as device-resident tensors that
refuse every host read) == the host-planned path == forward_varlen, bit for bit; a plan reused across layers; a
re-plan on the device with new lengths in the same tensors (as a graph replay would)."""
from __future__ import annotations

import pytest
import torch
from _attn_testing import rnd

import moonmath_attention_gfx950 as att
from moonmath_attention_gfx950 import HostReadError, as_emu_device, kernel

bf, i32 = torch.bfloat16, torch.int32

pytestmark = pytest.mark.skipif(kernel.ARCH not in kernel.KERNELS.archs_built(),
                                reason="this build has no gfx950 code objects")


@pytest.fixture(autouse=True)
def _emu_gfx950(emu_gfx950):
    """Every test here runs on the emulator as gfx950 (conftest.emu_gfx950)."""


def cu(lens):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=i32)


def same(a, b, rows):
    """Bitwise equality on the rows inside sequences (rows outside are not written)."""
    return torch.equal(a[:rows].view(torch.int16), b[:rows].view(torch.int16))


def test_device_tensor_refuses_host_reads():
    t = as_emu_device(torch.tensor([0, 3, 5], dtype=i32))
    assert t.numel() == 3 and t.dtype == i32 and t.data_ptr() != 0
    for read in (lambda: t.tolist(), lambda: int(t[0]), lambda: t.cpu(), lambda: t.max(), lambda: bool(t.any()),
                 lambda: t.clone()):
        with pytest.raises(HostReadError):
            read()


@pytest.mark.parametrize("causal,dims", [(True, (128, 128)), (False, (192, 128))])
def test_device_plan_equals_host_plan_and_varlen(causal, dims):
    lens_q, lens_k = [5, 0, 17, 1], [20, 3, 70, 9]
    total_q, total_k = sum(lens_q) + 3, sum(lens_k) + 2      # padding rows past the last sequence
    cq, ck = cu(lens_q), cu(lens_k)
    hq, hk = 4, 2
    kw = dict(heads=hq, kv_heads=hk, causal=causal)
    dev_plan = att.VarlenPlan().plan(as_emu_device(cq.clone()), as_emu_device(ck.clone()), max(lens_q), max(lens_k),
                                     total_q, total_k, **kw)
    assert dev_plan.on_device
    host_plan = att.VarlenPlan().plan(cq, ck, max(lens_q), max(lens_k), total_q, total_k, **kw)
    assert not host_plan.on_device
    n = int(cq[-1])
    for layer in range(2):     # one plan, several layers with different tensors
        # layer 1 reads q as a slice of a wider (fused) projection: other strides, the same plan
        q = rnd(total_q, hq + 2 * layer, dims[0], seed=10 * layer)[:, :hq]
        k = rnd(total_k, hk, dims[0], seed=10 * layer + 1)
        v = rnd(total_k, hk, dims[1], seed=10 * layer + 2)
        o_d, l_d = dev_plan.run(q, k, v, return_lse=True)
        o_h, l_h = host_plan.run(q, k, v, return_lse=True)
        o_r, l_r = att.forward_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=causal, return_lse=True)
        assert same(o_d, o_r, n) and same(o_h, o_r, n)
        assert torch.equal(l_d[:, :n], l_r[:, :n]) and torch.equal(l_h[:, :n], l_r[:, :n])


def test_device_replan_with_new_lengths():
    """New lengths written into the same device tensors, re-planned on the device (as a graph replay of the plan
    kernel would): the run gives the new lengths' result, in the plan's same buffer."""
    hq = hk = 2
    total_q, total_k, max_q, max_k = 40, 96, 30, 64
    cq_dev, ck_dev = torch.zeros(4, dtype=i32), torch.zeros(4, dtype=i32)
    q, k, v = rnd(total_q, hq, 128, seed=1), rnd(total_k, hk, 128, seed=2), rnd(total_k, hk, 128, seed=3)
    plan = att.VarlenPlan()
    bufs = []
    for lens_q, lens_k in (([3, 30, 7], [64, 10, 22]), ([20, 0, 20], [5, 64, 27])):
        cq_dev.copy_(cu(lens_q))
        ck_dev.copy_(cu(lens_k))
        plan.plan(as_emu_device(cq_dev), as_emu_device(ck_dev), max_q, max_k, total_q, total_k, heads=hq,
                  kv_heads=hk, causal=True)
        bufs.append(plan._buf.data_ptr())
        o = plan.run(q, k, v)
        ref = att.forward_varlen(q, k, v, cu(lens_q), cu(lens_k), max_q, max_k, causal=True)
        assert same(o, ref, sum(lens_q))
    assert bufs[0] == bufs[1]


def test_device_plan_matches_host_plan_with_host_copies():
    lens = [9, 33]
    c = cu(lens)
    plan = att.VarlenPlan().plan(as_emu_device(c.clone()), as_emu_device(c.clone()), 33, 33, 42, 42, heads=2,
                                 kv_heads=2, host_cu_seqlens_q=c, host_cu_seqlens_k=c)
    assert not plan.on_device    # host copies: the exact host plan
    q, k, v = rnd(42, 2, 128, seed=5), rnd(42, 2, 128, seed=6), rnd(42, 2, 128, seed=7)
    assert same(plan.run(q, k, v), att.forward_varlen(q, k, v, c, c, 33, 33), 42)


def test_forward_varlen_with_device_cu_seqlens_plans_on_the_device():
    lens_q, lens_k = [7, 0, 40], [33, 5, 64]
    cq, ck = cu(lens_q), cu(lens_k)
    q, k, v = rnd(47, 2, 128, seed=11), rnd(102, 1, 128, seed=12), rnd(102, 1, 128, seed=13)
    a, la = att.forward_varlen(q, k, v, as_emu_device(cq.clone()), as_emu_device(ck.clone()), 40, 64, causal=True,
                               return_lse=True)
    b, lb = att.forward_varlen(q, k, v, cq, ck, 40, 64, causal=True, return_lse=True)
    assert same(a, b, 47) and torch.equal(la, lb)


def test_device_plan_more_than_one_scan_round():
    """B > 256: the planning kernel scans 256 sequences per round; lengths 0..3, some empty, in one batch."""
    g = torch.Generator().manual_seed(4)
    lens_q = torch.randint(0, 4, (300,), generator=g).tolist()
    lens_k = torch.randint(0, 4, (300,), generator=g).tolist()
    cq, ck = cu(lens_q), cu(lens_k)
    tq, tk = int(cq[-1]), int(ck[-1])
    q, k, v = rnd(tq, 1, 128, seed=21), rnd(tk, 1, 128, seed=22), rnd(tk, 1, 128, seed=23)
    plan = att.VarlenPlan().plan(as_emu_device(cq.clone()), as_emu_device(ck.clone()), 3, 3, tq, tk, heads=1,
                                 kv_heads=1, causal=False)
    assert plan.on_device
    o, l = plan.run(q, k, v, return_lse=True)
    ro, rl = att.forward_varlen(q, k, v, cq, ck, 3, 3, return_lse=True)
    assert same(o, ro, tq) and torch.equal(l, rl)


def test_device_plan_offsets_not_from_zero():
    """cu_seqlens need not start at 0 nor end at the total: the device plan writes the same rows as the host's."""
    cq, ck = torch.tensor([3, 10, 30], dtype=i32), torch.tensor([5, 5, 77], dtype=i32)
    q, k, v = rnd(36, 2, 128, seed=31), rnd(80, 2, 128, seed=32), rnd(80, 2, 128, seed=33)
    out_d = torch.full((36, 2, 128), 7.0, dtype=bf)
    out_h = out_d.clone()
    att.VarlenPlan().plan(as_emu_device(cq.clone()), as_emu_device(ck.clone()), 20, 72, 36, 80, heads=2,
                          kv_heads=2, causal=True).run(q, k, v, out=out_d)
    att.forward_varlen(q, k, v, cq, ck, 20, 72, causal=True, out=out_h)
    assert torch.equal(out_d.view(torch.int16), out_h.view(torch.int16))   # untouched rows included
    assert torch.equal(out_d[:3], torch.full((3, 2, 128), 7.0, dtype=bf))
