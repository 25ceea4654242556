"""Issue 17's causal mask and sliding window on the gfx942 feature kernels (mha_fwd_feat_*): flash-attn's
window_size=(left, right), -1 unbounded, end-aligned (row i's diagonal key is i + Skv - Sq), alone and with
sinks and soft-cap, vs float64 at the bounds of test_mha_kernel.py, every rounding mode, BHSD and BSHD, Sq != Skv,
rows with no key, forced tail splits over window ranges; the work proportional to the window (emulator counts);
bad arguments named; the metapackage's forward on gfx942.
"""
from __future__ import annotations

import pytest
import torch
from _mha_testing import bits, gfx942_metapackage, oracle_fp64, qkv, row_ulp
from test_mha_features import sinks_for
from test_mha_kernel import check_fp64

import moonmath_mha_gfx942 as mha
from moonmath_mha_gfx942 import _C, kernel

MODES = ("rtna", "rtne", "rtz")
# (causal, window_size, softcap, sinks): each feature alone and all combined
FEATURES = {
    "causal": (True, (-1, -1), 0.0, False),
    "window": (False, (100, 37), 0.0, False),
    "window_left": (False, (70, -1), 0.0, False),
    "causal+window+softcap+sinks": (True, (150, 5), 8.0, True),
}
# Sq < Skv (the diagonal ends at the last key), Sq > Skv (causal: the first Sq - Skv rows see no key)
SHAPES = [(1, 2, 300, 700), (2, 1, 385, 130)]


def run_case(shape, feature, mode, layout, seed):
    causal, window, cap, with_sinks = FEATURES[feature]
    B, H, Sq, Skv = shape
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=seed, scale=2.5)
    sk = sinks_for(q, k, layout, cap, seed) if with_sinks else None
    out = mha.forward(q, k, v, round_mode=mode, layout=layout, softcap=cap, sinks=sk, causal=causal,
                      window_size=window)
    eff = (window[0], 0 if causal else window[1])
    return q, k, v, sk, cap, eff, out


COMBINED = "causal+window+softcap+sinks"
# default selection: the combined features in every mode and shape, each single feature once per shape (a mode
# each); the rest of the cross product under -m slow
CASES = [pytest.param(f, sh, m, marks=() if f == COMBINED or MODES[(i + j) % 3] == m else pytest.mark.slow)
         for i, f in enumerate(FEATURES) for j, sh in enumerate(SHAPES) for m in MODES]


@pytest.mark.parametrize("feature,shape,mode", CASES, ids=lambda x: "x".join(map(str, x)) if isinstance(x, tuple)
                         else str(x))
def test_window_against_fp64(emu_backend, feature, shape, mode):
    layout = "bshd" if shape[2] % 2 else "bhsd"
    q, k, v, sk, cap, eff, out = run_case(shape, feature, mode, layout, sum(shape))
    ref = oracle_fp64(q, k, v, layout, cap, sk, eff)
    check_fp64(out, ref, mode)
    # the window changed the result (a kernel that ignored it would fail here)
    unmasked = oracle_fp64(q, k, v, layout, cap, sk)
    assert float(((unmasked - ref).abs() / row_ulp(ref)).max()) > 4 * 2.5


@pytest.mark.parametrize("mode", MODES)
def test_rows_with_no_key_are_zero(emu_backend, mode):
    """Sq = 600 over Skv = 64, causal: rows 0..535 see no key, so the first two 256-row items have no kv block
    at all (the kernel's empty path) and the third straddles; with a sink such rows are 0 too."""
    B, H, Sq, Skv = 1, 2, 600, 64
    q, k, v = qkv(B, H, Sq, Skv, seed=11, scale=2.5)
    for sk in (None, torch.tensor([0.5, -1.0])):
        out = mha.forward(q, k, v, round_mode=mode, causal=True, sinks=sk)
        assert torch.equal(bits(out[:, :, :Sq - Skv]), torch.zeros_like(bits(out[:, :, :Sq - Skv])))
        check_fp64(out, oracle_fp64(q, k, v, "bhsd", 0.0, sk, (-1, 0)), mode)


def test_window_equal_to_everything_is_the_unwindowed_result(emu_backend):
    """A window covering every key runs the feature kernel's mask and range code yet must give the result
    without a window, to the bit (masked scores are exp2(-inf) = 0 exactly; the block range is all blocks)."""
    B, H, Sq, Skv = 1, 2, 200, 333
    q, k, v = qkv(B, H, Sq, Skv, seed=12, scale=2.5)
    sk = torch.tensor([1.0, 2.0])
    whole = mha.forward(q, k, v, round_mode="rtne", sinks=sk, window_size=(Skv, Sq))
    assert torch.equal(bits(whole), bits(mha.forward(q, k, v, round_mode="rtne", sinks=sk)))


@pytest.mark.parametrize("mode,layout,window,causal", [
    ("rtna", "bhsd", (600, -1), True), ("rtne", "bshd", (700, 100), False), ("rtz", "bhsd", (-1, 64), False)])
def test_window_tail_split(emu_backend, mode, layout, window, causal):
    """Forced tail splits planned over the items' window ranges: no part without a block, fp64 bounds, within a
    row ulp of the unsplit result, deterministic."""
    B, H, Sq, Skv, cus = 1, 3, 385, 1000, 4
    eff = (window[0], 0 if causal else window[1])
    shifts = kernel.window_shifts(eff, Sq, Skv)
    p = kernel.plan(Sq, Skv, B * H, cus, enabled=True, min_kv_blocks=4, shifts=shifts)
    assert p.tail > 0 and p.parts > 1, p
    sched = _C.split_schedule(p, -(-Sq // 256))
    for s in range(p.slots):   # every part has at least one kv block of its item's range
        qb, part, g = sched[4 * s], sched[4 * s + 2], sched[4 * s + 3]
        assert _C.item_kv_blocks(qb, Sq, Skv, *shifts) > part, (qb, part, g)
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=13, scale=2.5)
    out, again = torch.empty_like(q), torch.empty_like(q)
    launches = kernel.run(q, k, v, out, layout, mode, cus=cus, min_kv_blocks=4, window=eff)
    assert len(launches) == 4 and launches[2]["workgroups"] == p.slots
    check_fp64(out, oracle_fp64(q, k, v, layout, window=eff), mode)
    kernel.run(q, k, v, again, layout, mode, cus=cus, min_kv_blocks=4, window=eff)
    assert torch.equal(bits(again), bits(out))
    unsplit = mha.forward(q, k, v, layout=layout, round_mode=mode, causal=causal, window_size=window)
    assert float(((out.double() - unsplit.double()).abs() / row_ulp(unsplit)).max()) <= 1.0


def _list_schedule(costs, cus):
    free = [0] * min(cus, len(costs))
    for c in costs:
        free[free.index(min(free))] += c
    return max(free, default=0)


def _window_spans(sq, skv, bh, cus, lo, hi):
    """The windowed planner's cost, recomputed: (unsplit makespan, {G: split makespan}) in kv blocks, each
    workgroup ITEM_OVERHEAD_BLOCKS more; dense items heaviest first, the tail's parts in slot order, then the merge."""
    nqb, k = -(-sq // 256), _C.ITEM_OVERHEAD_BLOCKS
    blocks = [_C.item_kv_blocks(w % nqb, sq, skv, lo, hi) for w in range(nqb * bh)]
    n, tail = len(blocks), len(blocks) % cus
    unsplit = _list_schedule(sorted((b + k for b in blocks), reverse=True), cus)
    dense = _list_schedule(sorted((b + k for b in blocks[:n - tail]), reverse=True), cus)
    tb = blocks[n - tail:]
    g_max = min(_C.MAX_SPLIT_ROUNDS * cus // tail, max(tb) // 4, min(tb))
    spans = {g: dense + _list_schedule([-(-(b - p) // g) + k for b in tb for p in range(g)], cus)
             + _C.MERGE_OVERHEAD_BLOCKS for g in range(2, g_max + 1)}
    return unsplit, spans


def test_planner_over_window_ranges():
    big = _C.UNBOUNDED
    # no window: the plan is the unwindowed one
    a, b = _C.plan_tail(8192, 8192, 24, 304), _C.plan_tail(8192, 8192, 24, 304, lo_shift=-big, hi_shift=big)
    assert (a.tail, a.parts, a.span) == (b.tail, b.parts, b.span)
    # causal, Sq = Skv = 8192: q block 0 runs 4 kv blocks, the last 128; the tail holds every q block
    assert _C.item_kv_blocks(0, 8192, 8192, -big, 0) == 4 and _C.item_kv_blocks(31, 8192, 8192, -big, 0) == 128
    # the plans are compared by the launches' list-schedule makespans: heaviest first, the light items fill the
    # CUs the heavy ones leave, so a split's extra launch loses (B1 H32 S8192: the split the old tail-round cost
    # chose, 112 x 2, is modeled 1.19x the unsplit launch in benchmarks/causal_order_timing.py)
    for bh in (24, 32):
        c = _C.plan_tail(8192, 8192, bh, 304, lo_shift=-big, hi_shift=0)
        assert c.tail == 0 and c.span == c.span_unsplit == _window_spans(8192, 8192, bh, 304, -big, 0)[0], c
    w = _C.plan_tail(8192, 8192, 24, 304, min_kv_blocks=4, lo_shift=-1024, hi_shift=0)
    assert w.tail == 0 and w.span_unsplit == _window_spans(8192, 8192, 24, 304, -1024, 0)[0]
    # long items on few CUs: the split wins, and the planner takes the G of the smallest makespan
    for sq, skv, bh, cus, lo, hi in ((385, 1000, 3, 4, -big, 615), (385, 1000, 3, 4, -85, 715),
                                     (385, 1000, 3, 5, -big, 679), (4096, 4096, 1, 6, -big, 0)):
        p = _C.plan_tail(sq, skv, bh, cus, min_kv_blocks=4, lo_shift=lo, hi_shift=hi)
        unsplit, spans = _window_spans(sq, skv, bh, cus, lo, hi)
        g = min(spans, key=lambda g: (spans[g], g))
        assert p.span_unsplit == unsplit and spans[g] < unsplit and (p.parts, p.span) == (g, spans[g]), (p, spans)
        assert p.tail == p.n_work % cus
    # an item with no block in the tail: no split
    assert _C.item_kv_blocks(0, 600, 1000, -big, -600) == 0
    assert _C.plan_tail(600, 1000, 3, 4, min_kv_blocks=1, lo_shift=-big, hi_shift=-600).tail == 0
    with pytest.raises(ValueError, match="lo_shift"):
        _C.plan_tail(1, 1, 1, 1, lo_shift=-(big + 1))


def attention_instructions(Skv, window, sq=256):
    q, k, v = qkv(1, 1, sq, Skv, seed=14)
    out = torch.empty_like(q)
    launches = kernel.run(q, k, v, out, "bhsd", "rtne", tail=False, window=window)
    return launches[1]["wave_instructions"]


def test_work_is_proportional_to_the_window(emu_backend):
    """Causal with a 512-key window over Skv = 2048 and 8192 (Sq = 256: one item, its rows' windows span the
    last 768 keys, 12 blocks): the attention launch's instruction count is the same but for the data-dependent
    max gate (< 1 %); a 1024-key window (20 blocks) costs about 20 / 12 as much. A kernel running every kv
    block (no clip) would cost ~4x more at 8192 than at 2048."""
    short, long_ = attention_instructions(2048, (512, 0)), attention_instructions(8192, (512, 0))
    assert abs(long_ - short) < 0.01 * short, (short, long_)
    wider = attention_instructions(8192, (1024, 0))
    assert 1.4 * long_ < wider < 1.8 * long_, (long_, wider)


def test_dense_items_start_heaviest_first_and_change_no_bit(emu_backend, monkeypatch):
    """The feature dense launch takes its items from _C.dense_order: a permutation of the dense items, the most
    kv blocks first across all heads (each head's causal last q block starts in the first round, not last);
    without a window it is the default kernels' xcd swizzle. The order changes no bit: the swizzle's order
    gives the same output."""
    B, H, S = 1, 3, 1024  # 4 q blocks per head: 4, 8, 12 and 16 causal kv blocks
    q, k, v = qkv(B, H, S, S, seed=21)
    orders, launch = [], kernel.KERNELS.launch

    def record(op, arch, code_object, name, **kw):
        if name.startswith("mha_fwd_feat_"):
            orders.append(kw["args"][-1].cpu().tolist())
        return launch(op, arch, code_object, name, **kw)

    monkeypatch.setattr(kernel.KERNELS, "launch", record)
    heaviest = torch.empty_like(q)
    kernel.run(q, k, v, heaviest, "bhsd", "rtne", tail=False, window=(-1, 0))
    shifts = kernel.window_shifts((-1, 0), S, S)
    blocks = [_C.item_kv_blocks(w % 4, S, S, *shifts) for w in orders[0]]
    assert sorted(orders[0]) == list(range(12)) and blocks == [16] * 3 + [12] * 3 + [8] * 3 + [4] * 3
    swizzle = _C.dense_order(_C.plan_tail(S, S, 3, 304, False), 4, S, S)  # no window: every item 16 blocks
    assert swizzle == [0, 2, 4, 6, 8, 9, 10, 11, 1, 3, 5, 7]  # mha_config.hpp's xcd_contiguous over 12 items
    monkeypatch.setattr(kernel, "dense_order", lambda p, nqb, sq, skv, shifts=None: _C.dense_order(p, nqb, sq, skv))
    head_first = torch.empty_like(q)
    kernel.run(q, k, v, head_first, "bhsd", "rtne", tail=False, window=(-1, 0))
    assert orders[1] == swizzle
    assert torch.equal(bits(heaviest), bits(head_first))


@pytest.mark.parametrize("window,err,match", [
    ((-2, 0), ValueError, r"window_size\[0\]"), ((0, -5), ValueError, r"window_size\[1\]"),
    ((1.5, 0), TypeError, r"window_size\[0\]"), ((0, "x"), TypeError, r"window_size\[1\]"),
    ((1, 2, 3), ValueError, "window_size"), (7, ValueError, "window_size"), ((2**31, 0), ValueError, "window_size")])
def test_bad_window_is_named(window, err, match):
    q, k, v = qkv(1, 2, 8, 8, seed=9)
    with pytest.raises(err, match=match):
        mha.forward(q, k, v, window_size=window)


def test_bad_causal_is_named():
    q, k, v = qkv(1, 2, 8, 8, seed=9)
    with pytest.raises(TypeError, match="causal"):
        mha.forward(q, k, v, causal=1)


def test_reference_backend_window():
    from moonmath_common import use_backend

    B, H, Sq, Skv = 2, 3, 70, 40
    q, k, v = qkv(B, H, Sq, Skv, layout="bshd", seed=15, scale=2.5)
    with use_backend("reference"):
        out = mha.forward(q, k, v, layout="bshd", round_mode="rtne", causal=True, window_size=(9, 3))
    check_fp64(out, oracle_fp64(q, k, v, "bshd", window=(9, 0)), "rtne")


def test_metapackage_forward_window_on_gfx942(emu_backend):
    ma = gfx942_metapackage()
    B, H, Sq, Skv = 1, 2, 63, 130
    q, k, v = qkv(B, H, Sq, Skv, layout="bshd", seed=16, scale=2.5)
    out = ma.forward(q, k, v, layout="bshd", causal=True, window_size=(40, -1), softcap=8.0)
    assert torch.equal(bits(out), bits(mha.forward(q, k, v, layout="bshd", causal=True, window_size=(40, -1),
                                                   softcap=8.0)))
    check_fp64(out, oracle_fp64(q, k, v, "bshd", 8.0, None, (40, 0)), "rtna")
    with pytest.raises(ValueError, match=r"window_size\[0\]"):
        ma.forward(q, k, v, layout="bshd", window_size=(-3, 0))
