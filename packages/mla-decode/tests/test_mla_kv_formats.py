"""The MLA decode KV formats beyond a16w8 on their kernels (emu backend): the a16w8 test matrix (q_len x H,
ragged batches, KV splits, DCP ranks and their merge, empty windows, determinism, NaN, bad input) run over
every (format, arch) that has a kernel: a16w16 on gfx942 and gfx950, mxfp4 and a8w8 on gfx950.

Data at the seed's scale: pool rows N(0, 1) (the a16w8 tests' randn / kv_scale times kv_scale), bf16 for
a16w16, quantised by the test's own MXFP4 quantiser (_mla_formats.py) for mxfp4, and for a8w8 the a16w8 tests'
pool (randn / kv_scale in OCP e4m3fn, kv_scale 0.02); Q N(0, 1) bf16 (a8w8 quantises it itself), scale 0.088.
Tolerance the seed's: |o - ref| < 0.02, base-2 lse within 0.05 with the finite / -inf pattern exact, ref the
format's reference backend (fp32 over the exactly dequantised rows); test_float64_definition checks the
reference itself against a float64 loop.
"""
from __future__ import annotations

import math
import os

import pytest
import torch
from _mla_formats import LSE_TOL, O_TOL, a8w8_runs, check_close, dcp_views, quantize_mxfp4

import moonmath_mla_decode as mld
from moonmath_common import use_backend
from moonmath_mla_decode import formats, reference

SCALE = 0.088
# a8w8 against the exact math with bf16 Q: its Q and P are e4m3fn (relative step 2^-3, rounding error up to
# 2^-4 per element / per p), so o carries a few percent: relative Frobenius error measured 0.027-0.042 at
# these data (docs/numerics.md); the bound is 0.06. Against its own definition it is at bf16 level.
A8W8_REL_FRO = 0.06
LOG2E = 1.0 / math.log(2.0)
KV_SCALE = 0.02  # a8w8's pool scale
CASES = [("a16w16", "gfx942"), ("a16w16", "gfx950"), ("mxfp4", "gfx950"), ("a8w8", "gfx950")]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(autouse=True, params=CASES, ids=[f"{f}-{a}" for f, a in CASES])
def fmt(request, monkeypatch):
    name, arch = request.param
    monkeypatch.setenv("MOONMATH_EMU_ARCH", arch)
    pytest.importorskip("moonmath_emu")
    return name


def make_pool(fmt, g, slots):
    """(kv_pool, kv_scales or None) of `slots` N(0, 1) rows in the format."""
    if fmt == "a8w8":
        return (torch.randn(slots, 1, 576, generator=g) / KV_SCALE).clamp(-448, 448).to(torch.float8_e4m3fn), None
    x = torch.randn(slots, 1, 576, generator=g).to(torch.bfloat16)
    if fmt == "a16w16":
        return x, None
    codes, scales = quantize_mxfp4(x.float().view(slots, 576))
    return codes.view(slots, 1, 288), scales


def make_case(fmt, B, H, q_len, lens, *, seed=0, extra_slots=7, glen=None):
    g = torch.Generator().manual_seed(seed)
    T, total = B * q_len, int(sum(lens))
    slots = total + extra_slots
    pool, aux = make_pool(fmt, g, slots)
    kv_indices = torch.randperm(slots, generator=g)[:total].to(torch.int32)
    kv_indptr = torch.zeros(B + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(torch.tensor(lens, dtype=torch.int64), 0).to(torch.int32)
    return dict(q_lat=torch.randn(T, H, 512, generator=g).to(torch.bfloat16),
                q_pe=torch.randn(T, H, 64, generator=g).to(torch.bfloat16), kv_pool=pool, kv_scales=aux,
                seq_lens=torch.tensor(lens, dtype=torch.int32), kv_indices=kv_indices, kv_indptr=kv_indptr, glen=glen)


def factors(fmt):
    """formats.run's (c_qk, o_scale) for the format at the tests' scales."""
    return (SCALE * KV_SCALE * LOG2E, KV_SCALE) if fmt == "a8w8" else (SCALE * LOG2E, 1.0)


def call(fmt, backend, case, *, lse=True, cp_rank=0, cp_world=1, nparts=None, balanced=None, kv_waves=None):
    """The op (or formats.run with a forced split or kernel) -> (o, lse). The a8w8 reference is its definition at
    the split the kernel runs with the same arguments (reference.mla_decode_a8w8's runs: a8w8_runs of that plan):
    its fp8 P is rounded against each run's own running max."""
    T, H, _ = case["q_lat"].shape
    o = torch.full((T, H, 512), float("nan"), dtype=torch.bfloat16)
    l_out = torch.full((T, H), float("nan")) if lse else None
    pool, aux = case["kv_pool"], case["kv_scales"]
    tail = (case["seq_lens"], case["kv_indices"], case["kv_indptr"])
    if fmt == "a8w8" and backend == "reference":
        B = case["kv_indptr"].numel() - 1
        plan = formats.make_plan(fmt, B, H, T // B, case["kv_indices"].numel() // B, nparts=nparts, balanced=balanced,
                                 arch="gfx950", kv_waves=kv_waves)
        glens = None if (cp_world == 1 or case["glen"] is None) else case["glen"].tolist()
        runs = a8w8_runs(plan, case["seq_lens"].tolist(), T // B, glens, cp_rank, cp_world)
        ro, rl = reference.mla_decode_a8w8(case["q_lat"], case["q_pe"], pool, *tail, SCALE, KV_SCALE, case["glen"],
                                           cp_rank, cp_world, runs=runs)
        o.copy_(ro)
        if l_out is not None:
            l_out.copy_(rl)
        return o, l_out
    with use_backend(backend):
        # (the other formats' definitions do not depend on the split: their reference ignores it)
        if backend != "reference" and (nparts is not None or balanced is not None or kv_waves is not None):
            formats.run(fmt, case["q_lat"], case["q_pe"], pool, aux, o, *tail, *factors(fmt), l_out,
                        case["glen"], cp_rank, cp_world, nparts=nparts, balanced=balanced, kv_waves=kv_waves)
        elif fmt == "a8w8":
            mld.mla_decode_a8w8(case["q_lat"], case["q_pe"], pool, o, *tail, SCALE, KV_SCALE, lse=l_out,
                                glen=case["glen"], cp_rank=cp_rank, cp_world=cp_world)
        elif fmt == "a16w16":
            mld.mla_decode_a16w16(case["q_lat"], case["q_pe"], pool, o, *tail, SCALE, lse=l_out, glen=case["glen"],
                                  cp_rank=cp_rank, cp_world=cp_world)
        else:
            mld.mla_decode_mxfp4(case["q_lat"], case["q_pe"], pool, aux, o, *tail, SCALE, lse=l_out,
                                 glen=case["glen"], cp_rank=cp_rank, cp_world=cp_world)
    return o, l_out


def dequantised(fmt, case):
    """fp32 [slots, 576] rows of the case's pool as its format defines them."""
    pool = case["kv_pool"]
    if fmt == "a16w16":
        return pool.view(pool.shape[0], 576).float()
    if fmt == "a8w8":
        return pool.view(pool.shape[0], 576).float() * KV_SCALE
    return reference.mxfp4_rows(pool, case["kv_scales"])(torch.arange(pool.shape[0]))


# ---- against the reference -------------------------------------------------------------------------

@pytest.mark.parametrize("H,q_len", [(1, 1), (16, 1), (128, 1), (12, 2), (64, 2), (16, 4), (1, 8), (16, 8)])
def test_matches_reference(fmt, q_len, H):
    lens = [37 + q_len, 70 + 3 * q_len]  # partial last tiles; the planner may split
    case = make_case(fmt, 2, H, q_len, lens, seed=q_len * 131 + H)
    o, lse = call(fmt, "emu", case)
    ro, rlse = call(fmt, "reference", case)
    check_close(o, lse, ro, rlse)


def rel_fro(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def test_float64_definition(fmt):
    """The reference against a per-row float64 loop over the dequantised rows with bf16 Q (within 1/2 bf16
    ulp + 1e-5), and the kernel against the float64 values within the seed tolerance. a8w8 (Q and P
    quantised): the kernel within 1 bf16 ulp (+1e-3) of its own definition (the reference), and within
    A8W8_REL_FRO of the exact math."""
    B, H, q_len, lens = 2, 4, 2, [19, 40]
    case = make_case(fmt, B, H, q_len, lens, seed=5)
    rows = dequantised(fmt, case).double()
    ro, rlse = call(fmt, "reference", case)
    o, lse = call(fmt, "emu", case)
    ip = case["kv_indptr"].tolist()
    if fmt == "a8w8":
        ulp = torch.exp2(torch.floor(torch.log2(ro.float().abs().clamp(min=1e-30)))) * 2.0 ** -7
        assert bool(((o.float() - ro.float()).abs() <= ulp + 1e-3).all())
        want = torch.zeros(o.shape, dtype=torch.float64)
        for b in range(B):
            for t in range(q_len):
                c = rows[case["kv_indices"][ip[b]:ip[b] + lens[b] - (q_len - 1 - t)].long()]
                R = b * q_len + t
                q = torch.cat([case["q_lat"][R], case["q_pe"][R]], -1).double()
                want[R] = torch.softmax(SCALE * q @ c.T, -1) @ c[:, :512]
        assert rel_fro(o, want) < A8W8_REL_FRO
        return
    for b in range(B):
        for t in range(q_len):
            end = lens[b] - (q_len - 1 - t)
            c = rows[case["kv_indices"][ip[b]:ip[b] + end].long()]
            for h in range(H):
                R = b * q_len + t
                q = torch.cat([case["q_lat"][R, h], case["q_pe"][R, h]]).double()
                s = SCALE * (c @ q)
                p = torch.softmax(s, 0)
                want = p @ c[:, :512]
                lse64 = torch.logsumexp(s, 0).item() * LOG2E
                ulp = torch.exp2(torch.floor(torch.log2(want.abs().clamp(min=1e-30)))) * 2.0 ** -7  # bf16 ulp
                assert bool(((ro[R, h].double() - want).abs() <= ulp / 2 + 1e-5).all())
                assert abs(rlse[R, h].item() - lse64) < 1e-4
                assert (o[R, h].double() - want).abs().max().item() < O_TOL
                assert abs(lse[R, h].item() - lse64) < LSE_TOL


@pytest.mark.parametrize("nparts", [1, 2, 3, 7])
def test_split_counts_agree(fmt, nparts):
    """Any KV split (the merge kernel combines the parts) gives the reference's result; a8w8's parts round P to
    e4m3fn against their own running max, so its reference is the definition at the same split (within the seed
    tolerance), and against the one-part definition o moves within the fp8 P rounding (the DCP test's bound)."""
    case = make_case(fmt, 2, 16, 2, [150, 61], seed=nparts)
    o, lse = call(fmt, "emu", case, nparts=nparts)
    ro, rlse = call(fmt, "reference", case, nparts=nparts)
    check_close(o, lse, ro, rlse)
    if fmt == "a8w8":
        one, _ = call(fmt, "reference", case, nparts=1, kv_waves=1)
        assert rel_fro(o, one) < A8W8_REL_FRO / 2


@pytest.mark.parametrize("B", [1, 3, 8])
def test_batches_ragged(fmt, B, lanes_checked):
    """Ragged lengths (partial tiles, a short window) under the lane checker: no output depends on a register
    lane an MFMA read stale or never written (moonmath_emu.LaneError otherwise)."""
    lens = [(17 * b * b + 5) % 97 + (b % 2) for b in range(B)]
    case = make_case(fmt, B, 16, 1, lens, seed=B)
    o, lse = call(fmt, "emu", case)
    ro, rlse = call(fmt, "reference", case)
    check_close(o, lse, ro, rlse)


def test_length_balanced_split(fmt):
    case = make_case(fmt, 4, 16, 1, [300, 9, 0, 24], seed=11)
    o, lse = call(fmt, "emu", case, nparts=6, balanced=True)
    ro, rlse = call(fmt, "reference", case)
    check_close(o, lse, ro, rlse)


def test_empty_windows(fmt):
    """seq_len 0, and q_len > seq_len (early positions see nothing): o = 0, lse = -inf there."""
    q_len = 4
    case = make_case(fmt, 3, 16, q_len, [0, 2, 33], seed=2)
    o, lse = call(fmt, "emu", case)
    ro, rlse = call(fmt, "reference", case)
    check_close(o, lse, ro, rlse)
    assert bool((o[:q_len].float() == 0).all()) and bool(torch.isneginf(lse[:q_len]).all())
    assert bool(torch.isneginf(lse[q_len:q_len + 2]).all()) and bool(torch.isfinite(lse[q_len + 2:]).all())


@pytest.mark.parametrize("nparts", [None, 3])
def test_deterministic(fmt, nparts):
    case = make_case(fmt, 2, 32, 2, [130, 47], seed=8)
    a = call(fmt, "emu", case, nparts=nparts)
    b = call(fmt, "emu", case, nparts=nparts)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def plant_nan(fmt, case, slot, col):
    """A NaN in pool row `slot`: bf16 NaN, OCP e4m3fn NaN (0x7F), or for MXFP4 its block's E8M0 scale 0xFF."""
    if fmt == "a16w16":
        case["kv_pool"][slot, 0, col] = float("nan")
    elif fmt == "a8w8":
        case["kv_pool"].view(torch.uint8)[slot, 0, col] = 0x7F
    else:
        case["kv_scales"][slot, col // 32] = 0xFF


def test_nan_rows_give_nan_lse(fmt):
    """A NaN in an attended row (bf16 NaN; MXFP4: its block's E8M0 scale 0xFF) makes that request's lse
    NaN, never -inf; the other request is untouched."""
    case = make_case(fmt, 2, 16, 1, [20, 20], seed=4)
    plant_nan(fmt, case, int(case["kv_indices"][3]), 7)
    o, lse = call(fmt, "emu", case)
    ro, rlse = call(fmt, "reference", case)
    assert bool(torch.isnan(lse[0]).all()) and bool(torch.isnan(rlse[0]).all())
    check_close(o[1:], lse[1:], ro[1:], rlse[1:])


# ---- decode context parallelism --------------------------------------------------------------------

def dcp_case(fmt, B, H, q_len, glens, cp_world, seed):
    g = torch.Generator().manual_seed(seed)
    pool, aux = make_pool(fmt, g, int(sum(glens)) + 5)
    return dcp_views(g, pool, {"kv_scales": aux}, B, H, q_len, glens, cp_world)


@pytest.mark.parametrize("q_len", [1, 3, 8])
def test_dcp_ranks_match_reference(fmt, q_len):
    W = 8
    rank_case, _ = dcp_case(fmt, 2, 12, q_len, [61 + q_len, 29], W, seed=40 + q_len)
    for r in (0, 3, 7):
        case = rank_case(r)
        o, lse = call(fmt, "emu", case, cp_rank=r, cp_world=W)
        ro, rlse = call(fmt, "reference", case, cp_rank=r, cp_world=W)
        check_close(o, lse, ro, rlse)


def test_dcp_merge_equals_single_rank(fmt):
    W, q_len = 4, 2
    rank_case, full = dcp_case(fmt, 2, 16, q_len, [90, 13], W, seed=7)
    parts, lses = zip(*(call(fmt, "emu", rank_case(r), cp_rank=r, cp_world=W) for r in range(W)))
    out = torch.empty_like(parts[0])
    lse_out = torch.empty_like(lses[0])
    with use_backend("emu"):
        mld.mla_dcp_lse_merge_ranks(torch.stack(parts), torch.stack(lses), out, lse_out)
    o1, l1 = call(fmt, "emu", full)
    if fmt == "a8w8":  # the ranks round P on their own tiles and running max: equal up to the fp8 P rounding
        assert rel_fro(out, o1) < A8W8_REL_FRO / 2
    else:
        assert (out.float() - o1.float()).abs().max().item() < O_TOL
    fin = torch.isfinite(l1)
    assert torch.equal(torch.isfinite(lse_out), fin)
    assert (lse_out[fin] - l1[fin]).abs().max().item() < 0.01


# ---- the code object and bad input ------------------------------------------------------------------

def test_the_arch_runs_its_own_code_object(fmt, monkeypatch):
    """The launch ran this format's code object for the arch: gfx950's QK is v_mfma_f32_16x16x32_bf16
    (18 per 16-token tile per row tile), gfx942's two 16x16x16 per step; PV 32 x 16x16x16 per tile; a8w8 runs
    QK and PV on v_mfma_f32_16x16x32_fp8_fp8 over 32-token tiles; and for one row tile gfx950 runs the
    one-wave kernel."""
    import os

    case = make_case(fmt, 1, 16, 1, [64], seed=3)  # 4 tiles, one row tile, one part (forced)
    o = torch.empty(1, 16, 512, dtype=torch.bfloat16)
    with use_backend("emu"):
        counters = formats.run(fmt, case["q_lat"], case["q_pe"], case["kv_pool"], case["kv_scales"], o,
                               case["seq_lens"], case["kv_indices"], case["kv_indptr"], *factors(fmt), nparts=1,
                               kv_waves=1)
    assert len(counters) == (2 if fmt == "a8w8" else 1)  # a8w8: the |q| maxima, the decode (quantising its Q)
    mix = counters[-1]["mfma_by_opcode"]
    # one 16-row tile: gfx950 launches the one-wave kernel (every wave computes), gfx942 the 4-wave one
    assert counters[-1]["waves"] == (1 if os.environ["MOONMATH_EMU_ARCH"] == "gfx950" else 4)
    if fmt == "a8w8":
        # 32-token tiles: QK 2 x 18 and PV 32, all on the fp8 MFMA (no bf16 PV left)
        assert mix == {"v_mfma_f32_16x16x32_fp8_fp8": 2 * (2 * 18 + 32)}
        if os.environ["MOONMATH_EMU_ARCH"] == "gfx950":  # the _kv4 kernel: 4 waves, the same tiles' MFMAs
            with use_backend("emu"):
                kv4 = formats.run(fmt, case["q_lat"], case["q_pe"], case["kv_pool"], case["kv_scales"], o,
                                  case["seq_lens"], case["kv_indices"], case["kv_indptr"], *factors(fmt), nparts=1,
                                  kv_waves=4)
            assert kv4[-1]["waves"] == 4 and kv4[-1]["mfma_by_opcode"] == mix
    elif os.environ["MOONMATH_EMU_ARCH"] == "gfx950":
        assert mix == {"v_mfma_f32_16x16x32_bf16": 4 * 18, "v_mfma_f32_16x16x16_bf16": 4 * 32}
    else:
        assert mix == {"v_mfma_f32_16x16x16_bf16": 4 * (36 + 32)}


def _bad_args(fmt, what):
    case = make_case(fmt, 1, 16, 1, [8], seed=1)
    pool, aux = case["kv_pool"], case["kv_scales"]
    if what == "pool dtype":  # a8w8: gfx942's fp8 on gfx950
        pool = {"a16w16": torch.uint8, "mxfp4": torch.int8, "a8w8": torch.float8_e4m3fnuz}[fmt]
        pool = case["kv_pool"].view(pool)
    elif what == "row width":
        pool = (torch.zeros(pool.shape[0], 1, 576, dtype=torch.uint8) if fmt == "mxfp4"
                else pool[:, :, :-2].contiguous())
    elif what == "scale rows":
        aux = aux[:-1].contiguous()
    elif what == "scale blocks":
        aux = aux[:, :17].contiguous()
    elif what == "scale dtype":
        aux = aux.view(torch.int8)
    return case, pool, aux


REJECTIONS = {
    "a16w16": [("pool dtype", TypeError, "kv_pool"), ("row width", ValueError, r"kv_pool must be \[slots, 1, 576\]")],
    "a8w8": [("pool dtype", TypeError, "kv_pool"), ("row width", ValueError, r"kv_pool must be \[slots, 1, 576\]")],
    "mxfp4": [("pool dtype", TypeError, "kv_pool"), ("row width", ValueError, r"kv_pool must be \[slots, 1, 288\]"),
              ("scale rows", ValueError, "kv_scales"), ("scale blocks", ValueError, "kv_scales"),
              ("scale dtype", TypeError, "kv_scales")],
}


@pytest.mark.parametrize("what", ["pool dtype", "row width", "scale rows", "scale blocks", "scale dtype"])
def test_rejections_name_the_argument(fmt, what):
    rules = dict((w, (e, m)) for w, e, m in REJECTIONS[fmt])
    if what not in rules:
        pytest.skip(f"{fmt} has no {what}")
    err, match = rules[what]
    case, pool, aux = _bad_args(fmt, what)
    o = torch.empty(1, 16, 512, dtype=torch.bfloat16)
    tail = (case["seq_lens"], case["kv_indices"], case["kv_indptr"], SCALE)
    with use_backend("emu"), pytest.raises(err, match=match):
        if fmt == "a8w8":
            mld.mla_decode_a8w8(case["q_lat"], case["q_pe"], pool, o, *tail, KV_SCALE)
        elif fmt == "a16w16":
            mld.mla_decode_a16w16(case["q_lat"], case["q_pe"], pool, o, *tail)
        else:
            mld.mla_decode_mxfp4(case["q_lat"], case["q_pe"], pool, aux, o, *tail)


def test_split_independent_at_bf16_level(fmt):
    """The KV split changes only fp32 rounding and the running max P is rounded against: for bf16 P that is
    at bf16 level (measured: |o1 - o7| <= 0.0039 here); a8w8 rounds P to e4m3fn (relative step 2^-3) against
    each part's own running max, so o moves within the fp8 P rounding (measured: relative Frobenius 0.012
    here; the bound is the DCP test's, half of the a8w8 error bound)."""
    case = make_case(fmt, 2, 16, 1, [400, 130], seed=21)
    o1, l1 = call(fmt, "emu", case, nparts=1)
    o7, l7 = call(fmt, "emu", case, nparts=7)
    if fmt == "a8w8":
        assert rel_fro(o7, o1) < A8W8_REL_FRO / 2
    else:
        assert (o1.float() - o7.float()).abs().max().item() < 0.008  # one bf16 ulp at |o| in [1, 2)
    assert (l1 - l7).abs().max().item() < 1e-4


@pytest.mark.parametrize("B,H,q_len,lens", [(3, 16, 1, [400, 130, 0]), (2, 8, 2, [77, 300])])
def test_kv_split_waves_are_the_four_part_split(fmt, B, H, q_len, lens):
    """The _kv4 kernel (gfx950, kv_waves 4: one row tile, 4 waves per part) decodes the part's four runs of
    ceil(tiles / 4) tiles, one per wave, and merges them in LDS: with one part these are the runs (and running
    maxima) of the one-wave kernel's uniform 4-part split merged by the merge kernel, so the two agree up to the
    merges' fp32 rounding (o within one bf16 ulp, lse within 1e-5), with the same empty rows; at 1-3 parts it is
    the definition at its runs within the seed tolerance (ragged lengths, an empty request, causal windows), and
    it is deterministic."""
    import os

    if 4 not in formats.cost_kernels(fmt, H, q_len, os.environ["MOONMATH_EMU_ARCH"]):
        pytest.skip("no _kv4 kernel on this arch (formats.KV_SPLIT_FORMATS, gfx950)")
    case = make_case(fmt, B, H, q_len, lens, seed=23 + B)
    o4, l4 = call(fmt, "emu", case, nparts=1, kv_waves=4)
    o1, l1 = call(fmt, "emu", case, nparts=4, balanced=False, kv_waves=1)
    ulp = torch.exp2(torch.floor(torch.log2(o1.float().abs().clamp(min=1e-30)))) * 2.0 ** -7
    assert bool(((o4.float() - o1.float()).abs() <= ulp).all())
    fin = torch.isfinite(l1)
    assert torch.equal(torch.isfinite(l4), fin) and (l4[fin] - l1[fin]).abs().max().item() < 1e-5
    for n in (1, 2, 3):  # against the definition at the kernel's runs (reference.mla_decode_a8w8's runs)
        o, lse = call(fmt, "emu", case, nparts=n, kv_waves=4)
        check_close(o, lse, *call(fmt, "reference", case, nparts=n, kv_waves=4))
    again = call(fmt, "emu", case, nparts=3, kv_waves=4)
    assert torch.equal(again[0], o) and torch.equal(again[1], lse)



def _nan_outside_the_window(fmt):
    """q_len 2 over 97 tokens: token 96 lies in position 1's window only, and alone in wave 3's run of a one-part
    _kv4 launch (32- and 16-token tiles: 3 x 32 = 6 x 16 = 96) and in the last part of a one-wave split, so for
    position 0 that run or part is empty."""
    case = make_case(fmt, 1, 8, 2, [97], seed=51)
    plant_nan(fmt, case, int(case["kv_indices"][96]), 3)
    return case


def nan_paths(fmt, H, q_len):
    """(nparts, kv_waves) of every kernel path at this shape: the planner's; one-wave decoders unsplit, split into
    parts some of which are empty for a position (through the merge), and into 40 (the merge's waves then fold
    states that hold only empty parts); the _kv4 kernel where the format has it."""
    import os

    paths = [(None, None), (1, 1), (4, 1), (40, 1)]
    if 4 in formats.cost_kernels(fmt, H, q_len, os.environ["MOONMATH_EMU_ARCH"]):
        paths.append((1, 4))
    return paths


def test_nan_outside_the_window_reaches_it_on_every_path(fmt):
    """Documented behaviour (docs/numerics.md): a NaN in a KV row that position 0 does not attend still reaches
    position 0's o, in that NaN's columns, through the P V product (p = 0 times NaN), as in the reference's dense
    product, whichever kernel path decodes the row: a _kv4 run or a one-wave part that is empty for position 0 adds
    its O times 0 rather than dropping it. Position 0's lse stays finite; position 1 attends the row: all NaN."""
    case = _nan_outside_the_window(fmt)
    ro, rlse = call(fmt, "reference", case)
    for nparts, kv_waves in nan_paths(fmt, 8, 2):
        o, lse = call(fmt, "emu", case, nparts=nparts, kv_waves=kv_waves)
        assert torch.equal(torch.isnan(o.float()), torch.isnan(ro.float())), (nparts, kv_waves)
        assert bool(torch.isnan(o[0].float()).any()) and bool(torch.isfinite(lse[0]).all()), (nparts, kv_waves)
        assert bool(torch.isnan(lse[1]).all()), (nparts, kv_waves)
        assert (lse[0] - rlse[0]).abs().max().item() < LSE_TOL


def test_empty_window_beside_a_nan_row_gives_zeros(fmt):
    """A position with an empty window (q_len 3 over 2 tokens: position 0 sees nothing) gives o = 0 exactly and
    lse = -inf even when the tile it shares holds a NaN row that the later positions attend (its O is 0 x NaN
    there), on every kernel path; the other positions have the reference's NaN pattern."""
    case = make_case(fmt, 1, 4, 3, [2], seed=52)
    plant_nan(fmt, case, int(case["kv_indices"][1]), 5)
    ro, _ = call(fmt, "reference", case)
    for nparts, kv_waves in nan_paths(fmt, 4, 3):
        o, lse = call(fmt, "emu", case, nparts=nparts, kv_waves=kv_waves)
        assert torch.equal(o[0], torch.zeros_like(o[0])) and bool((lse[0] == -math.inf).all()), (nparts, kv_waves)
        assert torch.equal(torch.isnan(o.float()), torch.isnan(ro.float())), (nparts, kv_waves)


def test_kv_waves_override_is_checked(fmt):
    """kv_waves names a kernel the format has at that shape (4: the _kv4 kernel, one row tile on gfx950), else a
    ValueError naming it; the planner's choice is one of them."""
    import os

    arch = os.environ["MOONMATH_EMU_ARCH"]
    assert formats.make_plan(fmt, 2, 16, 1, 1024, arch=arch).kv_waves in formats.cost_kernels(fmt, 16, 1, arch)
    with pytest.raises(ValueError, match="kv_waves"):
        formats.make_plan(fmt, 2, 64, 1, 1024, arch=arch, kv_waves=4)  # 4 row tiles: no _kv4 kernel
    if arch != "gfx950":
        with pytest.raises(ValueError, match="kv_waves"):
            formats.make_plan(fmt, 2, 16, 1, 1024, arch=arch, kv_waves=4)


def test_mxfp4_extreme_scales(fmt):
    """Scale bytes 0 and 1 (subnormal products) in a few blocks: the dequantisation stays exact there and the
    other blocks of those tiles are untouched."""
    if fmt != "mxfp4":
        pytest.skip("MXFP4 only")
    case = make_case(fmt, 2, 16, 1, [70, 45], seed=13)
    for t, e in ((2, 0), (40, 1), (77, 1)):  # local rows of both requests, in different tiles
        case["kv_scales"][int(case["kv_indices"][t]), 3] = e
    o, lse = call(fmt, "emu", case)
    ro, rlse = call(fmt, "reference", case)
    check_close(o, lse, ro, rlse)


def test_mxfp4_torch_dtypes_and_padded_scales(fmt):
    """The pool as float4_e2m1fn_x2 and the scales as float8_e8m0fnu, or as a padded [rows, 1, 24] matrix
    (the GPU MODE layout pads blocks), give the uint8 call's bits."""
    if fmt != "mxfp4":
        pytest.skip("MXFP4 only")
    case = make_case(fmt, 2, 16, 1, [40, 20], seed=1)
    o8, l8 = call(fmt, "emu", case)
    typed = dict(case, kv_pool=case["kv_pool"].view(torch.float4_e2m1fn_x2),
                 kv_scales=case["kv_scales"].view(torch.float8_e8m0fnu))
    padded = dict(case, kv_scales=torch.nn.functional.pad(case["kv_scales"], (0, 6), value=0xFF)
                  .view(-1, 1, 24).contiguous())
    for other in (typed, padded):
        o, lse = call(fmt, "emu", other)
        assert torch.equal(o, o8) and torch.equal(lse, l8)


@pytest.mark.parametrize("rows", [1, 3, 12, 64, 4096, 4097, 4608])
def test_q_amax_launch_is_max_abs_q(fmt, rows):
    """a8w8's first launch (mla_q_amax: one-wave workgroups, each issuing all its loads of a contiguous range of
    query rows, q_lat's and q_pe's) leaves partials whose max is max |q| exactly, NaN ignored: 1 and 3 rows (a
    q_pe load's lanes past the rows out of range), 12 (the last wave's rows past the end of both tensors), 64 (64
    workgroups of one row), 4096 (B 256 x H 16: 256 workgroups of 16 rows, 18 loads), 4097 and 4608 (more than 16
    rows per wave: two rounds of 16). The largest |q| sits in q_lat's last chunk, q_pe's first and last in turn."""
    if fmt != "a8w8":
        pytest.skip("the Q amax launch is a8w8's")
    g = torch.Generator().manual_seed(rows)
    q_lat = torch.randn(rows, 1, 512, generator=g).to(torch.bfloat16)
    q_pe = torch.randn(rows, 1, 64, generator=g).to(torch.bfloat16)
    q_lat.view(-1)[rows * 17 % (rows * 512)] = float("nan")
    for where in ("lat_last", "pe_first", "pe_last"):
        ql, qp = q_lat.clone(), q_pe.clone()
        t = {"lat_last": ql, "pe_first": qp, "pe_last": qp}[where].view(-1)
        t[0 if where == "pe_first" else t.numel() - 1] = -1000.0
        with use_backend("emu"):
            parts, n, _ = formats._q_amax("a8w8", "gfx950", ql, qp)
        blocks, R, rounds = formats.amax_launch_shape(rows)
        assert n == blocks == -(-rows // (R * rounds)) and R in formats.AMAX_ROWS_PER_WAVE
        assert rounds == 1 or R == formats.AMAX_ROWS_PER_WAVE[-1]
        assert n <= formats.AMAX_MAX_BLOCKS
        assert parts.numel() == n and float(parts.max()) == 1000.0, where
    # without the planted value: the NaN is ignored, the max is the data's
    with use_backend("emu"):
        parts, _, _ = formats._q_amax("a8w8", "gfx950", q_lat, q_pe)
    a = torch.cat([q_lat.view(-1), q_pe.view(-1)]).float().abs()
    assert float(parts.max()) == float(a[~torch.isnan(a)].max())


@pytest.mark.parametrize("cs,wpr,waves", [(4, 1, 1), (4, 2, 4), (4, 4, 4), (1, 1, 4), (1, 2, 4)])
def test_every_merge_shape_matches_the_reference(fmt, cs, wpr, waves):
    """The split merge in each shape its kernels serve (mla_decode_merge_c1 / _c4): one wave per (row, quarter) in
    one-wave workgroups (the planner's gfx950 shape up to 16 parts), quarters of 2 and 4 waves folded through LDS
    (2 floats a lane: each lane group keeps one column pair), whole rows of 1 and 2 waves; ragged lengths with an
    empty request, 12 parts (some empty for the short requests)."""
    import dataclasses

    arch = os.environ["MOONMATH_EMU_ARCH"]  # the fixture's
    B, H, q_len, lens = 3, 16, 1, [700, 0, 233]
    case = make_case(fmt, B, H, q_len, lens, seed=cs * 10 + wpr)
    plan = formats.make_plan(fmt, B, H, q_len, max(lens), nparts=12, arch=arch, kv_waves=1)
    rows = B * q_len * H
    plan = dataclasses.replace(plan, merge_cs=cs, merge_wpr=wpr, merge_waves=waves,
                               merge_grid=-(-rows * cs * wpr // waves))
    T = B * q_len
    o = torch.full((T, H, 512), float("nan"), dtype=torch.bfloat16)
    lse = torch.full((T, H), float("nan"))
    with use_backend("emu"):
        formats.run(fmt, case["q_lat"], case["q_pe"], case["kv_pool"], case["kv_scales"], o, case["seq_lens"],
                    case["kv_indices"], case["kv_indptr"], *factors(fmt), lse, plan=plan)
    ro, rlse = call(fmt, "reference", case, nparts=12, kv_waves=1)
    check_close(o, lse, ro, rlse)
    assert torch.all(o[1] == 0) and torch.all(torch.isneginf(lse[1]))  # the empty request
