"""Issue 17 features of the gfx950 attention forward (softcap, window_size, sinks): the reference backend against an
independent float64 formulation, the kernels on the emulator against float64 through every entry point (forward,
forward_varlen, forward_paged, VarlenPlan host- and device-planned), bad input, and the compile-time flag
(the plain kernels carry no trace of a feature)."""
from __future__ import annotations

import math

import pytest
import torch
from _attn_testing import TOL, check, cu, ref64, rnd, scatter_pages, varlen_ref

import moonmath_attention_gfx950 as att
from moonmath_attention_gfx950 import as_emu_device, kernel
from moonmath_common import use_backend

bf = torch.bfloat16


def _built() -> bool:
    return kernel.ARCH in kernel.KERNELS.archs_built()


needs_kernels = pytest.mark.skipif(not _built(), reason="this build has no gfx950 code objects")


@pytest.fixture
def emu(monkeypatch):
    pytest.importorskip("moonmath_emu")
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    with use_backend("emu"):
        yield


# ---- softcap --------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal,softcap,scale", [(False, 5.0, None), (True, 30.0, None), (True, 2.0, -0.3)])
def test_reference_softcap_matches_float64(causal, softcap, scale):
    """The reference backend's definition (cap * tanh(scale s / cap) before mask and softmax) vs float64."""
    q, k, v = rnd(2, 4, 70, 128, seed=1, scale=3), rnd(2, 2, 90, 128, seed=2, scale=3), rnd(2, 2, 90, 128, seed=3)
    with use_backend("reference"):
        o, lse = att.forward(q, k, v, causal=causal, softcap=softcap, softmax_scale=scale, return_lse=True)
    sc = scale if scale is not None else 1 / math.sqrt(128)
    for b in range(2):
        check(o[b], lse[b], *ref64(q[b], k[b], v[b], causal, sc, softcap))
    # the cap matters on these scores: without it the result is far from the capped one
    ro, _ = ref64(q[0], k[0], v[0], causal, sc, 0.0)
    assert float((o[0].double() - ro).abs().max() / ro.abs().max()) > 10 * TOL


@needs_kernels
@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,D,causal,softcap", [
    (1, 4, 1, 129, 600, 128, False, 5.0),   # GQA 4:1, Skv off the 64-grid
    (1, 2, 2, 300, 127, 128, True, 20.0),   # Sq > Skv causal: early rows see nothing
    (1, 2, 1, 130, 200, 192, True, 3.0),    # MLA head dims
])
def test_softcap_kernel_matches_float64(emu, B, Hq, Hkv, Sq, Skv, D, causal, softcap):
    q, k, v = rnd(B, Hq, Sq, D, seed=4, scale=3), rnd(B, Hkv, Skv, D, seed=5, scale=3), rnd(B, Hkv, Skv, 128, seed=6)
    o, lse = att.forward(q, k, v, causal=causal, softcap=softcap, return_lse=True)
    for b in range(B):
        check(o[b], lse[b], *ref64(q[b], k[b], v[b], causal, 1 / math.sqrt(D), softcap))


@needs_kernels
def test_softcap_kernel_split_kv_and_negative_scale(emu):
    """Forced split-KV (parts + fp32 merge) with a negative scale (the negated-Q path) under the cap."""
    q, k, v = rnd(1, 1, 40, 128, seed=7, scale=3), rnd(1, 1, 520, 128, seed=8, scale=3), rnd(1, 1, 520, 128, seed=9)
    with kernel.planner_options(num_cus=64, min_part_blocks=2):
        assert kernel.plan_batch(1, 40, 520, 1, 1)["n_merge"] > 0
        o, lse = att.forward(q, k, v, softcap=4.0, softmax_scale=-0.2, return_lse=True)
    check(o[0], lse[0], *ref64(q[0], k[0], v[0], False, -0.2, 4.0))


@needs_kernels
def test_softcap_varlen_paged_and_plans(emu):
    """forward_varlen, forward_paged (GQA, causal, page 16) and VarlenPlan (host- and device-planned), with softcap,
    against float64; the paged and planned runs equal varlen bit for bit (the same pipeline)."""
    lens_q, lens_k = [5, 0, 70, 33], [20, 3, 90, 160]
    hq, hk, cap = 4, 2, 8.0
    cq, ck = cu(lens_q), cu(lens_k)
    q = rnd(int(cq[-1]), hq, 128, seed=10, scale=3)
    k = rnd(int(ck[-1]), hk, 128, seed=11, scale=3)
    v = rnd(int(ck[-1]), hk, 128, seed=12)
    o, lse = att.forward_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=True, softcap=cap, return_lse=True)
    ro, rl = varlen_ref(q, k, v, lens_q, lens_k, True, 1 / math.sqrt(128), cap)
    check(o.transpose(0, 1), lse, ro.transpose(0, 1), rl)

    kc, vc, _, _, table = scatter_pages(k, v, ck, lens_k, 16, perm_seed=13, spare_pages=3)
    op, lp = att.forward_paged(q, kc, vc, cq, torch.tensor(lens_k, dtype=torch.int32), block_table=table, causal=True,
                               softcap=cap, return_lse=True)
    assert torch.equal(op.view(torch.int16), o.view(torch.int16)) and torch.equal(lp, lse)

    kw = dict(heads=hq, kv_heads=hk, causal=True, softcap=cap)
    for plan in (att.VarlenPlan().plan(cq, ck, max(lens_q), max(lens_k), q.shape[0], k.shape[0], **kw),
                 att.VarlenPlan().plan(as_emu_device(cq.clone()), as_emu_device(ck.clone()), max(lens_q), max(lens_k),
                                       q.shape[0], k.shape[0], **kw)):
        o2, l2 = plan.run(q, k, v, return_lse=True)
        assert torch.equal(o2.view(torch.int16), o.view(torch.int16)) and torch.equal(l2, lse)


def test_softcap_off_values():
    """None and 0 mean off: the same result as no softcap (reference backend)."""
    q, k, v = rnd(1, 1, 9, 128, seed=14), rnd(1, 1, 11, 128, seed=15), rnd(1, 1, 11, 128, seed=16)
    with use_backend("reference"):
        base = att.forward(q, k, v)
        for off in (None, 0, 0.0):
            assert torch.equal(att.forward(q, k, v, softcap=off), base)


def _every_entry_point_rejects(arg: str, bad, exc, heads: int = 1) -> None:
    """forward, forward_varlen, forward_paged and VarlenPlan each raise `exc` naming `arg` for `arg=bad` (reference
    backend; sinks are an argument of VarlenPlan.run, the other features of plan)."""
    q, k, v = rnd(2, heads, 128, seed=0), rnd(2, 1, 128, seed=0), rnd(2, 1, 128, seed=0)
    c, kw, cache = cu([2]), {arg: bad}, torch.zeros(1, 8, 1, 128, dtype=bf)
    at_run = arg == "sinks"
    calls = [
        lambda: att.forward(q[None], k[None], v[None], layout="bshd", **kw),
        lambda: att.forward_varlen(q, k, v, c, c, 2, 2, **kw),
        lambda: att.forward_paged(q, cache, cache, c, torch.tensor([2], dtype=torch.int32),
                                  block_table=torch.zeros(1, 1, dtype=torch.int32), **kw),
        lambda: att.VarlenPlan().plan(c, c, 2, 2, 2, 2, heads=heads, kv_heads=1, **({} if at_run else kw)).run(
            q, k, v, **(kw if at_run else {})),
    ]
    for call in calls:
        with use_backend("reference"), pytest.raises(exc, match=arg):
            call()


@pytest.mark.parametrize("bad,exc", [(-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                     (1e39, ValueError), ("5", TypeError)])
def test_softcap_bad_input_names_it(bad, exc):
    _every_entry_point_rejects("softcap", bad, exc)


@needs_kernels
def test_plain_kernels_carry_no_softcap_stage():
    """The soft-cap is a compile-time flag: each *_softcap kernel has its plain twin's instructions plus the
    stage (an exp2 and a reciprocal per score: 32 more v_rcp_f32 per block per wave), the plain kernel none of it."""
    emu = pytest.importorskip("moonmath_emu")
    for co in (kernel.FWD_CODE_OBJECT, "attention_fwd_paged", "attention_fwd_dims", "attention_fwd_paged_dims",
               "attention_fwd_d256", "attention_fwd_paged_d256"):
        d = emu.disassemble(kernel.KERNELS.path("isa", kernel.ARCH, co).read_bytes())
        kernels = {x[0] for x in d}
        plain = sorted(n for n in kernels if not n.endswith(("_softcap", "_window", "_sinks")))
        assert plain and all(n + "_softcap" in kernels for n in plain)
        for n in plain:
            rcp = {m: sum(1 for x in d if x[0] == m and x[2].startswith("v_rcp_f32")) for m in (n, n + "_softcap")}
            scores = 32                                      # per lane and block: 2 key tiles x 16 registers
            assert rcp[n + "_softcap"] - rcp[n] >= scores, rcp


# ---- window_size ------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal,window,softcap", [(True, (100, -1), 0.0), (False, (50, 70), 0.0),
                                                   (False, (-1, 10), 5.0), (True, (0, -1), 0.0)])
def test_reference_window_matches_float64(causal, window, softcap):
    q, k, v = rnd(1, 4, 300, 128, seed=20), rnd(1, 2, 700, 128, seed=21), rnd(1, 2, 700, 128, seed=22)
    with use_backend("reference"):
        o, lse = att.forward(q, k, v, causal=causal, window_size=window, softcap=softcap, return_lse=True)
    ro, rl = ref64(q[0], k[0], v[0], causal, 1 / math.sqrt(128), softcap, window)
    check(o[0], lse[0], ro, rl)


@needs_kernels
@pytest.mark.parametrize("Sq,Skv,D,causal,window", [
    (300, 700, 128, True, (100, -1)),     # causal sliding window (Mistral / gpt-oss layers)
    (129, 600, 128, False, (50, 70)),     # two-sided
    (300, 127, 192, True, (20, -1)),      # Sq > Skv: early rows see nothing
    (200, 260, 128, False, (-1, 0)),      # right bound only (= causal by window)
])
def test_window_kernel_matches_float64(emu, Sq, Skv, D, causal, window):
    q, k, v = rnd(1, 4, Sq, D, seed=23), rnd(1, 2, Skv, D, seed=24), rnd(1, 2, Skv, 128, seed=25)
    o, lse = att.forward(q, k, v, causal=causal, window_size=window, return_lse=True)
    check(o[0], lse[0], *ref64(q[0], k[0], v[0], causal, 1 / math.sqrt(D), 0.0, window))


@needs_kernels
def test_window_skips_blocks_outside_it(emu):
    """Work proportional to the window on a long Skv: one 256-row causal tile against 4096 keys runs exactly the
    64-key blocks that meet its rows' windows (36 MFMAs of 32x32x16 per block per wave), and its instruction count grows
    linearly in them; the full run does all 64 blocks."""
    q, k = rnd(1, 1, 256, 128, seed=26), rnd(1, 1, 4096, 128, seed=27)
    runs = {}
    with kernel.planner_options(num_cus=1):                       # unsplit: one work item, one launch
        for left in (-1, 128, 512, 1024):
            att.forward(q, k, k, causal=True, window_size=(left, -1))
            c = kernel.KERNELS.last_counters
            blocks = 64 if left < 0 else -(-(256 + left) // 64)
            assert c["mfma"] == 36 * 8 * blocks, (left, c["mfma"])
            runs[left] = (blocks, c["wave_instructions"])
    (b0, i0), (b1, i1), (b2, i2), (b3, i3) = (runs[x] for x in (128, 512, 1024, -1))
    per = [(i1 - i0) / (b1 - b0), (i2 - i1) / (b2 - b1), (i3 - i2) / (b3 - b2)]   # instructions per block
    assert max(per) <= 1.2 * min(per), per
    assert i0 / i3 <= 2 * b0 / b3, (i0, i3)                                    # 6 of 64 blocks: <= 19% of the work


@needs_kernels
def test_window_combined_varlen_paged_plans(emu):
    """window + sinks + softcap + causal + GQA through forward_varlen (host plan, split), forward_paged (block table)
    and VarlenPlan (host- and device-planned: the device plan covers the causal range, the kernel clips it) vs
    float64, and bit-equal to each other where the plans are the same."""
    lens_q, lens_k = [5, 0, 300, 33], [20, 3, 400, 160]
    hq, hk, cap, win = 4, 2, 8.0, (64, -1)
    sinks = torch.tensor([0.5, -1.0, 6.0, 2.0])
    cq, ck = cu(lens_q), cu(lens_k)
    q = rnd(int(cq[-1]), hq, 128, seed=30, scale=2)
    k = rnd(int(ck[-1]), hk, 128, seed=31, scale=2)
    v = rnd(int(ck[-1]), hk, 128, seed=32)
    ro, rl = varlen_ref(q, k, v, lens_q, lens_k, True, 1 / math.sqrt(128), cap, win, sinks)
    kw = dict(causal=True, softcap=cap, window_size=win, return_lse=True, sinks=sinks)
    with kernel.planner_options(num_cus=1):
        o, lse = att.forward_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), **kw)
    check(o.transpose(0, 1), lse, ro.transpose(0, 1), rl)
    with kernel.planner_options(num_cus=64, min_part_blocks=1):     # split parts of the window's range + merge
        os_, ls = att.forward_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), **kw)
    check(os_.transpose(0, 1), ls, ro.transpose(0, 1), rl)

    kc, vc, _, _, table = scatter_pages(k, v, ck, lens_k, 16, perm_seed=33, spare_pages=3)
    with kernel.planner_options(num_cus=1):
        op, lp = att.forward_paged(q, kc, vc, cq, torch.tensor(lens_k, dtype=torch.int32), block_table=table, **kw)
    assert torch.equal(op.view(torch.int16), o.view(torch.int16)) and torch.equal(lp, lse)

    pkw = dict(heads=hq, kv_heads=hk, causal=True, softcap=cap, window_size=win)
    n = int(cq[-1])
    with kernel.planner_options(num_cus=1):
        for plan in (att.VarlenPlan().plan(cq, ck, max(lens_q), max(lens_k), q.shape[0], k.shape[0], **pkw),
                     att.VarlenPlan().plan(as_emu_device(cq.clone()), as_emu_device(ck.clone()), max(lens_q),
                                           max(lens_k), q.shape[0], k.shape[0], **pkw)):
            o2, l2 = plan.run(q, k, v, return_lse=True, sinks=sinks)
            assert torch.equal(o2[:n].view(torch.int16), o[:n].view(torch.int16)) and torch.equal(l2[:, :n], lse[:, :n])


def test_window_normalisation():
    """causal forces right = 0 (flash-attn); a window that bounds nothing beyond causal is the plain kernel's."""
    from moonmath_attention_gfx950.attention import _window
    assert _window((-1, -1), False) == (-1, -1) and _window((-1, 5), True) == (-1, -1)
    assert _window((7, 5), True) == (7, 0) and _window([3, -1], False) == (3, -1) and _window(None, False) == (-1, -1)
    assert kernel.fwd_kernel(kernel.FWD_KERNELS, (128, 128), 2.0, (7, 0)) == "attn_fwd_d128_softcap_window"
    assert kernel.fwd_kernel(kernel.FWD_KERNELS, (192, 128), 0.0, (-1, -1)) == "attn_fwd_d192_128"


@pytest.mark.parametrize("bad,exc", [((-2, 0), ValueError), ((1, -5), ValueError), ((1,), ValueError),
                                     (5, ValueError), ((1.5, 2), TypeError), ("ab", ValueError)])
def test_window_bad_input_names_it(bad, exc):
    _every_entry_point_rejects("window_size", bad, exc)


@needs_kernels
def test_plain_kernels_carry_no_window_stage():
    """The window is a compile-time flag: every plain kernel has *_window and *_softcap_window twins; only those
    clip the key loop (more instructions than the plain twin)."""
    emu = pytest.importorskip("moonmath_emu")
    for co in (kernel.FWD_CODE_OBJECT, "attention_fwd_paged", "attention_fwd_dims", "attention_fwd_paged_dims",
               "attention_fwd_d256", "attention_fwd_paged_d256"):
        d = emu.disassemble(kernel.KERNELS.path("isa", kernel.ARCH, co).read_bytes())
        count = {}
        for x in d:
            count[x[0]] = count.get(x[0], 0) + 1
        plain = [n for n in count if not n.endswith(("_softcap", "_window", "_sinks"))]
        for n in plain:
            assert count[n + "_window"] > count[n] and count[n + "_softcap_window"] > count[n + "_softcap"]
            for f in ("", "_softcap", "_window", "_softcap_window"):      # sinks: a flag of its own
                assert count[n + f + "_sinks"] > count[n + f]


# ---- sinks ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal,window", [(True, (-1, -1)), (False, (40, 30))])
def test_reference_sinks_match_float64(causal, window):
    q, k, v = rnd(1, 4, 300, 128, seed=40), rnd(1, 2, 127, 128, seed=41), rnd(1, 2, 127, 128, seed=42)
    sinks = torch.tensor([0.5, -1.0, 3.0, -float("inf")])      # -inf: no sink for that head
    with use_backend("reference"):
        o, lse = att.forward(q, k, v, causal=causal, window_size=window, sinks=sinks, return_lse=True)
    ro, rl = ref64(q[0], k[0], v[0], causal, 1 / math.sqrt(128), 0.0, window, sinks)
    check(o[0], lse[0], ro, rl)
    # rows that see no key: 0, lse = the sink (heads with a finite sink)
    if causal:
        assert torch.equal(lse[0, :3, 0], sinks[:3]) and not o[0, :3, 0].float().any()


@needs_kernels
@pytest.mark.parametrize("Sq,Skv,D,causal,split", [
    (300, 127, 128, True, False),     # Sq > Skv: early rows see only the sink
    (129, 600, 128, False, True),     # split-KV: the first part carries the sink, the merge combines
    (130, 200, 192, True, False),
])
def test_sinks_kernel_matches_float64(emu, Sq, Skv, D, causal, split):
    q, k, v = rnd(1, 4, Sq, D, seed=43), rnd(1, 2, Skv, D, seed=44), rnd(1, 2, Skv, 128, seed=45)
    sinks = torch.tensor([0.5, -1.0, 3.0, -float("inf")])
    with kernel.planner_options(num_cus=256 if split else 1):
        if split:
            assert kernel.plan_batch(1, Sq, Skv, 4, 2)["n_merge"] > 0
        o, lse = att.forward(q, k, v, causal=causal, sinks=sinks, return_lse=True)
    check(o[0], lse[0], *ref64(q[0], k[0], v[0], causal, 1 / math.sqrt(D), 0.0, (-1, -1), sinks))


@pytest.mark.parametrize("bad,exc", [(torch.zeros(3), ValueError), (torch.zeros(2, 2), ValueError),
                                     (torch.zeros(4, dtype=torch.bfloat16), TypeError), ([0.0] * 4, TypeError)])
def test_sinks_bad_input_names_it(bad, exc):
    _every_entry_point_rejects("sinks", bad, exc, heads=4)


def test_custom_ops_opcheck_with_features():
    """The torch custom ops take the features as trailing arguments with defaults (older positional callers still
    work) and pass torch.library.opcheck with them set (reference backend)."""
    i32 = torch.int32
    q, k, v = rnd(1, 4, 5, 128, seed=50), rnd(1, 2, 7, 128, seed=51), rnd(1, 2, 7, 128, seed=52)
    qt, kt, vt = rnd(5, 4, 128, seed=53), rnd(9, 2, 128, seed=54), rnd(9, 2, 128, seed=55)
    cq, ck = torch.tensor([0, 2, 5], dtype=i32), torch.tensor([0, 3, 9], dtype=i32)
    kc, vc = rnd(3, 8, 2, 128, seed=56), rnd(3, 8, 2, 128, seed=57)
    cases = {
        "attention_gfx950_forward": (q, k, v, torch.empty_like(q), torch.empty(1, 4, 5), "bhsd", True, 0.1),
        "attention_gfx950_forward_varlen": (qt, kt, vt, cq, ck, 3, 4, torch.empty_like(qt), torch.empty(4, 5), True,
                                            0.1, cq.clone(), None),
        "attention_gfx950_forward_paged": (qt, kc, vc, cq, torch.tensor([3, 9], dtype=i32),
                                           torch.tensor([0, 1, 3], dtype=i32), torch.tensor([2, 0, 1], dtype=i32), None,
                                           torch.empty_like(qt), None, False, 0.1),
    }
    with use_backend("reference"):
        for name, args in cases.items():
            op = getattr(torch.ops.moonmath, name)
            torch.library.opcheck(op, args)
            torch.library.opcheck(op, args + (2.0, 3, -1, torch.tensor([0.5, -1.0, 2.0, 0.0])))
