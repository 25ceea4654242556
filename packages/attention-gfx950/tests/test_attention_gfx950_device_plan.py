"""The device planning kernel (attention_plan.hip) writes the host planner's plan (attention_planner.hpp), field by
field: the work items (key ranges, split parts, slots, sink_part), the merge items and the slot count, for random
length sets, causal or not, with and without a window, and split policies that split (idle CUs) or not. Then the
outputs: device-planned == host-planned == forward_varlen bit for bit, split cases included, and a device re-plan of
new lengths in the same tensors. The cu_seqlens are EmuDeviceTensors, which refuse every host read."""
from __future__ import annotations

import random

import pytest
import torch
from _attn_testing import rnd

import moonmath_attention_gfx950 as att
from moonmath_attention_gfx950 import as_emu_device, kernel, serving

i32 = torch.int32

pytestmark = pytest.mark.skipif(kernel.ARCH not in kernel.KERNELS.archs_built(),
                                reason="this build has no gfx950 code objects")


@pytest.fixture(autouse=True)
def _emu_gfx950(emu_gfx950):
    """Every test here runs on the emulator as gfx950 (conftest.emu_gfx950)."""


def cu(lens):
    return torch.tensor([0] + list(torch.tensor(lens, dtype=torch.int64).cumsum(0)), dtype=i32)


def host_plan(lens_q, lens_k, heads, kv_heads, causal, window):
    """The host planner's plan under the current planner options, decoded."""
    p = kernel._C().plan_forward_varlen(cu(lens_q).tolist(), cu(lens_k).tolist(), heads, kv_heads, causal, False, 1.0,
                                        [0] * 14, **kernel._PLANNER, window_left=window[0], window_right=window[1])
    return serving.decode_host_plan(p)


def device_plan(lens_q, lens_k, heads, kv_heads, causal, window, max_q=None, max_k=None, pad_q=0):
    """VarlenPlan planned on the device from device-resident cu_seqlens; its buffer read back."""
    max_q = max(lens_q, default=0) if max_q is None else max_q
    max_k = max(lens_k, default=0) if max_k is None else max_k
    plan = att.VarlenPlan().plan(as_emu_device(cu(lens_q)), as_emu_device(cu(lens_k)), max_q, max_k,
                                 sum(lens_q) + pad_q, sum(lens_k), heads=heads, kv_heads=kv_heads, causal=causal,
                                 window_size=window)
    assert plan.on_device
    return plan, serving.read_device_plan(plan._buf, plan._layout, padding=True)


def assert_same_plan(dev, host, layout):
    n, m = len(host["items"]), len(host["merges"])
    assert n <= layout["items"] and m <= layout["merges"] and host["n_slots"] <= layout["slots"]
    for i, (d, h) in enumerate(zip(dev["items"][:n], host["items"])):
        for f in serving.ITEM_FIELDS:
            assert d[f] == h[f], f"work item {i}: {f} = {d[f]} on the device, {h[f]} on the host"
    for i, (d, h) in enumerate(zip(dev["merges"][:m], host["merges"])):
        for f in serving.MERGE_FIELDS:
            assert d[f] == h[f], f"merge item {i}: {f} = {d[f]} on the device, {h[f]} on the host"
    assert dev["n_slots"] == host["n_slots"]
    # past the plan: empty entries (q_len 0: the kernels write nothing for them), up to the capacities
    assert all(it["q_len"] == 0 and it["kv_end"] == 0 and it["slot"] == -1 for it in dev["items"][n:])
    assert all(mi["q_len"] == 0 and mi["n_parts"] == 0 for mi in dev["merges"][m:])


def random_case(rng: random.Random):
    big_batch = rng.random() < 0.1
    B = rng.randint(257, 400) if big_batch else rng.randint(1, 8)
    long_q = not big_batch and rng.random() < 0.3
    lens_q = [rng.choice([0, 1, rng.randint(0, 3)]) if big_batch else
              rng.randint(0, 1300 if long_q else 300) * (rng.random() > 0.15) for _ in range(B)]
    lens_k = [rng.randint(0, 5) if big_batch else rng.randint(0, 9000 if rng.random() < 0.4 else 700)
              for _ in range(B)]
    kv_heads = rng.choice([1, 1, 2, 4])
    heads = kv_heads * rng.choice([1, 2, 4, 8])
    causal = rng.random() < 0.5
    window = (-1, -1)
    if rng.random() < 0.3:
        left = rng.choice([-1, rng.randint(0, 2000)])
        right = 0 if causal else rng.choice([-1, rng.randint(0, 2000)])
        window = (-1, -1) if left < 0 and (right < 0 or causal) else (left, right)
    policy = rng.choice([{}, {}, {"num_cus": rng.choice([1, 2, 64, 304, 1024, 4096, 10**6]),
                                  "min_part_blocks": rng.randint(1, 4), "max_parts": rng.randint(1, 24)}])
    return lens_q, lens_k, heads, kv_heads, causal, window, policy


def check_random_cases(seed: int, n: int):
    rng = random.Random(seed)
    splits = 0
    for _ in range(n):
        lens_q, lens_k, heads, kv_heads, causal, window, policy = random_case(rng)
        with kernel.planner_options(**policy):
            host = host_plan(lens_q, lens_k, heads, kv_heads, causal, window)
            plan, dev = device_plan(lens_q, lens_k, heads, kv_heads, causal, window, pad_q=rng.randint(0, 300))
        assert_same_plan(dev, host, plan._layout)
        splits += bool(host["merges"])
    return splits


def test_device_plan_is_the_host_plan_for_random_lengths():
    assert check_random_cases(seed=13, n=60) >= 10      # a good share of them split KV


@pytest.mark.slow
def test_device_plan_is_the_host_plan_for_many_random_lengths():
    assert check_random_cases(seed=1313, n=1500) >= 200


def test_device_plan_splits_like_the_host_on_the_default_machine():
    """256 CUs: one sequence of 9000 keys on 2 heads leaves CUs idle -> 16 parts; with 64 sequences nothing splits;
    ties (equal block counts) keep the sequence order, heaviest first (causal tiles of one long sequence)."""
    for lens_q, lens_k, heads, causal in (([100], [9000], 2, False), ([1000], [1000], 4, True),
                                          ([300] * 64, [4096] * 64, 8, False), ([5, 700, 5, 700], [64, 800, 64, 9000],
                                                                               1, True)):
        host = host_plan(lens_q, lens_k, heads, heads, causal, (-1, -1))
        plan, dev = device_plan(lens_q, lens_k, heads, heads, causal, (-1, -1))
        assert_same_plan(dev, host, plan._layout)
    assert len(host_plan([100], [9000], 2, 2, False, (-1, -1))["merges"]) == 1


def test_device_plan_sorts_ties_stably_over_several_radix_passes():
    """Block counts above 256 (two radix digits) and many equal ones across more than 256 tiles."""
    rng = random.Random(7)
    lens_q = [rng.choice([1, 256, 300]) for _ in range(180)]
    lens_k = [rng.choice([64 * 300, 64 * 300 + 1, 64 * 44, 5]) for _ in range(180)]
    with kernel.planner_options(num_cus=10**6, min_part_blocks=1, max_parts=2):
        host = host_plan(lens_q, lens_k, 1, 1, False, (-1, -1))
        plan, dev = device_plan(lens_q, lens_k, 1, 1, False, (-1, -1))
    assert len(host["items"]) > 256 and host["merges"]
    assert_same_plan(dev, host, plan._layout)


def test_device_plan_keeps_to_its_buffer_when_lengths_break_the_promise():
    """Device lengths cannot be checked: a non-monotone cu_seqlens_q gives more tiles than total_q promises; the
    kernel keeps the first caps.tiles tiles (sequence order) and writes nothing past its buffer."""
    cq = torch.tensor([0, 600, 0, 600, 0, 600], dtype=i32)     # clamped lengths 600, 0, 600, 0, 600
    ck = cu([300] * 5)
    plan = att.VarlenPlan().plan(as_emu_device(cq), as_emu_device(ck), 600, 300, 600, 1500, heads=1, kv_heads=1)
    dev = serving.read_device_plan(plan._buf, plan._layout)
    assert plan._layout["tiles"] == 7 and dev["n_tiles"] == 7            # 3 + 3 + 3 tiles wanted, 7 kept
    assert len(dev["items"]) <= plan._layout["items"]
    assert plan._buf.numel() == plan._layout["bytes"]


def check_outputs(lens_q, lens_k, heads, kv_heads, causal, window=(-1, -1), dims=(128, 128), pad_q=3, pad_k=2,
                  seed=0, sinks=None):
    """Device-planned run == host-planned run == forward_varlen, bit for bit (out and LSE); returns the host plan."""
    cq, ck = cu(lens_q), cu(lens_k)
    total_q, total_k = int(cq[-1]) + pad_q, int(ck[-1]) + pad_k
    max_q, max_k = max(lens_q), max(lens_k)
    kw = dict(heads=heads, kv_heads=kv_heads, causal=causal, window_size=window)
    dev_plan = att.VarlenPlan().plan(as_emu_device(cq.clone()), as_emu_device(ck.clone()), max_q, max_k, total_q,
                                     total_k, **kw)
    host = att.VarlenPlan().plan(cq, ck, max_q, max_k, total_q, total_k, **kw)
    assert dev_plan.on_device and not host.on_device
    q = rnd(total_q, heads, dims[0], seed=seed)
    k = rnd(total_k, kv_heads, dims[0], seed=seed + 1)
    v = rnd(total_k, kv_heads, dims[1], seed=seed + 2)
    o_d, l_d = dev_plan.run(q, k, v, return_lse=True, sinks=sinks)
    o_h, l_h = host.run(q, k, v, return_lse=True, sinks=sinks)
    o_r, l_r = att.forward_varlen(q, k, v, cq, ck, max_q, max_k, causal=causal, window_size=window, return_lse=True,
                                  sinks=sinks)
    n = int(cq[-1])
    bits = lambda t: t[:n].view(torch.int16)   # noqa: E731 - rows past the last sequence are not written
    assert torch.equal(bits(o_d), bits(o_r)) and torch.equal(bits(o_h), bits(o_r))
    assert torch.equal(l_d[:, :n], l_r[:, :n]) and torch.equal(l_h[:, :n], l_r[:, :n])
    return host_plan(lens_q, lens_k, heads, kv_heads, causal, att.attention._window(window, causal))


@pytest.mark.parametrize("causal,dims", [(False, (128, 128)), (True, (192, 128))])
def test_split_outputs_bitwise_equal_on_the_default_machine(causal, dims):
    """256 CUs, 2 heads, one short query against 1024 keys: the host splits KV (merge kernel); the device plan does the
    same, so the outputs are identical, not just within tolerance."""
    plan = check_outputs([40, 0, 7], [1024, 5, 300], 2, 1, causal, dims=dims)
    assert plan["merges"] and max(m["n_parts"] for m in plan["merges"]) >= 2


def test_split_outputs_bitwise_equal_with_forced_splits_and_window():
    with kernel.planner_options(num_cus=4096, min_part_blocks=1, max_parts=5):
        plan = check_outputs([300, 20, 0, 65], [190, 400, 3, 77], 4, 2, True, seed=5)
        assert len(plan["merges"]) >= 3
        plan = check_outputs([33, 70], [500, 260], 2, 2, False, window=(100, 40), seed=9,
                             sinks=torch.tensor([1.5, -0.5]))     # the first part of a split carries the sink
        assert plan["merges"]


def test_device_replan_with_new_lengths_changes_the_split():
    """New lengths written into the same device tensors, re-planned on the device in the plan's same buffer (as a
    graph replay of the planning kernel would): first a split plan, then one that does not split, then a split
    again; each run gives the new lengths' forward_varlen result bit for bit."""
    hq = hk = 2
    total_q, total_k, max_q, max_k = 300, 1200, 260, 1100
    cq_dev, ck_dev = torch.zeros(4, dtype=i32), torch.zeros(4, dtype=i32)
    q, k, v = rnd(total_q, hq, 128, seed=1), rnd(total_k, hk, 128, seed=2), rnd(total_k, hk, 128, seed=3)
    plan = att.VarlenPlan()
    bufs, splits = set(), []
    for lens_q, lens_k in (([3, 30, 7], [1100, 10, 22]), ([260, 0, 20], [5, 64, 27]), ([1, 1, 1], [700, 1, 400])):
        cq_dev.copy_(cu(lens_q))
        ck_dev.copy_(cu(lens_k))
        plan.plan(as_emu_device(cq_dev), as_emu_device(ck_dev), max_q, max_k, total_q, total_k, heads=hq,
                  kv_heads=hk, causal=False)
        bufs.add(plan._buf.data_ptr())
        assert_same_plan(serving.read_device_plan(plan._buf, plan._layout, padding=True),
                         host_plan(lens_q, lens_k, hq, hk, False, (-1, -1)), plan._layout)
        splits.append(bool(serving.read_device_plan(plan._buf, plan._layout)["merges"]))
        o, lse = plan.run(q, k, v, return_lse=True)
        ref, ref_lse = att.forward_varlen(q, k, v, cu(lens_q), cu(lens_k), max_q, max_k, return_lse=True)
        n = sum(lens_q)
        assert torch.equal(o[:n].view(torch.int16), ref[:n].view(torch.int16))
        assert torch.equal(lse[:, :n], ref_lse[:, :n])
    assert len(bufs) == 1 and splits == [True, False, True]


def test_host_planned_runs_reuse_the_plan(monkeypatch):
    """A host-planned VarlenPlan plans once (plan()); each run() writes only its header: no host planning and no
    forward_varlen per run (no per-layer re-check of the lengths), one device copy of the plan per distinct set of
    strides, and the bits of forward_varlen (a split plan)."""
    lens_q, lens_k = [40, 7], [1024, 300]
    cq, ck = cu(lens_q), cu(lens_k)
    plan = att.VarlenPlan().plan(cq, ck, 40, 1024, 47, 1324, heads=2, kv_heads=1)
    assert not plan.on_device
    refs = []
    for layer in range(3):
        q, k, v = rnd(47, 2, 128, seed=3 * layer), rnd(1324, 1, 128, seed=3 * layer + 1), rnd(1324, 1, 128, seed=9)
        refs.append(((q, k, v), att.forward_varlen(q, k, v, cq, ck, 40, 1024, return_lse=True)))

    def no(*a, **kw):
        raise AssertionError("planned again at run()")

    monkeypatch.setattr(att.attention, "forward_varlen", no)
    monkeypatch.setattr(kernel, "run_forward_varlen", no)
    monkeypatch.setattr(serving, "host_plan_work", no)
    for (q, k, v), (o_r, l_r) in refs:
        o, lse = plan.run(q, k, v, return_lse=True)
        assert torch.equal(o.view(torch.int16), o_r.view(torch.int16)) and torch.equal(lse, l_r)
    assert len(plan._staging) == 1          # the same strides in every layer: one device copy of the plan
    assert plan._work["counts"][1] >= 1      # the plan splits (merge items)
