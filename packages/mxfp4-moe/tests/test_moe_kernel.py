"""The MXFP4 MoE kernels (gate/up with EPI_NONE / EPI_SITU, down) on the emulator, every test on gfx942 and
on gfx950 (the a16w4 build; fixture kernel_arch in conftest.py).

Reference: a dense fp64 product built from the STOCK (never repacked) weights and the decoded E8M0 scales,
independent of the package's repack and reference code. Metric: max|d| / max|ref| over live rows < 2e-2
(the seed's), and the kernels are held to 1e-2 here. Sizes fit CI (about 80 s on 2 cores; the list is in
docs/kernels/mxfp4_moe_gfx942.md); `gpu`-marked tests run the full Kimi-K3 TP8 shapes on hardware only.

Runs on the `emu` backend (moonmath-emu) unless a GPU is present (`hip`).
"""
from __future__ import annotations

import math

import pytest
import torch

import moonmath_mxfp4_moe as mm
from moonmath_common import get_backend, use_backend
from moonmath_common.testing import lazy_empty
from moonmath_mxfp4_moe import kernel

BETA, LIN = 4.0, 25.0
TOL = 1e-2
E2M1 = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64)
SENTINEL = 0x7FC1  # a NaN payload the kernels never produce (they write 0x7FFF for NaN)


def _backend() -> str:
    try:
        import moonmath_emu  # noqa: F401
    except ImportError:
        return "none"
    return "emu"


pytestmark = pytest.mark.skipif(_backend() == "none", reason="needs moonmath-emu (or a GPU)")


@pytest.fixture(autouse=True)
def _kernel_backend(kernel_arch):
    with use_backend("hip" if get_backend() == "hip" else "emu"):
        yield


def _dev():
    return "cuda" if get_backend() == "hip" else "cpu"


def _on(*ts):
    d = _dev()
    return [t.to(d) if isinstance(t, torch.Tensor) else t for t in ts]


class Problem:
    """Random MoE layer: stock weights [E, N, K/2] + scales [E, N, K/32], routing [T, top_k]."""

    def __init__(self, T, top_k, E, K, N, seed=0, scale_lo=120, scale_hi=133, hot=None):
        g = torch.Generator().manual_seed(seed)
        self.T, self.top_k, self.E, self.K, self.N = T, top_k, E, K, N
        self.A = torch.randn(T, K, generator=g).to(torch.bfloat16)
        self.w = torch.randint(0, 256, (E, N, K // 2), generator=g, dtype=torch.uint8)
        self.s = torch.randint(scale_lo, scale_hi + 1, (E, N, K // 32), generator=g, dtype=torch.uint8)
        pool = E if hot is None else hot  # hot < E: every token draws from the first `hot` experts
        self.ids = torch.stack([torch.randperm(pool, generator=g)[:top_k] for _ in range(T)]).to(torch.int32)
        self.tw = torch.rand(T, top_k, generator=g)
        self.B = mm.repack_mxfp4(self.w)
        self.Bs = mm.repack_mxfp4_scales(self.s)

    @property
    def nvt(self):
        return self.T * self.top_k

    def dense(self, A=None, a_row_div=None):
        """fp64 [nvt, N]: slot s -> A[s // a_row_div] . W[expert(s)]^T, from the stock layout."""
        A = self.A if A is None else A
        div = self.top_k if a_row_div is None else a_row_div
        out = torch.empty(self.nvt, self.N, dtype=torch.float64)
        flat = self.ids.reshape(-1).long()
        slots = torch.arange(self.nvt)
        for e in torch.unique(flat).tolist():  # one expert's weights at a time (896 experts stay small)
            nib = torch.stack([self.w[e] & 15, self.w[e] >> 4], -1).reshape(self.N, -1).long()
            # The weights by definition: E2M1 * 2^(e - 127) in fp32 (inf on overflow, NaN for e = 0xFF).
            scale = torch.exp2(self.s[e].float() - 127)
            scale[self.s[e] == 0xFF] = float("nan")
            W = (E2M1.float()[nib] * scale.repeat_interleave(32, -1)).double()
            mine = slots[flat == e]
            out[mine] = A[mine // div].double() @ W.t()
        return out


def situ(acc):
    n = acc.shape[1] // 2
    g, u = acc[:, :n], acc[:, n:]
    return (BETA * torch.tanh(g / BETA) * torch.sigmoid(g)) * (LIN * torch.tanh(u / LIN))


def rel_err(got, ref):
    got = got.double()
    return float((got - ref).abs().max() / ref.abs().max())


def bits(t):
    return t.view(torch.int16)


def run_gateup(p: Problem, block_m, epilogue, routed, nt=None, A=None, top_k=None, align=None, C=None):
    top_k = p.top_k if top_k is None else top_k
    sid, eid, ntpp, nblk = align if align is not None else mm.moe_align_block_size(p.ids, block_m, p.E)
    n_out = p.N // 2 if epilogue == mm.EPI_SITU else p.N
    if C is None:
        C = torch.full((p.nvt, n_out), 0, dtype=torch.int16).fill_(SENTINEL).view(torch.bfloat16)
    args = _on(p.A if A is None else A, p.B, p.Bs, C, p.tw, sid, eid, ntpp)
    kernel.launch_gateup(*args, nblk, block_m, p.nvt, top_k, epilogue, routed, BETA, LIN, nt=nt)
    return args[3].cpu()


def run_down(p: Problem, A, block_m, nt, n_steps, routed, align=None):
    sid, eid, ntpp, nblk = align if align is not None else mm.moe_align_block_size(p.ids, block_m, p.E)
    C = torch.full((p.nvt, p.N), 0, dtype=torch.int16).fill_(SENTINEL).view(torch.bfloat16)
    args = _on(A, p.B, p.Bs, C, p.tw, sid, eid, ntpp)
    kernel.launch_down(*args, nblk, block_m, n_steps, nt, p.nvt, 1, routed)
    return args[3].cpu()


def expected(p: Problem, epilogue, routed, A=None, a_row_div=None):
    ref = p.dense(A, a_row_div)
    if epilogue == mm.EPI_SITU:
        ref = situ(ref)
    if routed:
        ref = ref * p.tw.reshape(-1, 1).double()
    return ref


# --- accuracy against the dense reference ----------------------------------------------------------

# Kimi-K3 TP8 proportions (K = 3584, I = 384, top-16) with the experts reduced: decode (1 and 8 tokens
# over 64 experts: most of each tile is padding) and prefill-like (64 tokens over 16 experts: every
# expert hit, block_m 48).
KIMI = [
    pytest.param(1, 64, mm.EPI_SITU, True, id="T1-E64-situ-routed"),
    pytest.param(8, 64, mm.EPI_NONE, False, id="T8-E64-none"),
    pytest.param(24, 32, mm.EPI_SITU, False, id="T24-E32-situ"),
    pytest.param(64, 16, mm.EPI_NONE, True, id="T64-E16-none-routed"),
]


@pytest.mark.parametrize("T,E,epilogue,routed", KIMI)
def test_gateup_kimi_scaled(T, E, epilogue, routed):
    p = Problem(T, 16, E, 3584, 2 * 384, seed=T)
    bm = mm.mxfp4_moe_gateup_block_m(p.nvt, int(torch.unique(p.ids).numel()))
    got = run_gateup(p, bm, epilogue, routed)
    assert rel_err(got, expected(p, epilogue, routed)) < TOL


@pytest.mark.parametrize("I,K,epilogue,routed,block_m", [
    (512, 512, mm.EPI_SITU, True, 32),
    (768, 256, mm.EPI_SITU, False, 48),
    (768, 384, mm.EPI_NONE, True, 16),
    # K and I that are not multiples of 256 (nor of 128 / 16): served, not rejected.
    (200, 416, mm.EPI_SITU, True, 32),    # 13 k-blocks of 32: a partial last slab
    (202, 96, mm.EPI_NONE, False, 48),    # N = 404 (not a multiple of 16), K < one slab
    (101, 160, mm.EPI_SITU, False, 16),   # N_out = 101: odd, 2-byte stores on the edge
])
def test_gateup_shapes(I, K, epilogue, routed, block_m):
    p = Problem(12, 4, 8, K, 2 * I, seed=I + K)
    got = run_gateup(p, block_m, epilogue, routed)
    assert rel_err(got, expected(p, epilogue, routed)) < TOL


# nt 0 (the shared gate/up tile of the decode planner): Kimi-K3 widths, a ragged and an odd N_out (the
# 64-column workgroups end mid-wave), routed and not, under SituGLU; SwiGLU in test_moe_silu.py.
@pytest.mark.parametrize("T,I,K,routed", [(8, 384, 3584, True), (12, 200, 416, False), (5, 101, 160, True)])
def test_gateup_shared_tile(T, I, K, routed):
    p = Problem(T, 4, 8, K, 2 * I, seed=T + I)
    got = run_gateup(p, 16, mm.EPI_SITU, routed, nt=0)
    assert not (bits(got) == SENTINEL).any()
    assert rel_err(got, expected(p, mm.EPI_SITU, routed)) < TOL
    assert torch.equal(bits(got), bits(run_gateup(p, 16, mm.EPI_SITU, routed, nt=1)))


@pytest.mark.parametrize("K,N,T,block_m,routed", [
    (384, 3584, 6, 16, True),   # Kimi-K3 TP8 down: N = hidden 3584
    (512, 1024, 8, 32, False),
    (768, 640, 10, 32, True),
    (384, 512, 40, 64, True),
])
def test_down(K, N, T, block_m, routed):
    p = Problem(T, 4, 6, K, N, seed=K + T)
    # The down input is the gate/up output: one row per slot (row = slot, so top_k = 1 for A).
    A = torch.randn(p.nvt, K, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    plan_nt = 2 if N % 2 == 0 else 1
    got = run_down(p, A, block_m, plan_nt, 2, routed)
    assert rel_err(got, expected(p, mm.EPI_NONE, routed, A=A, a_row_div=1)) < TOL


# --- invariance: planner choices never change a bit ------------------------------------------------

def _live(C, nvt):
    return bits(C[:nvt])


def test_gateup_invariant_to_block_m_and_nt():
    p = Problem(10, 4, 6, 640, 2 * 256, seed=3)
    for epilogue, nts in ((mm.EPI_NONE, (1, 2, 3)), (mm.EPI_SITU, (0, 1, 2))):
        outs = []
        for bm in (16, 32, 48):
            for nt in nts:
                if nt == 0 and bm != 16:
                    continue  # the shared tile is a block_m 16 (decode) variant
                outs.append(((bm, nt), run_gateup(p, bm, epilogue, True, nt=nt)))
        first = outs[0][1]
        assert not (bits(first) == SENTINEL).any()
        for key, C in outs[1:]:
            assert torch.equal(bits(C), bits(first)), f"epilogue {epilogue}: {key} differs from {outs[0][0]}"


def test_down_invariant_and_equal_to_gateup_none():
    p = Problem(12, 4, 6, 384, 1280, seed=5)
    A = torch.randn(p.nvt, 384, generator=torch.Generator().manual_seed(9)).to(torch.bfloat16)
    total = math.ceil(1280 / 128)
    ref = None
    for bm in (16, 32, 64):
        for nt in (1, 2):
            for n_steps in sorted({1, 2, 3, 7, total}):
                C = run_down(p, A, bm, nt, n_steps, True)
                ref = C if ref is None else ref
                assert torch.equal(bits(C), bits(ref)), f"down bm={bm} nt={nt} n_steps={n_steps} differs"
    # Same chain as the gate/up kernel with EPI_NONE (the fallback at K the down kernel does not serve).
    g = run_gateup(p, 32, mm.EPI_NONE, True, A=A, top_k=1)
    assert torch.equal(bits(g), bits(ref))


# --- rows: padding, skipped blocks, untouched rows ---------------------------------------------------

def test_padding_and_negative_experts_never_written():
    p = Problem(5, 2, 8, 256, 256, seed=11)
    sid, eid, ntpp, nblk = mm.moe_align_block_size(p.ids, 16, p.E)
    # Drop the first block's expert: its rows must stay untouched. Add a capacity block past ntpp whose
    # sorted ids name live slots: it must be skipped too.
    eid = eid.clone()
    dropped = sid[:16][sid[:16] < p.nvt].long()
    eid[0] = -1
    sid = torch.cat([sid, torch.arange(16, dtype=torch.int32) % p.nvt])
    eid = torch.cat([eid, torch.tensor([1], dtype=torch.int32)])
    C = run_gateup(p, 16, mm.EPI_NONE, False, align=(sid, eid, ntpp, nblk + 1))
    written = torch.ones(p.nvt, dtype=torch.bool)
    written[dropped] = False
    assert (bits(C[~written]) == SENTINEL).all()
    ref = expected(p, mm.EPI_NONE, False)
    assert rel_err(C[written], ref[written]) < TOL
    # C with rows beyond num_valid_tokens: those are never written.
    C2 = torch.full((p.nvt + 7, p.N), 0, dtype=torch.int16).fill_(SENTINEL).view(torch.bfloat16)
    run_gateup(p, 16, mm.EPI_NONE, False, C=C2)
    assert (bits(C2[p.nvt:]) == SENTINEL).all()
    assert not (bits(C2[: p.nvt]) == SENTINEL).any()


def test_nan_inf_and_determinism():
    p = Problem(4, 2, 4, 256, 128, seed=13)
    A = p.A.clone()
    A[0, 5] = float("nan")
    A[1, 7] = float("inf")
    C1 = run_gateup(p, 16, mm.EPI_NONE, False, A=A)
    C2 = run_gateup(p, 16, mm.EPI_NONE, False, A=A)
    assert torch.equal(bits(C1), bits(C2))
    slots = torch.arange(p.nvt)
    nan_rows = slots // p.top_k == 0
    assert (bits(C1[nan_rows]) == 0x7FFF).all()  # canonical NaN, every column
    row1 = C1[slots // p.top_k == 1].float()
    assert not torch.isfinite(row1).all()  # inf * w is +-inf, or NaN where w == 0
    assert ((bits(C1[slots // p.top_k == 1]) == 0x7FFF) | torch.isinf(row1)).all()
    rest = slots // p.top_k >= 2
    assert torch.isfinite(C1[rest].float()).all()


def test_routed_weight_under_situ_applied_after_glu():
    p = Problem(6, 2, 4, 256, 256, seed=17)
    plain = run_gateup(p, 16, mm.EPI_SITU, False).double()
    routed = run_gateup(p, 16, mm.EPI_SITU, True).double()
    w = p.tw.reshape(-1, 1).double()
    assert rel_err(routed, plain * w) < TOL
    assert rel_err(routed, expected(p, mm.EPI_SITU, True)) < TOL


@pytest.mark.gpu
@pytest.mark.parametrize("T", [8, 32])
def test_kimi_k3_full_decode_gpu(T):
    if get_backend() != "hip":
        pytest.skip("hardware-only size")
    p = Problem(T, 16, 896, 3584, 768, seed=T)
    bm = mm.mxfp4_moe_gateup_block_m(p.nvt, int(torch.unique(p.ids).numel()))
    got = run_gateup(p, bm, mm.EPI_SITU, False)
    assert rel_err(got, expected(p, mm.EPI_SITU, False)) < TOL


# --- through the public ops (validation + custom op + kernel) ------------------------------------------

def test_public_ops_kernel_vs_reference_backend():
    p = Problem(6, 4, 8, 512, 2 * 384, seed=23)
    nvt = p.nvt
    bm = mm.mxfp4_moe_gateup_block_m(nvt, int(torch.unique(p.ids).numel()))
    sid, eid, ntpp, nblk = mm.moe_align_block_size(p.ids, bm, p.E)
    outs = {}
    for backend in ("emu", "reference"):
        with use_backend(backend):
            h = torch.zeros(nvt, 384, dtype=torch.bfloat16)
            mm.mxfp4_moe_gateup(p.A, p.B, p.Bs, h, p.tw, sid, eid, ntpp, nblk, bm, nvt, p.top_k,
                                epilogue=mm.EPI_SITU, mul_routed_weight=True, situ_beta=BETA, situ_linear_beta=LIN)
            outs[backend] = h
    assert rel_err(outs["emu"], outs["reference"].double()) < TOL

    q = Problem(6, 4, 8, 384, 640, seed=29)
    h = outs["reference"]
    dbm, dnt, steps = mm.mxfp4_moe_down_plan(nvt, int(torch.unique(q.ids).numel()), 640, 384, 0, num_cus=304)
    dsid, deid, dntpp, dnblk = mm.moe_align_block_size(q.ids, dbm, q.E)
    for backend in ("emu", "reference"):
        with use_backend(backend):
            y = torch.zeros(nvt, 640, dtype=torch.bfloat16)
            mm.mxfp4_moe_down(h, q.B, q.Bs, y, q.tw, dsid, deid, dntpp, dnblk, dbm, steps, dnt, nvt, 1, True)
            outs[backend] = y
    assert rel_err(outs["emu"], outs["reference"].double()) < TOL


def test_scale_extremes_match_reference():
    """E8M0 edge bytes: 0 and 1 (weights down to bf16 subnormals), 253/254 (products overflowing to inf),
    0xFF (NaN scale). Non-finite outputs must sit where the dense reference has them (inf + -inf = NaN
    does not depend on the summation order), finite ones within tolerance; the tiny column is compared
    against its own magnitude."""
    p = Problem(6, 2, 3, 256, 64, seed=31)
    p.s[:, 0, :] = 1            # column 0: every weight c * 2^-126 (0.5 -> a bf16 subnormal)
    p.s[:, 1, :] = 0            # column 1: c * 2^-127 (0.5 and 1 -> subnormals)
    p.s[:, 2, 2] = 0xFF         # column 2: one NaN scale -> NaN outputs
    p.s[:, 3, 5] = 254          # column 3: a single 6 * 2^127 = inf weight at k = 160, the rest of that block 0
    p.w[:, 3, 80:96] = 0
    p.w[:, 3, 80] = 0x07
    p.s[:, 4, 0] = 253          # column 4: 4 * 2^126 and 6 * 2^126 overflow, 3 * 2^126 does not
    p.B = mm.repack_mxfp4(p.w)
    p.Bs = mm.repack_mxfp4_scales(p.s)
    got = run_gateup(p, 16, mm.EPI_NONE, False).double()
    exact = expected(p, mm.EPI_NONE, False)
    ref = exact.to(torch.bfloat16).double()  # for the non-finite pattern: beyond bf16's range is inf
    assert torch.equal(torch.isnan(got), torch.isnan(ref))
    assert torch.equal(torch.isinf(got), torch.isinf(ref))
    inf = torch.isinf(ref)
    assert inf[:, 3].all() and torch.isnan(ref[:, 2]).all()
    assert torch.equal(torch.sign(got[inf]), torch.sign(ref[inf]))
    fin = torch.isfinite(ref)
    fin[:, :2] = False
    assert float((got[fin] - exact[fin]).abs().max() / exact[fin].abs().max()) < TOL
    for col in (0, 1):
        assert rel_err(got[:, col], exact[:, col]) < TOL, f"column {col} (subnormal weights)"


def test_misaligned_views():
    """A and C as views that start 2 bytes past an aligned address (C rows then all misaligned for 8-byte
    stores): same bits as aligned tensors. B off 16 bytes is refused."""
    p = Problem(5, 2, 4, 256, 128, seed=37)
    ref = run_gateup(p, 16, mm.EPI_NONE, True)
    A_store = torch.empty(p.A.numel() + 1, dtype=torch.bfloat16)
    A = A_store[1:].view(p.A.shape)
    A.copy_(p.A)
    C_store = torch.zeros(p.nvt * p.N + 1, dtype=torch.int16)
    C = C_store[1:].view(p.nvt, p.N)
    C.fill_(SENTINEL)
    got = run_gateup(p, 16, mm.EPI_NONE, True, A=A, C=C.view(torch.bfloat16))
    assert A.data_ptr() % 16 == 2 and C.data_ptr() % 8 == 2
    assert torch.equal(bits(got), bits(ref))
    B_store = torch.empty(p.B.numel() + 1, dtype=torch.uint8)
    B = B_store[1:].view(p.B.shape)
    B.copy_(p.B)
    sid, eid, ntpp, nblk = mm.moe_align_block_size(p.ids, 16, p.E)
    with pytest.raises(ValueError, match="16-byte boundary"):
        kernel.launch_gateup(p.A, B, p.Bs, ref.clone(), None, sid, eid, ntpp, nblk, 16, p.nvt, p.top_k,
                             mm.EPI_NONE, False)


# --- operands beyond 2 GiB (32-bit buffer offsets up to 4 GiB - 1) ----------------------------------

@pytest.mark.parametrize("which", ["gateup", "down"])
def test_operands_beyond_2gib(which):
    """A and C of more than 2 GiB (a 32,768-token prefill's C is 3.5 GiB): every live row sits past byte
    2^31 of both, and A holds NaN at byte 2^31 (where an out-of-range marker of 2^31 would now land
    inside the buffer): the rows must equal the same problem run on small tensors, bit for bit. The
    gate/up case has K = 160, so its last slab's k >= K lanes take the out-of-range offset."""
    K, N = (160, 256) if which == "gateup" else (384, 256)
    p = Problem(T=40, top_k=1, E=4, K=K, N=N, seed=77)
    bm = 16
    sid, eid, ntpp, nblk = mm.moe_align_block_size(p.ids, bm, p.E)
    small = (run_gateup(p, bm, mm.EPI_NONE, True, align=(sid, eid, ntpp, nblk)) if which == "gateup"
             else run_down(p, p.A, bm, 1, 1, True, align=(sid, eid, ntpp, nblk)))

    rows = (1 << 32) // (2 * max(K, N)) - 64  # the larger of A, C just under 4 GiB, both past 2 GiB
    first = rows - p.T
    A = lazy_empty(rows * K, torch.bfloat16).view(rows, K)
    C = lazy_empty(rows * N, torch.bfloat16).view(rows, N)
    assert min(A.numel(), C.numel()) * 2 > (1 << 31) and first * K * 2 > (1 << 31)
    A.view(-1)[(1 << 30) - 64:(1 << 30) + 64] = float("nan")  # bytes around 2^31
    A[first:] = p.A
    C[first:].view(torch.int16).fill_(SENTINEL)
    tw = lazy_empty(rows, torch.float32)
    tw[first:] = p.tw.reshape(-1)
    big_sid = torch.where(sid < p.nvt, sid + first, torch.full_like(sid, rows))  # padding stays >= nvt
    args = _on(A, p.B, p.Bs, C, tw, big_sid, eid, ntpp)
    if which == "gateup":
        kernel.launch_gateup(*args, nblk, bm, rows, 1, mm.EPI_NONE, True)
    else:
        kernel.launch_down(*args, nblk, bm, 1, 1, rows, 1, True)
    assert torch.equal(bits(args[3][first:].cpu()), bits(small))


def test_buffer_limit_is_4gib():
    """The launcher refuses a buffer only past 4 GiB - 1 bytes, naming it; the weights are bounded by
    the offsets the kernel forms (its tile padding and one-slab prefetch included)."""
    kernel._check_ranges("op", A=(1 << 32) - 16, C=(1 << 32) - 1)
    with pytest.raises(ValueError, match=r"C spans 4294967296 bytes.*4 GiB"):
        kernel._check_ranges("op", C=1 << 32)
    assert kernel._weight_reach(K=384, nb=7168) < 1 << 32
    with pytest.raises(ValueError, match="B_per_expert"):
        kernel._check_ranges("op", B_per_expert=kernel._weight_reach(K=8192, nb=(1 << 32) // 4096))
