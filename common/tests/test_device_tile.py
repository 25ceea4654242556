"""moonmath/tile.hpp on moonmath-emu, both archs: every fragment layout element by element against the
MFMA layout facts, mma against torch, every reduction, broadcast, packing mode, LDS swizzle/staging
and the online softmax over fragments.

The layout facts below are written in the register -> element direction of AMD's Matrix Instruction
Calculator (CDNA3 `--detail-instruction`), independently of the header's formulas; the mma tests then
tie them to the emulator's MFMA, which packages/emu checks against the same calculator facts.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import moonmath_emu as emu
from moonmath_common.numerics import round_bf16

SRC = Path(__file__).parent / "device" / "tile.hip"
ARCHS = ["gfx942", "gfx950"]

# name: (M, N, K, element bits, A/B dwords per lane, archs)
SHAPES = {
    "bf16_16x16x16": (16, 16, 16, 16, 2, ARCHS),
    "bf16_32x32x8": (32, 32, 8, 16, 2, ARCHS),
    "fp8_16x16x32": (16, 16, 32, 8, 2, ARCHS),
    "fp8_32x32x16": (32, 32, 16, 8, 2, ARCHS),
    "bf16_16x16x32": (16, 16, 32, 16, 4, ["gfx950"]),
    "bf16_32x32x16": (32, 32, 16, 16, 4, ["gfx950"]),
}
SHAPE_ARCH = [(n, a) for n, v in SHAPES.items() for a in v[5]]


@pytest.fixture(scope="module")
def modules(compile_hip):
    return {a: emu.Module(compile_hip(SRC, a)) for a in ARCHS}


# ------------------------------------------------------------------------------ layout facts
def fact_ab(M, K, elems, lane, e):
    """(row of A / col of B, k) held by element e of `lane`: lane group g = lane // M holds the g-th
    run of `elems` consecutive k (calculator: A[i][k] in lane i + M*(k // elems), item k % elems)."""
    return lane % M, (lane // M) * elems + e


def fact_c(M, N, lane, r):
    """(row, col) of C/D register r in `lane`: blocks of 4 rows, lane groups interleaved per block
    of 4 registers (calculator: D[i][j] in lane j + N*((i // 4) % G), register 4*(i // (4G)) + i % 4)."""
    G = 64 // N
    return 4 * G * (r // 4) + 4 * (lane // N) + r % 4, lane % N


def c_index(M, N):
    """idx[lane][r] = flat row-major index of the C element in register r of lane."""
    regs = M * N // 64
    return torch.tensor([[fact_c(M, N, lane, r)[0] * N + fact_c(M, N, lane, r)[1] for r in range(regs)]
                         for lane in range(64)])


@pytest.mark.parametrize("name,arch", SHAPE_ARCH)
def test_layout_helpers_match_calculator_facts(modules, name, arch):
    M, N, K, bits, words, _ = SHAPES[name]
    elems, regs = words * 32 // bits, M * N // 64
    width = 3 + elems + regs
    out = torch.full((64 * width,), -1, dtype=torch.int32)
    modules[arch].launch(f"t_layout_{name}", grid=(1, 1, 1), block=(64, 1, 1), args=[out])
    out = out.view(64, width)
    for lane in range(64):
        assert out[lane, 0] == lane % M and out[lane, 1] == lane % N and out[lane, 2] == lane % N
        for e in range(elems):
            assert out[lane, 3 + e] == fact_ab(M, K, elems, lane, e)[1], (lane, e)
        for r in range(regs):
            assert out[lane, 3 + elems + r] == fact_c(M, N, lane, r)[0], (lane, r)
    # every element of A/B and of C is held exactly once
    ab = {fact_ab(M, K, elems, lane, e) for lane in range(64) for e in range(elems)}
    assert len(ab) == M * K
    assert sorted(c_index(M, N).flatten().tolist()) == list(range(M * N))


def _codes(shape, bits, seed):
    """A tile whose elements are their own (row, k) ids: 16-bit ids for bf16; for fp8 two tiles,
    one holding the row and one the k (8 bits cannot name M*K elements)."""
    M, K = shape
    i, k = torch.meshgrid(torch.arange(M), torch.arange(K), indexing="ij")
    if bits == 16:
        return [(i * K + k).to(torch.int16).contiguous().view(torch.uint8)]
    return [i.to(torch.uint8).contiguous(), k.to(torch.uint8).contiguous()]


@pytest.mark.parametrize("name,arch", SHAPE_ARCH)
def test_fragment_loads_place_every_element(modules, name, arch):
    M, N, K, bits, words, _ = SHAPES[name]
    elems = words * 32 // bits
    a_tiles, b_tiles = _codes((M, K), bits, 0), _codes((N, K), bits, 1)
    got = []
    for at, bt in zip(a_tiles, b_tiles):
        oa, ob = torch.zeros(64 * words, dtype=torch.int32), torch.zeros(64 * words, dtype=torch.int32)
        modules[arch].launch(f"t_load_{name}", grid=(1, 1, 1), block=(64, 1, 1), args=[at, bt, oa, ob])
        dt = torch.int16 if bits == 16 else torch.uint8
        got.append((oa.view(dt).view(64, elems).to(torch.int64) & 0xFFFF,
                    ob.view(dt).view(64, elems).to(torch.int64) & 0xFFFF))
    for lane in range(64):
        for e in range(elems):
            x, k = fact_ab(M, K, elems, lane, e)
            if bits == 16:
                assert got[0][0][lane, e] == x * K + k and got[0][1][lane, e] == x * K + k, (lane, e)
            else:
                assert got[0][0][lane, e] == x and got[1][0][lane, e] == k, (lane, e)
                assert got[0][1][lane, e] == x and got[1][1][lane, e] == k, (lane, e)


def _operands(name, arch, g):
    M, N, K, bits, _, _ = SHAPES[name]
    if bits == 16:
        a = torch.randn(M, K, generator=g).to(torch.bfloat16)
        bt = torch.randn(N, K, generator=g).to(torch.bfloat16)
        return a.view(torch.uint8), bt.view(torch.uint8), a.double(), bt.double()
    dt = torch.float8_e4m3fnuz if arch == "gfx942" else torch.float8_e4m3fn
    a = (torch.randn(M, K, generator=g) * 4).to(dt)
    bt = (torch.randn(N, K, generator=g) * 4).to(dt)
    return a.view(torch.uint8), bt.view(torch.uint8), a.double(), bt.double()


@pytest.mark.parametrize("name,arch", SHAPE_ARCH)
def test_mma_matches_torch(modules, name, arch):
    M, N, K, *_ = SHAPES[name]
    g = torch.Generator().manual_seed(hash(name) % 1000)
    a, bt, ad, btd = _operands(name, arch, g)
    c = torch.randn(M, N, generator=g)
    d = torch.zeros(M, N)
    modules[arch].launch(f"t_mma_{name}", grid=(1, 1, 1), block=(64, 1, 1), args=[a, bt, c, d])
    want = ad @ btd.T + c.double()
    torch.testing.assert_close(d.double(), want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------- reductions and maps
C_SHAPES = [("c16", 16), ("c32", 32)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("cname,M", C_SHAPES)
def test_row_and_col_reductions(modules, arch, cname, M):
    g = torch.Generator().manual_seed(M)
    x, y = torch.randn(M, M, generator=g) * 10, torch.randn(M, M, generator=g) * 10
    x[2, 5] = float("-inf")  # a -inf never wins a max and makes its row/col sum -inf
    regs = M * M // 64
    rows, cols = torch.zeros(4 * 64 * regs), torch.zeros(4 * 64)
    modules[arch].launch(f"t_reduce_{cname}", grid=(1, 1, 1), block=(64, 1, 1), args=[x, y, rows, cols])
    rows, cols = rows.view(4, 64, regs), cols.view(4, 64)
    xy = torch.cat([x, y], 1)     # two fragments side by side: rows of 2M
    x_y = torch.cat([x, y], 0)    # stacked: columns of 2M
    row_want = [x.amax(1), x.double().sum(1), xy.amax(1), xy.double().sum(1)]
    col_want = [x.amax(0), x.double().sum(0), x_y.amax(0), x_y.double().sum(0)]
    for q in range(4):
        for lane in range(64):
            for r in range(regs):
                i, _ = fact_c(M, M, lane, r)
                torch.testing.assert_close(rows[q, lane, r].double(), row_want[q][i].double(), rtol=2e-6, atol=1e-5)
            torch.testing.assert_close(cols[q, lane].double(), col_want[q][lane % M].double(), rtol=2e-6, atol=1e-5)
    # every lane that shares a row (a column) holds the same bits
    for q in range(4):
        for lane in range(64):
            for r in range(regs):
                i, _ = fact_c(M, M, lane, r)
                peers = [(l2, r2) for l2 in range(64) for r2 in range(regs) if fact_c(M, M, l2, r2)[0] == i]
                vals = {rows[q, l2, r2].view(torch.int32).item() for l2, r2 in peers}
                assert len(vals) == 1, (q, lane, r)
        same_col = cols[q].view(torch.int32).view(64 // M, M)
        assert torch.all(same_col == same_col[0]), q


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("cname,M", C_SHAPES)
def test_broadcasts_and_maps(modules, arch, cname, M):
    g = torch.Generator().manual_seed(10 + M)
    x = torch.randn(M, M, generator=g) * 4
    rv, cv = torch.randn(M, generator=g), torch.randn(M, generator=g)
    out = torch.zeros(6, M, M)
    modules[arch].launch(f"t_maps_{cname}", grid=(1, 1, 1), block=(64, 1, 1), args=[x, rv, cv, out])
    assert torch.equal(out[0], x * rv[:, None])
    assert torch.equal(out[1], x - rv[:, None])
    assert torch.equal(out[2], x * cv[None, :])
    assert torch.equal(out[3], x - cv[None, :])
    torch.testing.assert_close(out[4], torch.exp2(x.double()).float(), rtol=3e-7, atol=0)  # v_exp_f32: 1 ulp
    assert torch.equal(out[5], x * 0.75)
    ids = torch.zeros(M, M)
    modules[arch].launch(f"t_apply_{cname}", grid=(1, 1, 1), block=(64, 1, 1), args=[ids])
    i, j = torch.meshgrid(torch.arange(M), torch.arange(M), indexing="ij")
    assert torch.equal(ids, (1000 * i + j).float())


def _bits16(t):
    return t.view(torch.int16).to(torch.int64) & 0xFFFF


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("cname,M", C_SHAPES)
def test_pack_bf16_every_mode(modules, arch, cname, M):
    g = torch.Generator().manual_seed(20 + M)
    x = torch.randn(M * M, generator=g) * 100
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0 + 2**-8, 1.0 + 3 * 2**-8,
                            -(1.0 + 2**-8), 3.3895313892515355e38, -3.3895313892515355e38, 1e-40, -1e-40])
    nans = torch.tensor([0x7FC00001, 0xFFFF0000 - 2**32, 0x7F800001, 0x7FFFFFFF], dtype=torch.int64)
    special = torch.cat([special, nans.to(torch.int32).view(torch.float32)])
    x[: special.numel()] = special
    x = x.view(M, M).contiguous()
    regs = M * M // 64
    words = torch.zeros(3 * 64 * (regs // 2), dtype=torch.int32)
    ct = torch.zeros(M, M, dtype=torch.int16)
    modules[arch].launch(f"t_pack_{cname}", grid=(1, 1, 1), block=(64, 1, 1), args=[x, words, ct])
    words = words.view(3, 64, regs // 2).to(torch.int64) & 0xFFFFFFFF
    idx = c_index(M, M)
    for q, mode in enumerate(["rtne", "rtna", "rtz"]):
        want = _bits16(round_bf16(x.flatten(), mode))[idx]  # [lane][reg]
        got = torch.stack([words[q] & 0xFFFF, words[q] >> 16], -1).view(64, regs)
        assert torch.equal(got, want), mode
    assert torch.equal(_bits16(ct), _bits16(round_bf16(x, "rtne")).T)
    assert torch.all(_bits16(ct)[_bits16(round_bf16(x, "rtne")).T == 0x7FFF] == 0x7FFF)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("M", [16, 32])
def test_packed_c_is_b_operand(modules, arch, M):
    g = torch.Generator().manual_seed(30 + M)
    a = torch.randn(M, M, generator=g).to(torch.bfloat16)
    x = torch.randn(M, M, generator=g)
    d = torch.zeros(M, M)
    modules[arch].launch(f"t_c_as_b{M}", grid=(1, 1, 1), block=(64, 1, 1), args=[a.view(torch.int16), x, d])
    want = a.double() @ round_bf16(x, "rtne").double()
    torch.testing.assert_close(d.double(), want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ LDS and staging
LDS_CASES = [("bf16_16x16x16", 16, "xor", a) for a in ARCHS] + [("bf16_32x32x8", 32, "xor", a) for a in ARCHS] + \
    [("linear_16x16x16", 16, "linear", a) for a in ARCHS] + [("bf16_16x16x32", 16, "xor", "gfx950")]


@pytest.mark.parametrize("name,M,swz,arch", LDS_CASES)
def test_lds_staging_swizzle_and_fragment_reads(modules, name, M, swz, arch):
    g = torch.Generator().manual_seed(40 + M)
    a = torch.randn(M, 64, generator=g).to(torch.bfloat16)
    bt = torch.randn(M, 64, generator=g).to(torch.bfloat16)
    rows_valid = M - 3  # the last 3 rows of A are past the buffer's end: staged as zeros
    d = torch.zeros(M, M)
    img = torch.zeros(M * 128 // 4, dtype=torch.int32)
    modules[arch].launch(f"t_lds_{name}", grid=(1, 1, 1), block=(64, 1, 1),
                         args=[a.view(torch.int16), bt.view(torch.int16), d, img, rows_valid])
    a_in = a.clone()
    a_in[rows_valid:] = 0
    torch.testing.assert_close(d.double(), a_in.double() @ bt.double().T, rtol=1e-5, atol=1e-5)
    # the LDS image: logical 16-byte chunk c of row r sits at chunk c ^ (r % 8) (XorLds<128>)
    chunks = a_in.view(torch.int32).view(M, 8, 4)
    phys = img.view(M, 8, 4)
    for r in range(M):
        for c in range(8):
            p = c ^ (r % 8) if swz == "xor" else c
            assert torch.equal(phys[r, p], chunks[r, c]), (r, c)


# ------------------------------------------------------------------------------- online softmax
def _lse2(s):
    ln2 = torch.log(torch.tensor(2.0, dtype=torch.float64))
    return torch.logsumexp(s * ln2, -1) / ln2


@pytest.mark.parametrize("arch", ARCHS)
def test_col_softmax_over_fragments(modules, arch):
    g = torch.Generator().manual_seed(50)
    n_blocks, scale = 3, 0.125 * 1.4426950408889634
    s = torch.randn(n_blocks, 32, 16, generator=g) * 8  # [block][key][query]
    s[:, :, 3] = float("-inf")          # query 3 sees nothing
    s[0, :, 5] = float("-inf")          # query 5 sees nothing in block 0: its first factor must be 0
    s[1, 7:, 9] = float("-inf")
    lse, p_last, alphas = torch.zeros(64), torch.zeros(32, 16), torch.zeros(n_blocks, 64)
    modules[arch].launch("t_col_softmax", grid=(1, 1, 1), block=(64, 1, 1),
                         args=[s, n_blocks, scale, lse, p_last, alphas])
    sc = (s.double() * scale).permute(2, 0, 1).reshape(16, -1)  # [query][all keys], scaled log2
    want = _lse2(sc)
    lse = lse.view(4, 16)
    assert torch.all(lse == lse[0]), "all lane groups hold their query's lse"
    assert torch.isneginf(lse[0, 3])
    keep = torch.arange(16) != 3
    torch.testing.assert_close(lse[0, keep].double(), want[keep], rtol=1e-5, atol=1e-5)
    # p of the last block = exp2(s*scale - running max)
    m = sc.amax(1)
    p_want = torch.exp2(s[-1].double() * scale - m[None, :]).nan_to_num(0.0)
    torch.testing.assert_close(p_last.double(), p_want, rtol=1e-5, atol=1e-6)
    # rescale factors: exp2(m_prev - m_new), 0 while nothing was seen
    m_run = torch.full((16,), float("-inf"), dtype=torch.float64)
    al = alphas.view(n_blocks, 4, 16)
    for b in range(n_blocks):
        m_new = torch.maximum(m_run, (s[b].double() * scale).amax(0))
        a_want = torch.where(torch.isneginf(m_run), torch.zeros(16, dtype=torch.float64), torch.exp2(m_run - m_new))
        torch.testing.assert_close(al[b, 0].double(), a_want, rtol=1e-5, atol=1e-7)
        m_run = m_new
    assert al[0, 0, 5] == 0 and al[1, 0, 3] == 0 and not torch.isnan(al).any()


@pytest.mark.parametrize("arch", ARCHS)
def test_row_softmax_over_fragments(modules, arch):
    g = torch.Generator().manual_seed(51)
    n_blocks, scale = 3, 0.09 * 1.4426950408889634
    s = torch.randn(n_blocks, 16, 32, generator=g) * 8  # [block][query][key]
    s[:, 6, :] = float("-inf")
    s[0, 2, :] = float("-inf")
    lse, p_last = torch.zeros(64 * 4), torch.zeros(16, 32)
    modules[arch].launch("t_row_softmax", grid=(1, 1, 1), block=(64, 1, 1), args=[s, n_blocks, scale, lse, p_last])
    sc = (s.double() * scale).permute(1, 0, 2).reshape(16, -1)
    want = _lse2(sc)
    got = torch.zeros(16, dtype=torch.float64)
    lse = lse.view(64, 4)
    for lane in range(64):
        for r in range(4):
            i, _ = fact_c(16, 16, lane, r)
            if lane % 16 == 0:
                got[i] = lse[lane, r]
            assert lse[lane, r] == lse[(lane // 16) * 16, r]
    assert torch.isneginf(got[6])
    keep = torch.arange(16) != 6
    torch.testing.assert_close(got[keep], want[keep], rtol=1e-5, atol=1e-5)
    p_want = torch.exp2(s[-1].double() * scale - sc.amax(1)[:, None]).nan_to_num(0.0)
    torch.testing.assert_close(p_last.double(), p_want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------- k-major (transposing) loads
def k_of_packed_c(M, lane, e):
    """KOfPackedC: element e of a lane holds the C row of register e (C rows 4G*(r//4) + 4g + r%4)."""
    return fact_c(M, M, lane, e)[0]


KMAJOR = [(n, a) for n, a in SHAPE_ARCH if n.startswith("bf16")]


@pytest.mark.parametrize("name,arch", KMAJOR)
def test_kmajor_lds_loads_place_every_element(modules, name, arch):
    M, N, K, bits, words, _ = SHAPES[name]
    elems = words * 2
    k, x = torch.meshgrid(torch.arange(32), torch.arange(64), indexing="ij")
    tile = (k * 64 + x).to(torch.int16).contiguous()
    out = torch.zeros(3 * 64 * words, dtype=torch.int32)
    modules[arch].launch(f"t_kmajor_{name}", grid=(1, 1, 1), block=(64, 1, 1), args=[tile, out])
    got = out.view(torch.int16).view(3, 64, elems).to(torch.int64) & 0xFFFF
    x0 = 64 - M
    for lane in range(64):
        for e in range(elems):
            i, kn = fact_ab(M, K, elems, lane, e)
            assert got[0, lane, e] == kn * 64 + x0 + i, (lane, e)
            assert got[1, lane, e] == k_of_packed_c(M, lane, e) * 64 + x0 + i, (lane, e)
            assert got[2, lane, e] == kn * 64 + x0 + i, (lane, e)


# ---------------------------------------------------------------------------- the docs example
@pytest.mark.parametrize("name,arch", [("16x16x16", "gfx942"), ("16x16x16", "gfx950"), ("16x16x32", "gfx950")])
@pytest.mark.parametrize("n_keys", [32, 40, 75])
def test_attention_tile_example(modules, name, arch, n_keys):
    g = torch.Generator().manual_seed(n_keys)
    q, k, v = (torch.randn(n, 64, generator=g).to(torch.bfloat16) for n in (16, n_keys, n_keys))
    o = torch.zeros(16, 64, dtype=torch.bfloat16)
    scale = 64 ** -0.5
    modules[arch].launch(f"t_attention_{name}", grid=(1, 1, 1), block=(64, 1, 1),
                         args=[q.view(torch.int16), k.view(torch.int16), v.view(torch.int16), o.view(torch.int16),
                               n_keys, scale * 1.4426950408889634])
    want = torch.softmax(q.double() @ k.double().T * scale, -1) @ v.double()
    # P is rounded to bf16 before PV and O is stored as bf16: both ~2^-9 relative
    torch.testing.assert_close(o.double(), want, rtol=2e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ARCHS)
def test_no_kernel_uses_scratch(modules, arch):
    """Zero cost includes no spills: constant register indexing everywhere, no private memory."""
    m = modules[arch]
    assert len(m.kernels) > 20
    for k in m.kernels:
        assert m.kernel_info(k)["scratch"] == 0, k


@pytest.mark.parametrize("arch", ARCHS)
def test_blocked_lds_operands(modules, arch):
    i, k = torch.meshgrid(torch.arange(16), torch.arange(128), indexing="ij")
    codes = (i * 128 + k).to(torch.int16).contiguous()
    g = torch.Generator().manual_seed(60)
    a = torch.randn(16, 128, generator=g).to(torch.bfloat16)
    words, d = torch.zeros(8 * 64 * 2, dtype=torch.int32), torch.zeros(16, 16)
    modules[arch].launch("t_blocked_16x16x16", grid=(1, 1, 1), block=(64, 1, 1),
                         args=[a.view(torch.int16), codes, words, d])
    got = words.view(torch.int16).view(8, 64, 4).to(torch.int64) & 0xFFFF
    for m in range(8):
        for lane in range(64):
            for e in range(4):  # MFMA m, lane group g: k = 32g + 4m + e
                assert got[m, lane, e] == (lane % 16) * 128 + 32 * (lane // 16) + 4 * m + e, (m, lane, e)
    b = torch.randn(16, 128, generator=g).to(torch.bfloat16)
    modules[arch].launch("t_blocked_16x16x16", grid=(1, 1, 1), block=(64, 1, 1),
                         args=[a.view(torch.int16), b.view(torch.int16), words, d])
    torch.testing.assert_close(d.double(), a.double() @ b.double().T, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------- scaled f8f6f4 (gfx950)
SCALED = [("16_e4m3_e4m3", 16, "e4m3", "e4m3"), ("16_e2m1_e2m1", 16, "e2m1", "e2m1"),
          ("16_e4m3_e2m1", 16, "e4m3", "e2m1"), ("16_e5m2_e4m3", 16, "e5m2", "e4m3"),
          ("32_e4m3_e4m3", 32, "e4m3", "e4m3"), ("32_e2m1_e2m1", 32, "e2m1", "e2m1"),
          ("32_e2m1_e4m3", 32, "e2m1", "e4m3")]
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def fact_scaled_k(M, fmt, lane, e):
    """ROCm blog figures (32x32x64 fp8 / fp4; 16x16x128 by the same rule, as the emulator): fp8 in
    two passes of 16 elements, fp4 in one pass of 32."""
    G, g = 64 // M, lane // M
    if fmt == "e2m1":
        return 32 * g + e
    return 16 * G * (e // 16) + 16 * g + e % 16


def _mx_operand(fmt, rows, K, g):
    """(bytes [rows][K*bits/8], values [rows][K] float64) of random exactly representable values."""
    if fmt == "e2m1":
        codes = torch.randint(0, 16, (rows, K), generator=g)
        vals = torch.tensor([(-1 if c & 8 else 1) * E2M1[c & 7] for c in codes.flatten().tolist()],
                            dtype=torch.float64).view(rows, K)
        packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).contiguous()
        return packed, vals
    dt = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2
    x = (torch.randn(rows, K, generator=g) * 3).to(dt)
    return x.view(torch.uint8).contiguous(), x.double()


@pytest.mark.parametrize("name,M,fa,fb", SCALED)
def test_scaled_layout_helpers_match_facts(modules, name, M, fa, fb):
    regs = M * M // 64
    out = torch.full((64 * (68 + regs),), -1, dtype=torch.int32)
    modules["gfx950"].launch(f"t_slayout_{name}", grid=(1, 1, 1), block=(64, 1, 1), args=[out])
    out = out.view(64, 68 + regs)
    for lane in range(64):
        assert out[lane, :4].tolist() == [lane % M, lane % M, lane % M, lane // M]
        assert out[lane, 4:36].tolist() == [fact_scaled_k(M, fa, lane, e) for e in range(32)]
        assert out[lane, 36:68].tolist() == [fact_scaled_k(M, fb, lane, e) for e in range(32)]
        assert out[lane, 68:].tolist() == [fact_c(M, M, lane, r)[0] for r in range(regs)]


@pytest.mark.parametrize("name,M,fa,fb", SCALED)
def test_scaled_mma_matches_reference(modules, name, M, fa, fb):
    K = 32 * (64 // M)
    g = torch.Generator().manual_seed(M + len(fa) + 7 * len(name))
    a, av = _mx_operand(fa, M, K, g)
    bt, bv = _mx_operand(fb, M, K, g)
    sa = torch.randint(120, 134, (M, K // 32), generator=g).to(torch.uint8)
    sb = torch.randint(120, 134, (M, K // 32), generator=g).to(torch.uint8)
    c = torch.randn(M, M, generator=g)
    d = torch.zeros(M, M)
    words = torch.zeros(64 * 16, dtype=torch.int32)
    modules["gfx950"].launch(f"t_smma_{name}", grid=(1, 1, 1), block=(64, 1, 1), args=[a, bt, sa, sb, c, d, words])
    scale_a = torch.pow(2.0, sa.double() - 127).repeat_interleave(32, 1)
    scale_b = torch.pow(2.0, sb.double() - 127).repeat_interleave(32, 1)
    want = (av * scale_a) @ (bv * scale_b).T + c.double()
    torch.testing.assert_close(d.double(), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
    if fa == "e4m3":  # placement of every A byte: lane holds row lane % M at k = fact_scaled_k
        got = words.view(64, 16)[:, :8].contiguous().view(torch.uint8).view(64, 32)
        for lane in range(64):
            ks = [fact_scaled_k(M, fa, lane, e) for e in range(32)]
            assert torch.equal(got[lane], a[lane % M, ks]), lane


@pytest.mark.parametrize("arch", ARCHS)
def test_fragment_memory_ops_are_the_intended_instructions(modules, arch):
    """LDS fragments through generic pointers still become ds_* (never flat_*); gfx950's k-major
    loads are transposing reads, gfx942's are ds_read_u16; the LDS staging is direct-to-LDS."""
    m = modules[arch]
    ops: dict = {}
    for k, _, text in m.disassemble():
        ops.setdefault(k, []).append(text)
    assert not any(t.startswith("flat_") for ts in ops.values() for t in ts)
    att = ops["t_attention_16x16x16"]
    kmajor = [t for t in att if t.startswith("ds_read")]
    if arch == "gfx950":
        assert kmajor and all(t.startswith("ds_read_b64_tr_b16") for t in kmajor)
    else:
        assert kmajor and all(t.startswith("ds_read_u16") for t in kmajor)
    assert any(t.startswith("buffer_load_dword") and " lds" in t for t in att), "V staged direct-to-LDS"
    assert sum(t.startswith("v_mfma") for t in att) == 16  # per key block: 2 key tiles x 4 d steps + 4 d tiles x 2
    blocked = ops["t_blocked_16x16x16"]
    assert sum(t.startswith("ds_read_b128") for t in blocked) == 8, "4 b128 reads per operand"


@pytest.mark.parametrize("M", [16, 32])
def test_gfx950_packed_c_pairs_are_b_operands_in_kofpackedc_order(modules, M):
    g = torch.Generator().manual_seed(70 + M)
    a = torch.randn(M, 32, generator=g).to(torch.bfloat16)  # M x K, K = 32 rows of X
    x = torch.randn(32, M, generator=g)
    d = torch.zeros(M, M)
    modules["gfx950"].launch(f"t_c_as_b950_{M}", grid=(1, 1, 1), block=(64, 1, 1), args=[a.view(torch.int16), x, d])
    want = a.double() @ round_bf16(x, "rtne").double()
    torch.testing.assert_close(d.double(), want, rtol=1e-5, atol=1e-5)
