"""Issue 17 features of the gfx950 attention forward (softcap): the reference backend against an independent
float64 formulation, the kernels on the emulator against float64 through every entry point (forward,
forward_varlen, forward_paged, VarlenPlan host- and device-planned), bad input, and the compile-time flag
(the plain kernels carry no trace of a feature)."""
from __future__ import annotations

import math

import pytest
import torch

import moonmath_attention_gfx950 as att
from moonmath_attention_gfx950 import as_emu_device, kernel
from moonmath_common import use_backend

bf = torch.bfloat16
# The seed's tolerances (test_attention_gfx950_kernel.py): max|d| / max|ref| and absolute natural-log LSE.
TOL, LSE_TOL = 4e-3, 2e-5


def _built() -> bool:
    return kernel.ARCH in kernel.KERNELS.archs_built()


needs_kernels = pytest.mark.skipif(not _built(), reason="this build has no gfx950 code objects")


@pytest.fixture
def emu(monkeypatch):
    pytest.importorskip("moonmath_emu")
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    with use_backend("emu"):
        yield


def rnd(*shape, seed, scale=1.0):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale).to(bf)


def ref64(q, k, v, causal, scale, softcap=0.0):
    """Independent float64 attention on [H, S, D] tensors: softmax / logsumexp of torch in float64, tanh written
    out as (e^2x - 1) / (e^2x + 1). Rows seeing no key: o = 0, lse = -inf."""
    H, Sq = q.shape[0], q.shape[1]
    Hk, Skv = k.shape[0], k.shape[1]
    kk = k.double().repeat_interleave(H // Hk, 0)
    vv = v.double().repeat_interleave(H // Hk, 0)
    s = torch.einsum("hid,hjd->hij", q.double(), kk) * scale
    if softcap:
        e = torch.exp(2.0 * (s / softcap).clamp(-40, 40))
        s = softcap * (e - 1.0) / (e + 1.0)
    if causal:
        j = torch.arange(Skv)[None, :]
        i = torch.arange(Sq)[:, None]
        s = s.masked_fill(j > i + Skv - Sq, float("-inf"))
    lse = torch.logsumexp(s, -1) if Skv else torch.full((H, Sq), float("-inf"), dtype=torch.float64)
    p = torch.softmax(s, -1).nan_to_num(0.0) if Skv else torch.zeros(H, Sq, 0, dtype=torch.float64)
    return p @ vv, lse


def check(o, lse, ro, rl):
    """o/lse against float64 (o [H, S, Dv], lse [H, S]) at the seed's tolerance; empty rows exactly 0 / -inf."""
    den = ro.abs().max()
    err = float((o.double() - ro).abs().max() / den) if den > 0 else float(o.double().abs().max())
    assert err <= TOL, f"rel. error {err:.2e}"
    empty = torch.isneginf(rl)
    assert torch.equal(torch.isneginf(lse), empty)
    assert not o[empty].float().any(), "rows that see no key must be 0"
    d = (lse.double() - rl)[~empty].abs()
    assert d.numel() == 0 or float(d.max()) <= LSE_TOL, f"lse error {float(d.max()):.2e}"
    return err


def cu(lens):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)


def varlen_ref(q, k, v, lens_q, lens_k, causal, scale, softcap):
    """float64 per sequence of packed THD tensors -> (o [total_q, H, Dv], lse [H, total_q]) over the sequences' rows."""
    cq, ck = cu(lens_q), cu(lens_k)
    n = int(cq[-1])
    o = torch.zeros(n, q.shape[1], v.shape[2], dtype=torch.float64)
    lse = torch.full((q.shape[1], n), float("-inf"), dtype=torch.float64)
    for b in range(len(lens_q)):
        q0, q1, k0, k1 = int(cq[b]), int(cq[b + 1]), int(ck[b]), int(ck[b + 1])
        ro, rl = ref64(q[q0:q1].transpose(0, 1), k[k0:k1].transpose(0, 1), v[k0:k1].transpose(0, 1), causal, scale,
                       softcap)
        o[q0:q1], lse[:, q0:q1] = ro.transpose(0, 1), rl
    return o, lse


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

    page = 16
    need = [-(-n // page) for n in lens_k]
    perm = torch.randperm(sum(need) + 3, generator=torch.Generator().manual_seed(13)).to(torch.int32)
    kc = torch.full((perm.numel(), page, hk, 128), float("nan"), dtype=bf)
    vc = kc.clone()
    table = torch.full((len(lens_k), max(need) + 1), 2**30, dtype=torch.int32)
    at = 0
    for b, n in enumerate(lens_k):
        pg = perm[at:at + need[b]]
        at += need[b]
        table[b, :need[b]] = pg
        for j in range(n):
            kc[pg[j // page], j % page] = k[int(ck[b]) + j]
            vc[pg[j // page], j % page] = v[int(ck[b]) + j]
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


@pytest.mark.parametrize("bad,exc", [(-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                     (1e39, ValueError), ("5", TypeError)])
def test_softcap_bad_input_names_it(bad, exc):
    q, k, v = rnd(2, 1, 128, seed=0), rnd(2, 1, 128, seed=0), rnd(2, 1, 128, seed=0)
    c = cu([2])
    calls = [
        lambda: att.forward(q[None], k[None], v[None], softcap=bad),
        lambda: att.forward_varlen(q, k, v, c, c, 2, 2, softcap=bad),
        lambda: att.forward_paged(q, torch.zeros(1, 8, 1, 128, dtype=bf), torch.zeros(1, 8, 1, 128, dtype=bf), c,
                                  torch.tensor([2], dtype=torch.int32), block_table=torch.zeros(1, 1, dtype=torch.int32),
                                  softcap=bad),
        lambda: att.VarlenPlan().plan(c, c, 2, 2, 2, 2, heads=1, kv_heads=1, softcap=bad),
    ]
    for call in calls:
        with use_backend("reference"), pytest.raises(exc, match="softcap"):
            call()


@needs_kernels
def test_plain_kernels_carry_no_softcap_stage():
    """The soft-cap is a compile-time flag: each *_softcap kernel has its plain twin's instructions plus the
    stage (an exp2 and a reciprocal per score: 32 more v_rcp_f32 per block per wave), the plain kernel none of it."""
    emu = pytest.importorskip("moonmath_emu")
    for co, names in ((kernel.FWD_CODE_OBJECT, kernel.FWD_KERNELS), ("attention_fwd_paged", None)):
        d = emu.disassemble(kernel.KERNELS.path("isa", kernel.ARCH, co).read_bytes())
        kernels = {x[0] for x in d}
        plain = sorted(n for n in kernels if not n.endswith("_softcap"))
        assert plain and all(n + "_softcap" in kernels for n in plain)
        for n in plain:
            rcp = {m: sum(1 for x in d if x[0] == m and x[2].startswith("v_rcp_f32")) for m in (n, n + "_softcap")}
            assert rcp[n + "_softcap"] - rcp[n] >= 32, rcp
