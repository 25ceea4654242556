"""The gfx950 attention forward kernels on the emulator against a float64 reference, and the bit-for-bit
equivalences the API promises (strided views, varlen == batch, determinism)."""
from __future__ import annotations

import math

import pytest
import torch
from _attn_testing import rnd

import moonmath_attention_gfx950 as att
from moonmath_attention_gfx950 import kernel

bf = torch.bfloat16
# max|d| / max|ref|. Measured 1.8e-3 .. 3.8e-3 on these shapes; the floor is the bf16 rounding of the
# output (2^-9 of an element near the max) plus that of P. The seed's ~1e-3 causal is a long-sequence
# figure (large max|ref| on the first rows), not reachable at these lengths by any bf16-output kernel.
DENSE_TOL, CAUSAL_TOL = 4e-3, 4e-3
LSE_TOL = 2e-5                      # absolute, natural log


def _built() -> bool:
    return kernel.ARCH in kernel.KERNELS.archs_built()


pytestmark = pytest.mark.skipif(not _built(), reason="this build has no gfx950 code objects")


@pytest.fixture(autouse=True)
def _emu_gfx950(emu_gfx950):
    """Every test here runs on the emulator as gfx950 (conftest.emu_gfx950)."""


def ref64(q, k, v, causal, scale):
    """float64 attention, bhsd: (o [B, H, Sq, Dv], lse [B, H, Sq]); rows seeing no key: 0 and -inf."""
    B, H, Sq, _ = q.shape
    Hk, Skv = k.shape[1], k.shape[2]
    kk = k.double().repeat_interleave(H // Hk, 1)
    vv = v.double().repeat_interleave(H // Hk, 1)
    s = q.double() @ kk.transpose(-1, -2) * scale
    if causal:
        i = torch.arange(Sq)[:, None]
        j = torch.arange(Skv)[None, :]
        s = s.masked_fill(j > i + Skv - Sq, float("-inf"))
    m = s.amax(-1, keepdim=True) if Skv else torch.full((B, H, Sq, 1), float("-inf"), dtype=torch.float64)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    o = (p @ vv) / torch.where(l == 0, torch.ones_like(l), l)
    return o, (torch.log(l) + m).squeeze(-1)


def rel_err(o, ref):
    den = ref.abs().max()
    return float((o.double() - ref).abs().max() / den) if den > 0 else float(o.double().abs().max())


def check_against_ref(o, lse, q, k, v, causal, scale):
    ro, rl = ref64(q, k, v, causal, scale)
    assert o.shape == ro.shape
    err = rel_err(o, ro)
    assert err <= (CAUSAL_TOL if causal else DENSE_TOL), f"rel. error {err:.2e}"
    empty = torch.isneginf(rl)
    assert torch.equal(o[empty].float(), torch.zeros_like(o[empty].float())), "rows that see no key must be 0"
    if lse is not None:
        assert torch.equal(torch.isneginf(lse), empty)
        d = (lse.double() - rl)[~empty].abs()
        assert d.numel() == 0 or float(d.max()) <= LSE_TOL, f"lse error {float(d.max()):.2e}"
    return err


# (B, Hq, Hkv, Sq, Skv, Dqk, causal): both head dims, dense/causal, MHA/GQA 4:1/MQA, the awkward lengths
# sparingly crossed, B*H up to 8.
SHAPES = [
    (1, 1, 1, 16, 16, 128, False),
    (1, 4, 1, 129, 600, 128, False),   # GQA 4:1, Skv off the 64-grid
    (2, 2, 2, 600, 127, 128, True),    # Sq > Skv causal: early rows see nothing
    (1, 8, 1, 17, 129, 128, True),     # MQA
    (1, 2, 1, 1, 600, 128, True),      # decode-like row
    (2, 1, 1, 128, 15, 128, False),
    (1, 2, 2, 15, 17, 192, False),
    (1, 4, 1, 600, 600, 192, True),    # MLA prefill, GQA
    (2, 2, 1, 127, 128, 192, False),
    (1, 1, 1, 129, 1, 192, True),
]


@pytest.mark.parametrize("B,Hq,Hkv,Sq,Skv,D,causal", SHAPES)
def test_forward_matches_float64(B, Hq, Hkv, Sq, Skv, D, causal):
    q, k, v = rnd(B, Hq, Sq, D, seed=1), rnd(B, Hkv, Skv, D, seed=2), rnd(B, Hkv, Skv, 128, seed=3)
    o, lse = att.forward(q, k, v, causal=causal, return_lse=True)
    check_against_ref(o, lse, q, k, v, causal, 1.0 / math.sqrt(D))


@pytest.mark.parametrize("D,causal", [(128, False), (128, True), (192, True)])
def test_split_kv_within_tolerance(D, causal):
    """Forced split (many idle CUs): parts + fp32 merge stay within tolerance of float64 and of the unsplit run."""
    B, Hq, Hkv, Sq, Skv = 1, 2, 1, 129, 600
    q, k, v = rnd(B, Hq, Sq, D, seed=4), rnd(B, Hkv, Skv, D, seed=5), rnd(B, Hkv, Skv, 128, seed=6)
    with kernel.planner_options(num_cus=4096, min_part_blocks=1):
        plan = kernel.plan_batch(B, Sq, Skv, Hq, Hkv, causal)
        assert plan["n_merge"] > 0 and plan["max_parts"] > 1
        o_s, l_s = att.forward(q, k, v, causal=causal, return_lse=True)
    with kernel.planner_options(num_cus=1):
        assert kernel.plan_batch(B, Sq, Skv, Hq, Hkv, causal)["n_merge"] == 0
        o_u, l_u = att.forward(q, k, v, causal=causal, return_lse=True)
    check_against_ref(o_s, l_s, q, k, v, causal, 1.0 / math.sqrt(D))
    check_against_ref(o_u, l_u, q, k, v, causal, 1.0 / math.sqrt(D))
    # two results each rounded to bf16 on their own: at most 2 x the tolerance apart
    assert rel_err(o_s, o_u.double()) <= 2 * (CAUSAL_TOL if causal else DENSE_TOL)


@pytest.mark.parametrize("D,causal,split", [(128, False, False), (128, True, False), (192, False, False),
                                             (128, False, True)])
def test_output_without_lse_equals_with_lse_bitwise(D, causal, split):
    """The bf16 d128 / d192 kernels run a copy of the key loop without the fp32 row sum l when neither the LSE nor a
    split merge reads it (the normaliser is lb): out must be bit for bit that of the run with the LSE."""
    B, Hq, Hkv, Sq, Skv = 1, 2, 1, 300, 700
    q, k, v = rnd(B, Hq, Sq, D, seed=7), rnd(B, Hkv, Skv, D, seed=8), rnd(B, Hkv, Skv, 128, seed=9)
    with kernel.planner_options(**({"num_cus": 4096, "min_part_blocks": 1} if split else {"num_cus": 1})):
        assert (kernel.plan_batch(B, Sq, Skv, Hq, Hkv, causal)["n_merge"] > 0) == split
        o_l, lse = att.forward(q, k, v, causal=causal, return_lse=True)
        o = att.forward(q, k, v, causal=causal)
    check_against_ref(o_l, lse, q, k, v, causal, 1.0 / math.sqrt(D))
    assert torch.equal(o.view(torch.int16), o_l.view(torch.int16))


def test_zero_lengths():
    q, k, v = rnd(1, 2, 0, 128, seed=1), rnd(1, 2, 5, 128, seed=2), rnd(1, 2, 5, 128, seed=3)
    o, lse = att.forward(q, k, v, return_lse=True)
    assert o.shape == (1, 2, 0, 128) and lse.shape == (1, 2, 0)
    q = rnd(1, 2, 20, 128, seed=1)
    k, v = rnd(1, 2, 0, 128, seed=2), rnd(1, 2, 0, 128, seed=3)
    o, lse = att.forward(q, k, v, causal=True, return_lse=True)
    assert torch.equal(o.float(), torch.zeros(1, 2, 20, 128)) and bool(torch.isneginf(lse).all())


@pytest.mark.parametrize("scale", [-0.2, 0.0, 1e-3])
def test_softmax_scale_any_finite(scale):
    """Negative (Q negated exactly in the kernel), zero (uniform weights) and tiny scales."""
    q, k, v = rnd(1, 2, 33, 128, seed=7, scale=2.0), rnd(1, 1, 70, 128, seed=8), rnd(1, 1, 70, 128, seed=9)
    o, lse = att.forward(q, k, v, softmax_scale=scale, causal=True, return_lse=True)
    check_against_ref(o, lse, q, k, v, True, scale)


def test_softmax_scale_and_deterministic():
    q, k, v = rnd(1, 2, 70, 128, seed=7, scale=3.0), rnd(1, 1, 90, 128, seed=8), rnd(1, 1, 90, 128, seed=9)
    o1, l1 = att.forward(q, k, v, softmax_scale=0.3, return_lse=True)
    o2, l2 = att.forward(q, k, v, softmax_scale=0.3, return_lse=True)
    assert torch.equal(o1, o2) and torch.equal(l1, l2)
    check_against_ref(o1, l1, q, k, v, False, 0.3)


def test_nan_is_canonical():
    q, k, v = rnd(1, 1, 20, 128, seed=1), rnd(1, 1, 30, 128, seed=2), rnd(1, 1, 30, 128, seed=3)
    q[0, 0, 3, 7] = float("nan")
    o = att.forward(q, k, v)
    bits = o.view(torch.int16)
    assert bool((bits[0, 0, 3] == 0x7FFF).all()), "a NaN row comes out as canonical 0x7FFF"
    assert not bool(torch.isnan(o[0, 0, :3].float()).any())


def test_strided_views_equal_contiguous_bitwise():
    """BSHD slices of a fused QKV, a BHSD transpose view and padded rows read in place == contiguous copies."""
    B, S, Hq, Hkv, D = 1, 70, 4, 2, 128
    qkv = rnd(B, S, Hq + 2 * Hkv, D, seed=11)
    q, k, v = qkv[:, :, :Hq], qkv[:, :, Hq:Hq + Hkv], qkv[:, :, Hq + Hkv:]
    o_view = att.forward(q, k, v, layout="bshd", causal=True)
    o_copy = att.forward(q.contiguous(), k.contiguous(), v.contiguous(), layout="bshd", causal=True)
    assert o_view.is_contiguous() and torch.equal(o_view, o_copy)
    # the same data as BHSD transpose views: identical bits
    o_h = att.forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    assert torch.equal(o_h, o_copy.transpose(1, 2))
    # padded rows: tokens 24 elements further apart than D, and an `out` view with its own strides
    pad = rnd(B, Hq, S, D + 64, seed=12)[..., :D]
    out = torch.full((B, S, Hq, D + 8), 7.0, dtype=bf)[..., :D].transpose(1, 2)
    att.forward(pad, k.transpose(1, 2), v.transpose(1, 2), out=out)
    ref = att.forward(pad.contiguous(), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous())
    assert torch.equal(out, ref)


def _varlen_case(D, seed):
    lens_q, lens_k = [37, 0, 129, 1], [100, 5, 129, 0]
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32)
    Hq, Hkv = 4, 2
    q = rnd(int(cu_q[-1]) + 3, Hq, D, seed=seed)      # 3 trailing rows belong to no sequence
    k = rnd(int(cu_k[-1]), Hkv, D, seed=seed + 1)
    v = rnd(int(cu_k[-1]), Hkv, 128, seed=seed + 2)
    return lens_q, lens_k, cu_q, cu_k, q, k, v


@pytest.mark.parametrize("D,causal", [(128, True), (192, False)])
def test_varlen_equals_batch_bitwise(D, causal):
    lens_q, lens_k, cu_q, cu_k, q, k, v = _varlen_case(D, seed=20)
    out = torch.full((q.shape[0], q.shape[1], 128), 5.0, dtype=bf)
    lse = torch.full((q.shape[1], q.shape[0]), 9.0)
    att.forward_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal, out=out, return_lse=False)
    o2, lse2 = att.forward_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal, return_lse=True)
    lse[:] = lse2
    assert torch.equal(out[-3:].float(), torch.full((3, 4, 128), 5.0)), "rows outside every sequence are not written"
    for b in range(len(lens_q)):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if q1 == q0:
            continue
        ob, lb = att.forward(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], layout="bshd", causal=causal,
                             return_lse=True)
        assert torch.equal(out[q0:q1], ob[0]), f"sequence {b}"
        assert torch.equal(o2[q0:q1], ob[0])
        assert torch.equal(lse[:, q0:q1], lb[0])
        check_against_ref(ob.transpose(1, 2), lb, q[None, q0:q1].transpose(1, 2), k[None, k0:k1].transpose(1, 2),
                          v[None, k0:k1].transpose(1, 2), causal, 1.0 / math.sqrt(D))


def test_varlen_head_major_equals_contiguous():
    lens_q, lens_k, cu_q, cu_k, q, k, v = _varlen_case(128, seed=30)
    qh = q.transpose(0, 1).contiguous().transpose(0, 1)   # [T, H, D] view of head-major storage
    kh = k.transpose(0, 1).contiguous().transpose(0, 1)
    vh = v.transpose(0, 1).contiguous().transpose(0, 1)
    a = att.forward_varlen(qh, kh, vh, cu_q, cu_k, max(lens_q), max(lens_k), causal=True)
    b = att.forward_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True)
    n = int(cu_q[-1])
    assert torch.equal(a[:n], b[:n])


def test_kernel_rejects_misaligned():
    q = rnd(1, 2, 16, 136, seed=1)[..., :128]          # token stride 136: fine (a multiple of 8)
    k, v = rnd(1, 2, 16, 128, seed=2), rnd(1, 2, 16, 128, seed=3)
    att.forward(q, k, v)
    qb = rnd(1, 2, 16, 133, seed=1)[..., :128]         # token stride 133: rows not 16-byte aligned
    with pytest.raises(ValueError, match=r"q.stride\(2\) must be a multiple of 8"):
        att.forward(qb, k, v)
    with pytest.raises(ValueError, match="k must start on a 16-byte boundary"):
        att.forward(q, rnd(1, 2, 16, 129, seed=2)[..., 1:], v)


def test_varlen_plan_runs_the_kernels():
    lens_q, lens_k, cu_q, cu_k, q, k, v = _varlen_case(128, seed=40)
    n = int(cu_q[-1])
    plan = att.VarlenPlan().plan(cu_q, cu_k, max(lens_q), max(lens_k), q.shape[0], k.shape[0], heads=4, kv_heads=2,
                                 causal=True)
    a, la = plan.run(q, k, v, return_lse=True)
    b, lb = att.forward_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True, return_lse=True)
    assert torch.equal(a[:n], b[:n]) and torch.equal(la[:, :n], lb[:, :n])


# Heavier sweep, outside the default run (MOONMATH_RUN_SLOW=1): every length of the set crossed
# for q and k, both head dims, dense and causal, split forced and not.
SLOW_LENS = [0, 1, 15, 16, 17, 127, 128, 129, 600]


@pytest.mark.slow
@pytest.mark.parametrize("D", [128, 192])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("split", [False, True])
def test_sweep_all_lengths(D, causal, split):
    for i, Sq in enumerate(SLOW_LENS):
        for j, Skv in enumerate(SLOW_LENS):
            q = rnd(1, 4, Sq, D, seed=100 + i)
            k, v = rnd(1, 1, Skv, D, seed=200 + j), rnd(1, 1, Skv, 128, seed=300 + j)
            opts = dict(num_cus=4096, min_part_blocks=1) if split else dict(num_cus=1)
            with kernel.planner_options(**opts):
                o, lse = att.forward(q, k, v, causal=causal, return_lse=True)
            if Sq and Skv:
                check_against_ref(o, lse, q, k, v, causal, 1.0 / math.sqrt(D))
            elif Sq:
                assert torch.equal(o.float(), torch.zeros_like(o.float())) and bool(torch.isneginf(lse).all())
