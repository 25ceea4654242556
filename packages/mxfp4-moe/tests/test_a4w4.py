"""a4w4 on gfx950: the MXFP4 activation quantiser (AITER's per-1x32 rule, bit for bit), the a4w4 gate/up and
down kernels on the scaled MFMA, and the fused MXFP4-output epilogue; on the emulator (or a gfx950 GPU).

References: the rule's reference (quant.quantize_reference) is itself checked against hand-worked cases;
the GEMMs against a dense fp64 product of the decoded activations and the STOCK weights (never repacked).
"""
from __future__ import annotations

import pytest
import torch

import moonmath_mxfp4_moe as mm
from moonmath_common import NoKernelError, get_backend, use_backend
from moonmath_mxfp4_moe import a4w4, quant

TOL = 1e-2
E2M1 = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64)


def _has_emu() -> bool:
    try:
        import moonmath_emu  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def gfx950(monkeypatch):
    from moonmath_common import target_arch

    if get_backend() == "hip":
        if target_arch() != "gfx950":
            pytest.skip(f"the GPU here is {target_arch()}")
        yield "hip"
        return
    if not _has_emu():
        pytest.skip("needs moonmath-emu (or a gfx950 GPU)")
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    with use_backend("emu"):
        yield "emu"


# ------------------------------------------------------------------------------------------ the rule
def test_rule_reference_hand_cases():
    """The reference against values worked by hand from the rule (so it can fail on its own)."""
    x = torch.zeros(4, 32, dtype=torch.bfloat16)
    x[0, :12] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0, -0.25, -0.75, -5.0])
    # row 0: amax 7 = 1.75 * 2^2 -> bit 22 set -> P = 8 -> scale = 2 = 2^1 -> byte 128; values / 2
    x[1, :2] = torch.tensor([1.0, -1.0])   # amax 1 -> P = 1 -> scale 2^-2 -> byte 125; 1 / 0.25 = 4 -> code 6
    x[2, 0] = 1.4921875                    # 1.4921875 < 1.5: mantissa bit 22 clear -> P = 1 -> byte 125
    # row 3: all zero -> amax = 1e-10 (1.7179869 * 2^-34, bit 22 set) -> P = 2^-33 -> byte 127 - 35 = 92
    q, s = quant.quantize_reference(x)
    assert s[:, 0].tolist() == [128, 125, 125, 92]
    # row 0 / 2: .125 .375 .625 .875 1.25 1.75 2.5 3 3.5 -.125 -.375 -2.5
    #  -> 0 (.125 < .25), 1 (.375), 1 (.625 < .75), 2 (.875), 2 (1.25 tie -> even), 4 (1.75 tie -> even),
    #     4 (2.5 tie -> even), 5 (3), 6 (3.5 tie -> even), 8 (-0), 9 (-.5), 12 (-2.5 -> -2)
    codes = torch.stack((q[0] & 0xF, q[0] >> 4), dim=-1).reshape(-1)[:12].tolist()
    assert codes == [0, 1, 1, 2, 2, 4, 4, 5, 6, 8, 9, 12]
    assert (q[1, 0] & 0xF, q[1, 0] >> 4) == (6, 14)
    assert int(q[2, 0] & 0xF) == 7  # 1.4921875 / 0.25 = 5.97 -> nearest of {4, 6} is 6 = code 7
    assert torch.equal(q[3], torch.zeros(16, dtype=torch.uint8))


def test_rule_saturates_and_decodes():
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(64, 256, generator=g) * 8).to(torch.bfloat16)
    q, s = quant.quantize_reference(x)
    d = quant.dequantize(q, s)
    # Every group's amax lands within [4, 8) * scale before saturation: the largest code is 6 or 7 (|x| <= 8s).
    ratio = (d.abs().reshape(64, 8, 32).amax(-1) / x.float().abs().reshape(64, 8, 32).amax(-1))
    assert float(ratio.min()) >= 0.75 - 1e-6 and float(ratio.max()) <= 6 / 4 + 1e-6


# ------------------------------------------------------------------------------------------ the kernel
def _inputs(rows, K, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, K, generator=g) * torch.exp2(torch.randint(-30, 30, (rows, 1), generator=g).float())
    x = x.to(torch.bfloat16)
    x[1, :32] = 0
    x[2, 32:64] = -0.0
    x[3, :12] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0, -0.25, -0.75, -5.0])
    x[4] = -x[4].abs()
    x[5, :32] = 2.0 ** 120  # large scales
    x[6, :32] = 2.0 ** -120  # tiny (still bf16 normal) values
    return x


@pytest.mark.parametrize("fp8", [False, True], ids=["mxfp4", "mxfp8"])
@pytest.mark.parametrize("rows,K", [(1, 32), (7, 96), (37, 512)])
def test_quant_kernel_bitwise(gfx950, rows, K, fp8):
    x = _inputs(max(rows, 8), K)[:rows]
    op, ref = (mm.mxfp8_quantize, quant.mxfp8_quantize_reference) if fp8 else (mm.mxfp4_quantize,
                                                                                quant.quantize_reference)
    q, s = op(x)
    rq, rs = ref(x)
    assert torch.equal(s, rs), f"{int((s != rs).sum())} scale bytes differ"
    q, rq = q.view(torch.uint8), rq.view(torch.uint8)
    assert torch.equal(q, rq), f"{int((q != rq).sum())} code bytes differ"


def test_quant_kernel_strided_rows(gfx950):
    base = _inputs(16, 384, seed=5)
    view = base[:, 64:320]  # row stride 384, 16-byte aligned start
    q, s = mm.mxfp4_quantize(view)
    rq, rs = quant.quantize_reference(view.contiguous())
    assert torch.equal(q, rq) and torch.equal(s, rs)


def test_quant_reference_backend_equals_rule():
    x = _inputs(8, 128, seed=2)
    with use_backend("reference"):
        q, s = mm.mxfp4_quantize(x)
    rq, rs = quant.quantize_reference(x)
    assert torch.equal(q, rq) and torch.equal(s, rs)


def test_quant_rejections():
    with pytest.raises(TypeError, match="x"):
        mm.mxfp4_quantize(torch.zeros(4, 32))
    with pytest.raises(ValueError, match="multiple of 32"):
        mm.mxfp4_quantize(torch.zeros(4, 48, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="out_codes"):
        mm.mxfp4_quantize(torch.zeros(4, 64, dtype=torch.bfloat16), out_codes=torch.zeros(4, 16, dtype=torch.uint8))


def test_quant_kernel_gfx942_has_none(monkeypatch):
    if not _has_emu() or get_backend() == "hip":
        pytest.skip("emulator only")
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx942")
    with use_backend("emu"), pytest.raises(NoKernelError):
        mm.mxfp4_quantize(torch.zeros(4, 64, dtype=torch.bfloat16))


# ------------------------------------------------------------------------------------------ the GEMMs
def _decode_w(w, s):
    lo, hi = (w & 0xF).long(), (w >> 4).long()
    W = torch.stack((E2M1[lo], E2M1[hi]), -1).reshape(w.shape[0], -1)
    return W * torch.pow(2.0, s.double() - 127).repeat_interleave(32, 1)


def _dense_from(L, a, row_div):
    """fp64 [nvt, nb]: slot s -> a[s // row_div] . W[expert(s)]^T, W decoded from L's stock layout."""
    out = torch.empty(L.nvt, L.nb, dtype=torch.float64)
    for e in range(L.E):
        W = _decode_w(L.w[e], L.s[e])
        slots = (L.ids.reshape(-1) == e).nonzero().reshape(-1)
        if slots.numel():
            out[slots] = a[slots // row_div] @ W.T
    return out


class Layer:
    """Random a4w4 problem: bf16 activations quantised by the rule, stock weights [E, Nb, K/2] + scales."""

    def __init__(self, T, top_k, E, K, nb, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.T, self.top_k, self.E, self.K, self.nb = T, top_k, E, K, nb
        self.x = torch.randn(T, K, generator=g).to(torch.bfloat16)
        self.aq, self.as_ = quant.quantize_reference(self.x)
        self.w = torch.randint(0, 256, (E, nb, K // 2), generator=g, dtype=torch.uint8)
        self.s = torch.randint(118, 125, (E, nb, K // 32), generator=g, dtype=torch.uint8)
        self.ids = torch.stack([torch.randperm(E, generator=g)[:top_k] for _ in range(T)]).to(torch.int32)
        self.tw = torch.rand(T, top_k, generator=g)
        self.B, self.Bs = mm.repack_mxfp4(self.w), mm.repack_mxfp4_scales(self.s)

    @property
    def nvt(self):
        return self.T * self.top_k

    def dense(self, aq=None, as_=None, row_div=None):
        """fp64 [nvt, nb]: slot s -> decode(A)[s // row_div] . W[expert(s)]^T from the stock layout."""
        aq, as_ = (self.aq, self.as_) if aq is None else (aq, as_)
        div = self.top_k if row_div is None else row_div
        lo, hi = (aq & 0xF).long(), (aq >> 4).long()
        a = torch.stack((E2M1[lo], E2M1[hi]), -1).reshape(aq.shape[0], -1)
        a = a * torch.pow(2.0, as_.double() - 127).repeat_interleave(32, 1)
        return _dense_from(self, a, div)

    def align(self, bm):
        return mm.moe_align_block_size(self.ids, bm, self.E)


def _rel(c, ref):
    return float((c.double() - ref).abs().max() / ref.abs().max())


def _silu(g, u):
    return g * torch.sigmoid(g) * u


@pytest.mark.parametrize("bm,nt", [(16, 1), (32, 2), (48, 1)])
def test_gateup_none_vs_dense(gfx950, bm, nt):
    L = Layer(T=12, top_k=3, E=5, K=384, nb=256, seed=bm)
    sid, eid, ntpp, nblk = L.align(bm)
    C = torch.full((L.nvt, L.nb), float("nan"), dtype=torch.bfloat16)
    a4w4.launch_a4w4(L.aq, L.as_, L.B, L.Bs, C, None, None, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k, mm.EPI_NONE,
                     False, nt=nt)
    assert _rel(C, L.dense()) < TOL


@pytest.mark.parametrize("epilogue", [mm.EPI_SILU, mm.EPI_SITU])
@pytest.mark.parametrize("bm", [16, 32])
def test_gateup_gated_vs_dense(gfx950, epilogue, bm):
    L = Layer(T=10, top_k=2, E=4, K=256, nb=2 * 160, seed=7)
    sid, eid, ntpp, nblk = L.align(bm)
    n = L.nb // 2
    C = torch.zeros(L.nvt, n, dtype=torch.bfloat16)
    mm.mxfp4_moe_gateup_a4w4(L.aq, L.as_, L.B, L.Bs, C, L.tw, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k, epilogue,
                             mul_routed_weight=True, situ_beta=4.0, situ_linear_beta=25.0)
    acc = L.dense()
    g, u = acc[:, :n], acc[:, n:]
    if epilogue == mm.EPI_SILU:
        v = _silu(g, u)
    else:
        v = (4 * torch.tanh(g / 4) * torch.sigmoid(g)) * (25 * torch.tanh(u / 25))
    ref = v * L.tw.reshape(-1, 1).double()
    assert _rel(C, ref) < TOL


@pytest.mark.parametrize("bm", [16, 48])
def test_fused_quantised_output_equals_quantiser(gfx950, bm):
    """The MXFP4-output epilogue == mxfp4_quantize(the same kernel's bf16 output), bit for bit."""
    L = Layer(T=9, top_k=4, E=6, K=256, nb=2 * 256, seed=11)
    sid, eid, ntpp, nblk = L.align(bm)
    n = L.nb // 2
    Cb = torch.zeros(L.nvt, n, dtype=torch.bfloat16)
    a4w4.launch_a4w4(L.aq, L.as_, L.B, L.Bs, Cb, None, L.tw, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k, mm.EPI_SILU,
                     True, nt=2)
    Cq = torch.full((L.nvt, n // 2), 0xAB, dtype=torch.uint8)
    Cs = torch.full((L.nvt, n // 32), 0xAB, dtype=torch.uint8)
    mm.mxfp4_moe_gateup_a4w4(L.aq, L.as_, L.B, L.Bs, Cq, L.tw, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k,
                             mm.EPI_SILU, mul_routed_weight=True, C_scales=Cs)
    rq, rs = quant.quantize_reference(Cb)
    assert torch.equal(Cs, rs), f"{int((Cs != rs).sum())} scale bytes differ"
    assert torch.equal(Cq, rq), f"{int((Cq != rq).sum())} code bytes differ"
    # and the values are right: the decoded output is as far from the dense SwiGLU as quantising the exact
    # result by the rule is (MXFP4 per 32 costs ~14 % rel. Frobenius error on such rows by itself)
    acc = L.dense()
    ref = _silu(acc[:, :n], acc[:, n:]) * L.tw.reshape(-1, 1).double()
    ideal = quant.dequantize(*quant.quantize_reference(ref.to(torch.bfloat16))).double()
    err = float((quant.dequantize(Cq, Cs).double() - ref).norm() / ref.norm())
    assert err < 1.05 * float((ideal - ref).norm() / ref.norm()) + 1e-3


def test_down_a4w4_on_quantised_intermediate(gfx950):
    """Stage 2 reads stage 1's MXFP4 output (row = slot, top_k = 1) and applies the routed weight."""
    L = Layer(T=8, top_k=2, E=4, K=256, nb=128, seed=13)
    g = torch.Generator().manual_seed(14)
    inter = torch.randn(L.nvt, 256, generator=g).to(torch.bfloat16)
    iq, is_ = quant.quantize_reference(inter)
    sid, eid, ntpp, nblk = L.align(32)
    C = torch.zeros(L.nvt, L.nb, dtype=torch.bfloat16)
    mm.mxfp4_moe_down_a4w4(iq, is_, L.B, L.Bs, C, L.tw, sid, eid, ntpp, nblk, 32, L.nvt, 1, mul_routed_weight=True)
    ref = L.dense(iq, is_, row_div=1) * L.tw.reshape(-1, 1).double()
    assert _rel(C, ref) < TOL


def test_block_m_and_nt_do_not_change_results(gfx950):
    L = Layer(T=16, top_k=2, E=3, K=256, nb=256, seed=17)
    outs = []
    for bm, nt in [(16, 1), (16, 2), (32, 1), (48, 2)]:
        sid, eid, ntpp, nblk = L.align(bm)
        C = torch.zeros(L.nvt, L.nb, dtype=torch.bfloat16)
        a4w4.launch_a4w4(L.aq, L.as_, L.B, L.Bs, C, None, None, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k, mm.EPI_NONE,
                         False, nt=nt)
        outs.append(C)
    for o in outs[1:]:
        assert torch.equal(o, outs[0])


def test_reference_backend_vs_dense():
    L = Layer(T=6, top_k=2, E=3, K=256, nb=2 * 128, seed=19)
    sid, eid, ntpp, nblk = L.align(16)
    Cq = torch.zeros(L.nvt, 64, dtype=torch.uint8)
    Cs = torch.zeros(L.nvt, 4, dtype=torch.uint8)
    with use_backend("reference"):
        mm.mxfp4_moe_gateup_a4w4(L.aq, L.as_, L.B, L.Bs, Cq, None, sid, eid, ntpp, nblk, 16, L.nvt, L.top_k,
                                 mm.EPI_SILU, C_scales=Cs)
        Cb = torch.zeros(L.nvt, 128, dtype=torch.bfloat16)
        mm.mxfp4_moe_gateup_a4w4(L.aq, L.as_, L.B, L.Bs, Cb, None, sid, eid, ntpp, nblk, 16, L.nvt, L.top_k,
                                 mm.EPI_SILU)
    acc = L.dense()
    assert _rel(Cb, _silu(acc[:, :128], acc[:, 128:])) < TOL
    rq, rs = quant.quantize_reference(Cb)
    assert torch.equal(Cq, rq) and torch.equal(Cs, rs)


def test_a4w4_rejections():
    L = Layer(T=4, top_k=1, E=2, K=256, nb=256, seed=23)
    sid, eid, ntpp, nblk = L.align(16)
    C = torch.zeros(L.nvt, 128, dtype=torch.bfloat16)
    args = (sid, eid, ntpp, nblk, 16, L.nvt, 1)
    with pytest.raises(TypeError, match="A"):
        mm.mxfp4_moe_gateup_a4w4(L.x, L.as_, L.B, L.Bs, C, None, *args)
    with pytest.raises(ValueError, match="A_scales"):
        mm.mxfp4_moe_gateup_a4w4(L.aq, L.as_[:, :4], L.B, L.Bs, C, None, *args)
    with pytest.raises(ValueError, match="needs a gated epilogue"):
        mm.mxfp4_moe_gateup_a4w4(L.aq, L.as_, L.B, L.Bs, torch.zeros(L.nvt, 128, dtype=torch.uint8), None, *args,
                                 mm.EPI_NONE, C_scales=torch.zeros(L.nvt, 8, dtype=torch.uint8))
    with pytest.raises(ValueError, match="block_m"):
        mm.mxfp4_moe_gateup_a4w4(L.aq, L.as_, L.B, L.Bs, C, None, sid, eid, ntpp, nblk, 64, L.nvt, 1)
    L2 = Layer(T=4, top_k=1, E=2, K=160, nb=256, seed=23)
    with pytest.raises(ValueError, match="multiple of 128"):
        mm.mxfp4_moe_gateup_a4w4(L2.aq, L2.as_, L2.B, L2.Bs, C, None, *args)


@pytest.mark.parametrize("bm", [16, 48])
def test_resident_down_equals_streaming(gfx950, bm):
    """The resident-tile down kernel == the streaming kernel with EPI_NONE bit for bit, at every n_steps / nt."""
    L = Layer(T=10, top_k=3, E=4, K=384, nb=2 * 128 + 64, seed=29)
    sid, eid, ntpp, nblk = L.align(bm)
    want = torch.zeros(L.nvt, L.nb, dtype=torch.bfloat16)
    a4w4.launch_a4w4(L.aq, L.as_, L.B, L.Bs, want, None, L.tw, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k,
                     mm.EPI_NONE, True, nt=1)
    assert _rel(want, L.dense() * L.tw.reshape(-1, 1).double()) < TOL
    for nt, steps in [(1, 1), (1, 3), (2, 1), (2, 2)]:
        C = torch.full((L.nvt, L.nb), float("nan"), dtype=torch.bfloat16)
        a4w4.launch_a4w4_down(L.aq, L.as_, L.B, L.Bs, C, L.tw, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k, True,
                              nt=nt, n_steps=steps)
        assert torch.equal(C, want), (nt, steps)


def test_down_plan():
    assert a4w4.a4w4_down_plan(118, 3584, 16) == (1, 3)
    assert a4w4.a4w4_down_plan(4000, 7168, 48) == (2, 28)   # prefill: one workgroup sweeps all 28 chunks
    assert a4w4.a4w4_down_plan(8, 7168, 16) == (1, 1)       # few blocks: spread the chunks over the CUs
    assert a4w4.a4w4_down_plan(100, 7168, 32) == (2, 2)     # 28 * 100 // 1024 = 2 steps of 14 chunks


# ------------------------------------------------------------------------------------------ the one-launch layer
# mxfp4_moe_layer_a4w4: bit for bit the three-launch path, and within the a16w4 tolerance of a float64 layer
# over the decoded operands (stock weights, never repacked).
class MoeLayer(Layer):
    """Layer (gate/up weights [E, 2I, K/2]) plus down weights [E, N, I/2] + scales."""

    def __init__(self, T, top_k, E, K, inter, N, seed=0):
        super().__init__(T, top_k, E, K, 2 * inter, seed)
        g = torch.Generator().manual_seed(seed + 1000)
        self.inter, self.N = inter, N
        self.w2 = torch.randint(0, 256, (E, N, inter // 2), generator=g, dtype=torch.uint8)
        self.s2 = torch.randint(118, 125, (E, N, inter // 32), generator=g, dtype=torch.uint8)
        self.B2, self.Bs2 = mm.repack_mxfp4(self.w2), mm.repack_mxfp4_scales(self.s2)

    def two_launches(self, bm, epilogue):
        sid, eid, ntpp, nblk = self.align(bm)
        hq = torch.zeros(self.nvt, self.inter // 2, dtype=torch.uint8)
        hs = torch.zeros(self.nvt, self.inter // 32, dtype=torch.uint8)
        mm.mxfp4_moe_gateup_a4w4(self.aq, self.as_, self.B, self.Bs, hq, None, sid, eid, ntpp, nblk, bm, self.nvt,
                                 self.top_k, epilogue, C_scales=hs)
        C = torch.zeros(self.nvt, self.N, dtype=torch.bfloat16)
        mm.mxfp4_moe_down_a4w4(hq, hs, self.B2, self.Bs2, C, self.tw, sid, eid, ntpp, nblk, bm, self.nvt, 1,
                               mul_routed_weight=True)
        return C

    def layer(self, bm, epilogue, down_splits=1):
        sid, eid, ntpp, nblk = self.align(bm)
        C = torch.full((self.nvt, self.N), float("nan"), dtype=torch.bfloat16)
        mm.mxfp4_moe_layer_a4w4(self.aq, self.as_, self.B, self.Bs, self.B2, self.Bs2, C, self.tw, sid, eid, ntpp,
                                nblk, bm, self.nvt, self.top_k, epilogue, down_splits=down_splits)
        return C

    def fp64(self):
        """The a4w4 semantics in float64: SwiGLU rounded to bf16 and quantised by the rule, then down x weight."""
        acc = self.dense()
        h = (acc[:, :self.inter] * torch.sigmoid(acc[:, :self.inter]) * acc[:, self.inter:]).to(torch.bfloat16)
        h = quant.dequantize(*quant.quantize_reference(h)).double()
        out = torch.empty(self.nvt, self.N, dtype=torch.float64)
        for e in range(self.E):
            slots = (self.ids.reshape(-1) == e).nonzero().reshape(-1)
            if slots.numel():
                out[slots] = h[slots] @ _decode_w(self.w2[e], self.s2[e]).T
        return out * self.tw.reshape(-1, 1).double()


@pytest.mark.parametrize("bm,inter", [(16, 256), (32, 512), (48, 256)])
def test_layer_equals_two_launches(gfx950, bm, inter):
    L = MoeLayer(T=9, top_k=3, E=4, K=256, inter=inter, N=384, seed=bm + inter)
    want = L.two_launches(bm, mm.EPI_SILU)
    got = L.layer(bm, mm.EPI_SILU)
    assert torch.equal(got, want), f"{int((got != want).sum())} of {got.numel()} outputs differ"
    assert _rel(got, L.fp64()) < 1e-2


@pytest.mark.parametrize("bm,K,N", [(16, 640, 640), (32, 128, 640), (32, 896, 384)])
def test_layer_prefetch_depths_equal_two_launches(gfx950, bm, K, N):
    """Stage 1 keeps two weight slabs in flight at block_m <= 32 (three register sets rotating: K = 640 and 896
    end the rotation at two different places, K = 128 has one slab; the prefetch past the last slab reads 0)
    and the down sweep runs 3 column chunks at N = 640 (the last partial): still bit for bit the two launches,
    and within the a16w4 tolerance of the float64 layer."""
    L = MoeLayer(T=7, top_k=3, E=3, K=K, inter=256, N=N, seed=bm + K + N)
    want = L.two_launches(bm, mm.EPI_SILU)
    got = L.layer(bm, mm.EPI_SILU)
    assert torch.equal(got, want), f"{int((got != want).sum())} of {got.numel()} outputs differ"
    assert _rel(got, L.fp64()) < 1e-2  # both paths share the down sweep: the float64 layer checks it too


@pytest.mark.parametrize("inter,splits", [(256, 2), (256, 4), (512, 3)])
def test_layer_down_splits_equal_two_launches(gfx950, inter, splits):
    """The down columns split over `splits` workgroups per block: N = 640 is 3 column chunks at I = 256 (split
    2: 2 + 1; split 4: one workgroup has none) and 2 at I = 512 (split 3: one has none); every output written once,
    bit for bit the two launches (NaN-filled C: a column no workgroup wrote would fail)."""
    L = MoeLayer(T=7, top_k=3, E=3, K=256, inter=inter, N=640, seed=inter + splits)
    want = L.two_launches(16, mm.EPI_SILU)
    got = L.layer(16, mm.EPI_SILU, down_splits=splits)
    assert torch.equal(got, want), f"{int((got != want).sum())} of {got.numel()} outputs differ"


def test_layer_down_splits_plan():
    """mxfp4_moe_layer_a4w4_down_splits: CUs // live blocks, clamped to [1, MAX_DOWN_SPLITS]."""
    ids = torch.tensor([[0, 1], [0, 2], [3, 1]], dtype=torch.int32)  # rows per expert 2, 2, 1, 1: 4 blocks at 16
    assert mm.mxfp4_moe_layer_a4w4_down_splits(ids, 4, 16, num_cus=256) == a4w4.MAX_DOWN_SPLITS
    assert mm.mxfp4_moe_layer_a4w4_down_splits(ids, 4, 16, num_cus=9) == 2
    assert mm.mxfp4_moe_layer_a4w4_down_splits(ids, 4, 16, num_cus=7) == 1
    assert mm.mxfp4_moe_layer_a4w4_down_splits(ids, 4, 16, num_cus=3) == 1
    many = torch.arange(40, dtype=torch.int32).reshape(20, 2) % 40  # 40 experts of 1 row: 40 blocks
    assert mm.mxfp4_moe_layer_a4w4_down_splits(many, 40, 32, num_cus=100) == 2
    with pytest.raises(ValueError, match="block_m"):
        mm.mxfp4_moe_layer_a4w4_down_splits(ids, 4, 24)


def test_layer_nan_scale_gives_canonical_nan(gfx950):
    """A NaN scale byte (0xFF) of one down-weight column of one expert: that column of its slots' rows is NaN,
    written as bf16 0x7FFF by the layer exactly as by the two launches (v_cvt_pk_bf16_f32 alone would keep a
    payload), every other output finite."""
    L = MoeLayer(T=6, top_k=2, E=3, K=256, inter=256, N=128, seed=21)
    e = int(L.ids[0, 0])
    L.Bs2[e, 0, 5] = 0xFF
    want = L.two_launches(16, mm.EPI_SILU)
    got = L.layer(16, mm.EPI_SILU)
    hit = (L.ids.reshape(-1) == e)
    nan = torch.isnan(got.float())
    assert nan[hit, 5].all() and nan.sum() == hit.sum()
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert (got[hit, 5].view(torch.int16) == 0x7FFF).all()


@pytest.mark.parametrize("col", [3, 256 + 17])
def test_layer_nan_in_stage1_equals_two_launches(gfx950, col):
    """A NaN scale byte (0xFF) of one gate (col 3) or up (256 + 17) weight column: its SwiGLU output is NaN in the
    expert's rows. The layer rounds it as the two launches do (the canonical NaN, then the fp4 conversion; its
    stage-1 epilogue takes the canonical path only in waves that hold a NaN) and both give the same bits."""
    L = MoeLayer(T=6, top_k=2, E=3, K=256, inter=256, N=128, seed=23)
    e = int(L.ids[0, 0])
    L.Bs[e, 1, col] = 0xFF
    want = L.two_launches(16, mm.EPI_SILU)
    got = L.layer(16, mm.EPI_SILU)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_layer_situ_equals_two_launches(gfx950):
    L = MoeLayer(T=6, top_k=2, E=3, K=384, inter=256, N=256, seed=5)
    assert torch.equal(L.layer(16, mm.EPI_SITU), L.two_launches(16, mm.EPI_SITU))


@pytest.mark.parametrize("inter", a4w4.LAYER_INTERS)
@pytest.mark.parametrize("bm", a4w4.A4W4_BLOCK_MS)
@pytest.mark.parametrize("epilogue", [mm.EPI_SILU, mm.EPI_SITU])
def test_layer_lanes_defined_at_ragged_tokens(gfx950, lanes_checked, bm, inter, epilogue):
    """Every layer kernel the planner can pick (block_m 16 / 32 / 48, I = 256 / 512) under the lane checker at a
    ragged routing (7 live rows of 3 experts: every M block partial, N = 132 a partial column chunk): no output
    depends on a register lane an MFMA read stale or never written (LaneError otherwise), and no MFMA runs under
    a partial EXEC. clang sank the down sweep's MFMAs with their weight-scale preparation into the epilogue's
    `if (!rows[r].live)` once (docs/kernels/mxfp4_moe_gfx950.md, "Compiler pitfall"); full tiles never show it."""
    L = MoeLayer(T=7, top_k=1, E=3, K=128, inter=inter, N=132, seed=bm + inter + epilogue)
    from moonmath_mxfp4_moe import kernel

    got = L.layer(bm, epilogue)
    c = kernel.KERNELS.last_counters
    assert c["mfma_partial_exec"] == 0
    assert not got.isnan().any()
    if epilogue == mm.EPI_SILU:
        assert _rel(got, L.fp64()) < 1e-2


def test_layer_reference_backend():
    L = MoeLayer(T=5, top_k=2, E=3, K=256, inter=256, N=128, seed=9)
    with use_backend("reference"):
        got = L.layer(16, mm.EPI_SILU)
    assert _rel(got, L.fp64()) < 1e-2


def test_layer_rejections():
    L = MoeLayer(T=4, top_k=1, E=2, K=256, inter=384, N=128, seed=3)
    sid, eid, ntpp, nblk = L.align(16)
    C = torch.zeros(L.nvt, L.N, dtype=torch.bfloat16)
    args = (C, None, sid, eid, ntpp, nblk, 16, L.nvt, 1)
    with pytest.raises(ValueError, match="I in"):
        mm.mxfp4_moe_layer_a4w4(L.aq, L.as_, L.B, L.Bs, L.B2, L.Bs2, *args, mul_routed_weight=False)
    M = MoeLayer(T=4, top_k=1, E=2, K=256, inter=256, N=128, seed=3)
    with pytest.raises(ValueError, match="B2"):
        mm.mxfp4_moe_layer_a4w4(M.aq, M.as_, M.B, M.Bs, M.B2[:, :4], M.Bs2, *args, mul_routed_weight=False)
    with pytest.raises(ValueError, match="epilogue"):
        mm.mxfp4_moe_layer_a4w4(M.aq, M.as_, M.B, M.Bs, M.B2, M.Bs2, *args, mm.EPI_NONE, mul_routed_weight=False)
    for bad in (0, a4w4.MAX_DOWN_SPLITS + 1):
        with pytest.raises(ValueError, match="down_splits"):
            mm.mxfp4_moe_layer_a4w4(M.aq, M.as_, M.B, M.Bs, M.B2, M.Bs2, *args, mul_routed_weight=False,
                                    down_splits=bad)
    off = torch.zeros(L.nvt * L.N + 1, dtype=torch.bfloat16)[1:].view(L.nvt, L.N)  # 2 bytes past an 8-byte boundary
    with pytest.raises(ValueError, match="8-byte"):
        mm.mxfp4_moe_layer_a4w4(M.aq, M.as_, M.B, M.Bs, M.B2, M.Bs2, off, None, sid, eid, ntpp, nblk, 16, L.nvt, 1,
                                mul_routed_weight=False)


# ------------------------------------------------------------------------------------------ a8w4 (MXFP8 activations)
E4M3_MAX = 448.0


def test_mxfp8_rule_hand_cases():
    """The MXFP8 reference against values worked by hand from the rule (scale = P / 256)."""
    x = torch.zeros(3, 32, dtype=torch.bfloat16)
    x[0, :4] = torch.tensor([7.0, 1.0, -0.5, 3.0])   # amax 7: bit 22 set -> P = 8 -> 8 / 256 = 2^-5 -> byte 122
    x[1, :2] = torch.tensor([1.4921875, 0.001])      # bit 22 clear -> P = 1 -> 2^-8 -> byte 119
    # row 2: all zero -> amax = 1e-10 -> P = 2^-33 -> 2^-41 -> byte 86; codes 0
    q, s = quant.mxfp8_quantize_reference(x)
    assert s[:, 0].tolist() == [122, 119, 86]
    assert q[0, :4].float().tolist() == [224.0, 32.0, -16.0, 96.0]   # x * 2^5, exact in e4m3
    # 1.4921875 * 256 = 382 -> e4m3 neighbours 352, 384 -> 384; 0.001 * 256 = 0.256 -> 0.25 (e4m3 normal 2^-2)
    assert q[1, :2].float().tolist() == [384.0, 0.25]
    assert torch.equal(q[2].view(torch.uint8), torch.zeros(32, dtype=torch.uint8))
    d = quant.dequantize_mxfp8(q, s)
    assert d[0, :4].tolist() == [7.0, 1.0, -0.5, 3.0]


def test_mxfp8_rule_never_saturates():
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(64, 256, generator=g) * torch.exp2(torch.randint(-20, 20, (64, 1), generator=g).float()))
    q, s = quant.mxfp8_quantize_reference(x.to(torch.bfloat16))
    assert float(q.float().abs().max()) < 384 + 1e-6
    assert not torch.isnan(q.float()).any()


def test_mxfp8_reference_backend_and_rejections():
    x = _inputs(8, 128, seed=2)
    with use_backend("reference"):
        q, s = mm.mxfp8_quantize(x)
    rq, rs = quant.mxfp8_quantize_reference(x)
    assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8)) and torch.equal(s, rs)
    with pytest.raises(TypeError, match="out_codes"):
        mm.mxfp8_quantize(x, out_codes=torch.zeros(8, 128, dtype=torch.uint8))


def _a8(L):
    """MXFP8 activations of L.x and their exact decoding."""
    q, s = quant.mxfp8_quantize_reference(L.x)
    return q, s, quant.dequantize_mxfp8(q, s).double()


@pytest.mark.parametrize("bm,nt", [(16, 1), (32, 2), (48, 1)])
def test_a8w4_none_vs_dense(gfx950, bm, nt):
    """fp8 x fp4 on the scaled MFMA == the float64 product of the decoded operands (stock weights)."""
    L = Layer(T=12, top_k=3, E=5, K=384, nb=256, seed=bm + 1)
    q, s, a = _a8(L)
    sid, eid, ntpp, nblk = L.align(bm)
    C = torch.full((L.nvt, L.nb), float("nan"), dtype=torch.bfloat16)
    a4w4.launch_a4w4(q, s, L.B, L.Bs, C, None, None, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k, mm.EPI_NONE, False,
                     nt=nt)
    ref = _dense_from(L, a, L.top_k)
    # the products are exact in fp32 per 32 k; what is left is fp32 accumulation and the bf16 output rounding
    assert _rel(C, ref) < 4e-3


@pytest.mark.parametrize("bm", [16, 48])
def test_a8w4_silu_and_down(gfx950, bm):
    """Gate/up with SwiGLU and the routed weight, then the MXFP8 intermediate through the down op."""
    L = Layer(T=10, top_k=2, E=4, K=256, nb=2 * 128, seed=31)
    q, s, a = _a8(L)
    sid, eid, ntpp, nblk = L.align(bm)
    C = torch.zeros(L.nvt, 128, dtype=torch.bfloat16)
    mm.mxfp4_moe_gateup_a8w4(q, s, L.B, L.Bs, C, L.tw, sid, eid, ntpp, nblk, bm, L.nvt, L.top_k, mm.EPI_SILU,
                             mul_routed_weight=True)
    acc = _dense_from(L, a, L.top_k)
    ref = _silu(acc[:, :128], acc[:, 128:]) * L.tw.reshape(-1, 1).double()
    assert _rel(C, ref) < 1e-2
    D = Layer(T=10, top_k=2, E=4, K=128, nb=256, seed=37)  # down weights over K = 128 (the intermediate)
    D.ids = L.ids
    hq, hs = mm.mxfp8_quantize(C)
    out = torch.zeros(L.nvt, 256, dtype=torch.bfloat16)
    mm.mxfp4_moe_down_a8w4(hq, hs, D.B, D.Bs, out, L.tw, sid, eid, ntpp, nblk, bm, L.nvt, 1, mul_routed_weight=True)
    ref2 = _dense_from(D, quant.dequantize_mxfp8(hq, hs).double(), 1) * L.tw.reshape(-1, 1).double()
    assert _rel(out, ref2) < 1e-2


def test_a8w4_reference_backend_equals_kernel_semantics():
    L = Layer(T=6, top_k=2, E=3, K=256, nb=2 * 128, seed=41)
    q, s, a = _a8(L)
    sid, eid, ntpp, nblk = L.align(16)
    C = torch.zeros(L.nvt, 128, dtype=torch.bfloat16)
    with use_backend("reference"):
        mm.mxfp4_moe_gateup_a8w4(q, s, L.B, L.Bs, C, None, sid, eid, ntpp, nblk, 16, L.nvt, L.top_k, mm.EPI_SILU)
    acc = _dense_from(L, a, L.top_k)
    assert _rel(C, _silu(acc[:, :128], acc[:, 128:])) < 1e-2


def test_a8w4_rejections():
    L = Layer(T=4, top_k=1, E=2, K=256, nb=256, seed=23)
    q, s, _ = _a8(L)
    sid, eid, ntpp, nblk = L.align(16)
    C = torch.zeros(L.nvt, 128, dtype=torch.bfloat16)
    args = (sid, eid, ntpp, nblk, 16, L.nvt, 1)
    with pytest.raises(TypeError, match="A"):
        mm.mxfp4_moe_gateup_a8w4(L.aq, L.as_, L.B, L.Bs, C, None, *args)   # MXFP4 codes are not MXFP8
    with pytest.raises(ValueError, match="A_scales"):
        mm.mxfp4_moe_gateup_a8w4(q, s[:, :4], L.B, L.Bs, C, None, *args)
    with pytest.raises(ValueError, match="K"):
        mm.mxfp4_moe_gateup_a8w4(q[:, :128], s[:, :4], L.B, L.Bs, C, None, *args)


# ------------------------------------------------------------------------------------------ ISA budgets
A4W4_VGPR_MAX = 160  # clang 22 today: 37 (bm16 nt1 none) .. 133 (bm48 nt2 gated, quantised output)
LAYER_VGPR_MAX = 240  # the one-launch layer at I = 512 holds 8 gate/up tiles: 152 (bm16) .. 229 (bm48)


def test_a4w4_code_object_budget():
    """Every a4w4 variant: no scratch, no AGPRs, VGPRs within budget, LDS exactly its staging; the scaled MFMA
    and no bf16 MFMA (nothing is dequantised); the quantiser uses no LDS."""
    import re
    from collections import Counter

    import moonmath_emu
    from moonmath_common.codeobject import CodeObject
    from moonmath_mxfp4_moe import kernel

    raw = kernel.KERNELS.path("test", "gfx950", "mxfp4_moe_a4w4").read_bytes()
    co = CodeObject.parse(raw)
    want = {f"mxfp4_moe_a4w4_bm{bm}_nt{nt}_{epi}" for bm in (16, 32, 48) for nt in (1, 2)
            for epi in ("none", "silu", "situ")}
    want |= {f"mxfp4_moe_a4w4_bm{bm}_nt2_{epi}_q" for bm in (16, 32, 48) for epi in ("silu", "situ")}
    want |= {f"mxfp4_moe_a4w4_down_bm{bm}_nt{nt}" for bm in (16, 32, 48) for nt in (1, 2)}
    want |= {f"mxfp4_moe_a4w4_layer_bm{bm}_i{i}_{epi}" for bm in (16, 32, 48) for i in a4w4.LAYER_INTERS
             for epi in ("silu", "situ")}
    want |= {f"mxfp4_moe_a8w4_bm{bm}_nt{nt}_{epi}" for bm in (16, 32, 48) for nt in (1, 2)
             for epi in ("none", "silu", "situ")}
    assert set(co.kernels) == want
    for name, k in co.kernels.items():
        bm = int(re.search(r"_bm(\d+)_", name).group(1))
        assert k.scratch == 0 and k.agpr == 0, name
        if "_layer_" in name:
            inter = int(re.search(r"_i(\d+)_", name).group(1))
            assert k.vgpr <= LAYER_VGPR_MAX, f"{name}: {k.vgpr} VGPRs"
            # stage-1 slab buffers + the intermediate (standard order codes, scale dwords) + its down operand
            assert k.lds == 2 * bm * (64 + 4) + bm * (inter // 2 + inter // 8) + (inter // 128) * bm * (64 + 4), name
            continue
        assert k.vgpr <= A4W4_VGPR_MAX, f"{name}: {k.vgpr} VGPRs"
        row = 128 if "_a8w4_" in name else 64
        slabs = a4w4.DOWN_MAX_K // 128 if "_down_" in name else 2
        assert k.lds == slabs * bm * (row + 4), name
    ops = Counter(text.split()[0] for kern, _, text in moonmath_emu.disassemble(raw))
    assert ops["v_mfma_scale_f32_16x16x128_f8f6f4"] > 0
    assert not any(op.startswith("v_mfma") and "scale" not in op for op in ops)
    q = CodeObject.parse(kernel.KERNELS.path("test", "gfx950", "mxfp4_quant").read_bytes())
    for name in ("mxfp4_quant_bf16", "mxfp8_quant_bf16"):
        assert q.kernels[name].lds == 0 and q.kernels[name].scratch == 0, name
