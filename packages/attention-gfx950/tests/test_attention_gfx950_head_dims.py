"""Head dims 64, 80, 96 and 256 of the gfx950 attention forward (issue 17) on the emulator: float64 through forward
(dense, causal, GQA, split KV), forward_varlen (== batch bit for bit), forward_paged (== varlen bit for bit) and
VarlenPlan (device-planned == host-planned), with the features on top; the pads of Dqk 80 (NaN in the memory
past dim 80 must not leak in); 256's two column passes (each half of out from its own launch, the LSE of both the
same); bad head dims."""
from __future__ import annotations

import math

import pytest
import torch
from _attn_testing import TOL, check, check_paged_equals_varlen, cu, paged_case, ref64, rnd, varlen_ref

import moonmath_attention_gfx950 as att
from moonmath_attention_gfx950 import as_emu_device, kernel
from moonmath_common import use_backend

bf = torch.bfloat16
NEW_DIMS = (64, 80, 96, 256)

needs_kernels = pytest.mark.skipif(kernel.ARCH not in kernel.KERNELS.archs_built(),
                                   reason="this build has no gfx950 code objects")


def _bhsd_check(o, lse, q, k, v, causal, scale=None, **features):
    sc = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    errs = []
    for b in range(q.shape[0]):
        errs.append(check(o[b], lse[b], *ref64(q[b], k[b], v[b], causal, sc, **features)))
    return max(errs)


# (B, Hq, Hkv, Sq, Skv, causal): dense, causal with Sq > Skv (rows that see nothing), GQA 4:1 / MQA, lengths off
# the 64-key and 128/256-row grids.
SHAPES = [
    (1, 2, 2, 129, 200, False),
    (2, 4, 1, 300, 130, True),
    (1, 4, 2, 17, 600, False),
]


@needs_kernels
@pytest.mark.parametrize("D", NEW_DIMS)
@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,causal", SHAPES)
def test_forward_matches_float64(emu_gfx950, D, B, Hq, Hkv, Sq, Skv, causal):
    q, k, v = rnd(B, Hq, Sq, D, seed=D + 1), rnd(B, Hkv, Skv, D, seed=D + 2), rnd(B, Hkv, Skv, D, seed=D + 3)
    o, lse = att.forward(q, k, v, causal=causal, return_lse=True)
    assert o.shape == (B, Hq, Sq, D)
    _bhsd_check(o, lse, q, k, v, causal)


@needs_kernels
@pytest.mark.parametrize("D", NEW_DIMS)
def test_split_kv_and_bshd(emu_gfx950, D):
    """Forced split KV (parts + the merge kernel of this Dv) within tolerance; BSHD == BHSD bit for bit."""
    q, k, v = rnd(1, 2, 140, D, seed=5), rnd(1, 1, 700, D, seed=6), rnd(1, 1, 700, D, seed=7)
    with kernel.planner_options(num_cus=4096, min_part_blocks=1):
        assert kernel.plan_batch(1, 140, 700, 2, 1, True)["n_merge"] > 0
        o, lse = att.forward(q, k, v, causal=True, return_lse=True)
    _bhsd_check(o, lse, q, k, v, True)
    with kernel.planner_options(num_cus=1):
        o1 = att.forward(q, k, v, causal=True)
        o2 = att.forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True, layout="bshd")
    assert torch.equal(o2.transpose(1, 2).view(torch.int16), o1.view(torch.int16))


@needs_kernels
@pytest.mark.parametrize("D", NEW_DIMS)
def test_varlen_equals_batch_and_float64(emu_gfx950, D):
    """Packed THD: each sequence == its own batch run bit for bit, and float64 per sequence."""
    lens_q, lens_k = [3, 0, 140, 33], [20, 5, 300, 33]
    hq, hk = 4, 2
    cq, ck = cu(lens_q), cu(lens_k)
    q, k, v = rnd(int(cq[-1]), hq, D, seed=11), rnd(int(ck[-1]), hk, D, seed=12), rnd(int(ck[-1]), hk, D, seed=13)
    o, lse = att.forward_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=True, return_lse=True)
    ro, rl = varlen_ref(q, k, v, lens_q, lens_k, True, 1 / math.sqrt(D), 0.0)
    check(o.transpose(0, 1), lse, ro.transpose(0, 1), rl)
    for b in (2, 3):
        qs, ks = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
        ob = att.forward(q[qs][None], k[ks][None], v[ks][None], causal=True, layout="bshd")
        assert torch.equal(ob[0].view(torch.int16), o[qs].view(torch.int16))


@needs_kernels
@pytest.mark.parametrize("D,page_size,causal", [(64, 8, True), (80, 16, False), (96, 8, False), (256, 8, True)])
def test_paged_equals_varlen(emu_gfx950, D, page_size, causal):
    """Shuffled pages of a NaN-filled cache, page lists and block tables: == forward_varlen bit for bit."""
    c = paged_case([9, 150], [77, 260], page_size, hq=4, hk=2, dqk=D, dv=D, seed=D + page_size)
    check_paged_equals_varlen(c, causal)


@needs_kernels
def test_dqk80_pads_read_nothing(emu_gfx950):
    """Dqk 80 is padded to 96 in LDS: q/k/v as views of [.., 96] rows whose dims 80..95 are NaN (and out past the
    rows) give the contiguous copies' bits; so do the paged kernels over such a cache."""
    wide = lambda t: torch.cat([t, torch.full(t.shape[:-1] + (16,), float("nan"), dtype=bf)], -1)  # noqa: E731
    q, k, v = rnd(1, 2, 70, 80, seed=21), rnd(1, 1, 150, 80, seed=22), rnd(1, 1, 150, 80, seed=23)
    o = att.forward(q, k, v, causal=True)
    ow = att.forward(wide(q)[..., :80], wide(k)[..., :80], wide(v)[..., :80], causal=True)
    assert not torch.isnan(o).any() and torch.equal(ow.view(torch.int16), o.view(torch.int16))
    c = paged_case([5, 60], [40, 100], 16, hq=2, hk=1, dqk=80, dv=80, seed=24)
    c["kc"], c["vc"] = wide(c["kc"])[..., :80], wide(c["vc"])[..., :80]
    check_paged_equals_varlen(c, causal=False)


@needs_kernels
def test_device_planned_equals_host_planned(emu_gfx950):
    """VarlenPlan on device cu_seqlens (the planning kernel) == the host-planned run bit for bit, for d64
    with sinks and window (gpt-oss), d96 with softcap and d256 (two column passes) with all three."""
    lens_q, lens_k = [130, 7, 260], [200, 40, 300]
    cq, ck = cu(lens_q), cu(lens_k)
    for D, feats, run_feats in ((64, dict(window_size=(32, -1)), dict(sinks=torch.tensor([0.5, -1.0, 2.0, 0.0]))),
                                (96, dict(softcap=30.0), {}),
                                (256, dict(softcap=30.0, window_size=(90, -1)),
                                 dict(sinks=torch.tensor([1.0, -0.5, 0.0, 2.5])))):
        q, k, v = rnd(int(cq[-1]), 4, D, seed=41), rnd(int(ck[-1]), 2, D, seed=42), rnd(int(ck[-1]), 2, D, seed=43)
        kw = dict(heads=4, kv_heads=2, causal=True, **feats)
        with kernel.planner_options(num_cus=1):
            host = att.VarlenPlan().plan(cq, ck, max(lens_q), max(lens_k), q.shape[0], k.shape[0], **kw)
            o1, l1 = host.run(q, k, v, return_lse=True, **run_feats)
        dev = att.VarlenPlan().plan(as_emu_device(cq.clone()), as_emu_device(ck.clone()), max(lens_q), max(lens_k),
                                    q.shape[0], k.shape[0], **kw)
        assert dev.on_device and not host.on_device
        o2, l2 = dev.run(q, k, v, return_lse=True, **run_feats)
        assert torch.equal(o2.view(torch.int16), o1.view(torch.int16)) and torch.equal(l2, l1)
        ro, rl = varlen_ref(q, k, v, lens_q, lens_k, True, 1 / math.sqrt(D), feats.get("softcap", 0.0),
                            feats.get("window_size", (-1, -1)), run_feats.get("sinks"))
        check(o1.transpose(0, 1), l1, ro.transpose(0, 1), rl)


@needs_kernels
@pytest.mark.parametrize("D,causal,feats", [
    (64, True, dict(window_size=(100, -1), sinks=True)),                # gpt-oss sliding layers
    (64, False, dict(softcap=50.0, window_size=(90, -1))),
    (96, False, dict(window_size=(40, 30), softcap=5.0, sinks=True)),   # everything at once, two-sided window
    (80, True, dict(sinks=True)),
    (256, True, dict(window_size=(70, -1), softcap=30.0, sinks=True)),  # Gemma-2/3-like: softcap, local window
])
def test_features_on_new_dims(emu_gfx950, D, causal, feats):
    """softcap / window / sinks on the new head dims, dense (split and unsplit) and paged, against float64."""
    hq, hk, Sq, Skv = 4, 2, 200, 330
    q, k, v = rnd(1, hq, Sq, D, seed=51, scale=2), rnd(1, hk, Skv, D, seed=52, scale=2), rnd(1, hk, Skv, D, seed=53)
    kw = dict(feats)
    if kw.pop("sinks", False):
        kw["sinks"] = torch.linspace(-1.0, 3.0, hq)
    ref = dict(softcap=kw.get("softcap", 0.0), window=kw.get("window_size", (-1, -1)), sinks=kw.get("sinks"))
    for opts in (dict(num_cus=1), dict(num_cus=4096, min_part_blocks=1)):
        with kernel.planner_options(**opts):
            o, lse = att.forward(q, k, v, causal=causal, return_lse=True, **kw)
        _bhsd_check(o, lse, q, k, v, causal, **ref)
    c = paged_case([Sq, 37], [Skv, 90], 16, hq=hq, hk=hk, dqk=D, dv=D, seed=54)
    op, lp = att.forward_paged(c["q"], c["kc"], c["vc"], c["cu_q"], c["lens"], block_table=c["table"], causal=causal,
                               return_lse=True, **kw)
    ro, rl = varlen_ref(c["q"], c["k"], c["v"], [Sq, 37], [Skv, 90], causal, 1 / math.sqrt(D), **ref)
    check(op.transpose(0, 1), lp, ro.transpose(0, 1), rl)


@pytest.mark.parametrize("dqk,dv", [(32, 32), (160, 160), (64, 128), (256, 128), (128, 256), (128, 64), (192, 192),
                                    (512, 512)])
def test_bad_head_dims_name_them(dqk, dv):
    """Every entry point rejects a head-dim pair outside HEAD_DIMS with a ValueError naming the head dims (before
    any backend is chosen: the reference backend too)."""
    assert (dqk, dv) not in att.HEAD_DIMS
    q, k, v = rnd(3, 2, dqk, seed=0), rnd(5, 1, dqk, seed=0), rnd(5, 1, dv, seed=0)
    cq, ck = cu([3]), cu([5])
    kc, vc = torch.zeros(1, 16, 1, dqk, dtype=bf), torch.zeros(1, 16, 1, dv, dtype=bf)
    calls = [
        lambda: att.forward(q[None], k[None], v[None], layout="bshd"),
        lambda: att.forward_varlen(q, k, v, cq, ck, 3, 5),
        lambda: att.forward_paged(q, kc, vc, cq, torch.tensor([5], dtype=torch.int32),
                                  block_table=torch.zeros(1, 1, dtype=torch.int32)),
        lambda: att.VarlenPlan().plan(cq, ck, 3, 5, 3, 5, heads=2, kv_heads=1).run(q, k, v),
    ]
    for call in calls:
        with use_backend("reference"), pytest.raises(ValueError, match=r"head dims \(q/k(_cache)?, v(_cache)?\) must "
                                                                         r"be one of .*; got \(" + f"{dqk}, {dv}"):
            call()


def test_reference_new_dims_match_float64():
    """The reference backend (the executable specification) on the new head dims, with every feature."""
    for D in NEW_DIMS:
        q, k, v = rnd(1, 2, 40, D, seed=D), rnd(1, 1, 70, D, seed=D + 1), rnd(1, 1, 70, D, seed=D + 2)
        s = torch.tensor([0.3, -2.0])
        with use_backend("reference"):
            o, lse = att.forward(q, k, v, causal=True, softcap=10.0, window_size=(20, -1), sinks=s, return_lse=True)
        err = check(o[0], lse[0], *ref64(q[0], k[0], v[0], True, 1 / math.sqrt(D), 10.0, (20, -1), s))
        assert err <= TOL


@needs_kernels
def test_d256_column_passes(emu_gfx950):
    """Head dims 256: two launches of the (256, 128) kernel, one per half of out's columns (and the merge per pass
    when split), == float64; out's two halves come from different launches (a pass writing the wrong half, or both
    the same, fails the float64 check)."""
    from moonmath_common import kernels as mk
    q, k, v = rnd(1, 2, 70, 256, seed=61), rnd(1, 1, 150, 256, seed=62), rnd(1, 1, 150, 256, seed=63)
    seen = []
    real = mk.KernelSet.launch

    def spy(self, op, arch, co, name, *a, **kw):
        seen.append((co, name))
        return real(self, op, arch, co, name, *a, **kw)

    with pytest.MonkeyPatch.context() as mp, kernel.planner_options(num_cus=4096, min_part_blocks=1):
        mp.setattr(mk.KernelSet, "launch", spy)
        o, lse = att.forward(q, k, v, causal=True, return_lse=True)
    assert seen == [("attention_fwd_d256", "attn_fwd_d256_128"), ("attention_merge", "attn_fwd_merge")] * 2
    _bhsd_check(o, lse, q, k, v, True)


@needs_kernels
@pytest.mark.parametrize("D", (64, 80, 96, 128, 256))
def test_lds_reads_free_of_bank_conflicts(emu_gfx950, monkeypatch, D):
    """The timing model charges every LDS access of a work item its ideal cycles (64 banks, real lane addresses):
    the K/V row permutations are conflict-free for every head dim (d96's unpermuted K rows cost 2.5x, d80's 1.45x)."""
    timing = pytest.importorskip("moonmath_emu.timing")
    import moonmath_emu

    seen = []
    monkeypatch.setattr(kernel.KERNELS, "_launch_emu", lambda path, name, grid, block, args, lds: seen.append(
        (path, name, grid, block, args, lds)) or {})
    q, k, v = rnd(1, 1, 64, D, seed=71), rnd(1, 1, 192, D, seed=72), rnd(1, 1, 192, D, seed=73)
    with kernel.planner_options(num_cus=1):
        att.forward(q, k, v)
    assert len(seen) == (2 if D == 256 else 1)
    for path, name, grid, block, args, lds in seen:
        rep = timing.simulate(moonmath_emu.Module(path.read_bytes()), name, grid, block, args, cus=[[(0, 0, 0)]],
                              dynamic_lds=lds)
        assert rep["mem"]["lds_ideal_cycles"] > 0
        assert rep["mem"]["lds_cycles"] == rep["mem"]["lds_ideal_cycles"], (name, rep["mem"])
