"""C++ unit tests of the emulator's numerics (csrc/numerics.hpp) and MFMA arithmetic (csrc/mfma.cpp).

The C++ test program (tests/cpp/test_numerics.cpp) is compiled with g++ into a temporary directory.
It carries hand-derived edge cases (`selfcheck`) and exposes the conversions and `mfma_execute` so
that this file can compare them against independent references:

* fp8 decode / encode against torch's float8 dtypes (e4m3fnuz, e5m2fnuz, e4m3fn, e5m2);
* every narrow format against a Python reference built from the format definitions (value table +
  nearest-value search with ties to the even code, a different algorithm from the C++ one);
* bf16 / f16 against torch / numpy;
* every MFMA shape against a float64 numpy matmul, with operands packed by the *register -> element*
  formulas of AMD's Matrix Instruction Calculator (the inverse direction of the C++ tables).
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mfma_ref import (  # noqa: E402
    COMMON,
    F8F6F4,
    F8F6F4_SEL,
    FORMATS,
    GFX950_ONLY,
    MAX_FINITE,
    TORCH_DTYPES,
    check_close,
    check_mfma,
    f8f6f4_regs,
    operand_types,
    pack_d,
    pack_operand,
    random_values,
    ref_encode,
    ref_value,
    scale_images,
    shape_info,
    unpack_d,
)

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent / "csrc"
SRC = HERE / "cpp" / "test_numerics.cpp"


@pytest.fixture(scope="session")
def tn(tmp_path_factory) -> Path:
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    if cxx is None:
        pytest.fail("no C++ compiler (g++) found to build the numerics unit test")
    out = tmp_path_factory.mktemp("numerics") / "test_numerics"
    cmd = [cxx, "-std=c++17", "-O2", "-Wall", "-Werror", f"-I{CSRC}", str(SRC), str(CSRC / "mfma.cpp"), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"compile failed:\n{' '.join(cmd)}\n{r.stderr}"
    return out


def run(tn: Path, *args: str, stdin: str | None = None) -> str:
    r = subprocess.run([str(tn), *args], input=stdin, capture_output=True, text=True)
    assert r.returncode == 0, f"{args}: rc={r.returncode}\n{r.stderr}"
    return r.stdout


def test_selfcheck(tn):
    assert run(tn, "selfcheck").strip() == "ok"


def decode_table(tn) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for line in run(tn, "decode").splitlines():
        name, code, bits = line.split()
        v = np.array([int(bits, 16)], dtype=np.uint32).view(np.float32)[0]
        out.setdefault(name, []).append(float(v))
    return out


def same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def test_decode_matches_definitions_and_torch(tn):
    table = decode_table(tn)
    for name in FORMATS:
        bits = FORMATS[name][3]
        got = table[name]
        assert len(got) == 1 << bits
        for code in range(1 << bits):
            want = ref_value(name, code)
            if FORMATS[name][4] == "fnuz" and code == 0:
                want = 0.0
            assert same(got[code], want), (name, hex(code), got[code], want)
        if name in TORCH_DTYPES:
            t = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(TORCH_DTYPES[name]).to(torch.float32).tolist()
            for code in range(256):
                assert same(got[code], t[code]), (name, hex(code), got[code], t[code])
        assert max(abs(v) for v in got if math.isfinite(v)) == MAX_FINITE[name]
    e8 = table["e8m0"]
    for e in range(255):
        assert e8[e] == 2.0 ** (e - 127)
    assert math.isnan(e8[255])



def sample_inputs(name: str, rng: np.random.Generator) -> np.ndarray:
    maxv = MAX_FINITE[name]
    vals = [ref_value(name, c) for c in range(1 << FORMATS[name][3])]
    finite = [v for v in vals if math.isfinite(v)]
    xs: list[float] = []
    pos = sorted(set(abs(v) for v in finite))
    for a, b in zip(pos, pos[1:]):
        mid = (a + b) / 2
        m32 = np.float32(mid)
        xs += [a, b, mid, np.nextafter(m32, np.float32(0)), np.nextafter(m32, np.float32(np.inf))]
    top_e = math.frexp(maxv)[1] - 1
    ulp = 2.0 ** (top_e - FORMATS[name][1])
    xs += [maxv + ulp / 2, np.nextafter(np.float32(maxv + ulp / 2), np.float32(0)), maxv + ulp, 1e30, 3.4e38]
    xs += [pos[1] / 2, pos[1] / 4, pos[1] * 0.75, 1e-30, 0.0]
    xs += list(rng.uniform(-maxv * 1.2, maxv * 1.2, 300))
    xs += list(np.exp2(rng.uniform(-20, math.log2(maxv) + 1, 300)) * rng.choice([-1, 1], 300))
    arr = np.array(xs, dtype=np.float32)
    arr = np.concatenate([arr, -arr, np.array([np.inf, -np.inf, np.nan, -0.0], dtype=np.float32)])
    return arr


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("saturate", [False, True])
def test_encode_matches_reference(tn, name, saturate):
    rng = np.random.default_rng(1234)
    xs = sample_inputs(name, rng)
    out = run(tn, "encode", name, str(int(saturate)), stdin="\n".join(f"{b:08x}" for b in xs.view(np.uint32).tolist()))
    got = [int(v) for v in out.split()]
    assert len(got) == len(xs)
    bad = []
    for x, g in zip(xs.tolist(), got):
        if math.isnan(x):
            # NaN must stay NaN where the format has one; fp6/fp4 saturate (our documented choice)
            if FORMATS[name][4] != "plain":
                assert math.isnan(ref_value(name, g)), (name, x, g)
            continue
        w = ref_encode(name, x, saturate)
        if g != w:
            bad.append((x, hex(g), hex(w)))
    assert not bad, f"{name} saturate={saturate}: {len(bad)} mismatches, e.g. {bad[:8]}"


@pytest.mark.parametrize("name", list(TORCH_DTYPES))
def test_encode_matches_torch_in_range(tn, name):
    """torch's float->fp8 casts round to nearest even; compare everywhere the value is in range.
    Out of range, torch's e4m3fn saturates (like our clamp mode) while fnuz -> NaN and e5m2 -> Inf
    (like our non-saturating mode)."""
    rng = np.random.default_rng(99)
    xs = sample_inputs(name, rng)
    xs = xs[~np.isnan(xs)]
    tcodes = torch.from_numpy(xs.copy()).to(TORCH_DTYPES[name]).view(torch.uint8).numpy().astype(int)
    sat = name == "e4m3fn"
    out = run(tn, "encode", name, str(int(sat)), stdin="\n".join(f"{b:08x}" for b in xs.view(np.uint32).tolist()))
    got = np.array([int(v) for v in out.split()])
    bad = [(float(x), hex(g), hex(t)) for x, g, t in zip(xs, got, tcodes) if g != t]
    assert not bad, f"{name}: {len(bad)} mismatches vs torch, e.g. {bad[:8]}"


def _random_f32_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    special = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0x00000001,
                        0x00800000, 0x3F808000, 0x3F818000, 0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001,
                        0x387FC000, 0x38800000, 0x3F800FFF, 0x3F801000, 0x3F803000], dtype=np.uint32)
    # values near the f16 range edges and ties for f16 (13 dropped bits) and bf16 (16 dropped bits)
    near = rng.integers(0x33000000, 0x47800000, n // 2, dtype=np.uint64).astype(np.uint32)
    near = (near & ~np.uint32(0xFFF)) | np.uint32(0x1000)
    return np.concatenate([bits, special, near])


def test_bf16_against_torch(tn):
    rng = np.random.default_rng(7)
    bits = _random_f32_bits(rng, 4000)
    out = run(tn, "bf16", stdin="\n".join(f"{b:08x}" for b in bits.tolist()))
    got = np.array([[int(v) for v in line.split()] for line in out.splitlines()])
    x = torch.from_numpy(bits.view(np.float32).copy())
    want_rne = x.to(torch.bfloat16).view(torch.int16).numpy().astype(np.uint16).astype(int)
    want_rtz = (bits >> 16).astype(int)
    isnan = np.isnan(bits.view(np.float32))
    assert np.array_equal(got[~isnan, 0], want_rne[~isnan])
    assert np.array_equal(got[~isnan, 1], want_rtz[~isnan])
    # NaN: stays NaN (quiet bit set), sign kept
    for g, b in zip(got[isnan], bits[isnan]):
        for v in g[:2]:
            assert (v & 0x7F80) == 0x7F80 and (v & 0x40), hex(v)
            assert (v >> 15) == (int(b) >> 31)
    # round-half-away: |x| rounded on the magnitude
    mag = bits & np.uint32(0x7FFFFFFF)
    want_rna = (((mag.astype(np.uint64) + 0x8000) >> 16).astype(int)) | ((bits >> 16).astype(int) & 0x8000)
    assert np.array_equal(got[~isnan, 2], want_rna[~isnan])


def test_f16_against_numpy(tn):
    rng = np.random.default_rng(8)
    bits = _random_f32_bits(rng, 4000)
    out = run(tn, "f16", stdin="\n".join(f"{b:08x}" for b in bits.tolist()))
    got = np.array([[int(v) for v in line.split()] for line in out.splitlines()])
    f = bits.view(np.float32)
    with np.errstate(over="ignore"):
        want = f.astype(np.float16).view(np.uint16).astype(int)
    isnan = np.isnan(f)
    assert np.array_equal(got[~isnan, 0], want[~isnan])
    for g in got[isnan, 0]:
        assert (g & 0x7C00) == 0x7C00 and (g & 0x3FF)
    # RTZ: the largest-magnitude f16 not above |x| (Inf never produced for finite x)
    fin = np.isfinite(f)
    h = got[fin, 1].astype(np.uint16).view(np.float16).astype(np.float64)
    x = f[fin].astype(np.float64)
    assert np.all(np.abs(h) <= np.abs(x)) and np.all(np.sign(h) * np.sign(x) >= 0)
    with np.errstate(over="ignore"):
        nxt = np.nextafter(np.abs(h).astype(np.float16), np.float16(np.inf)).astype(np.float64)
    assert np.all((nxt > np.abs(x)) | (np.abs(h) == 65504.0))


# --------------------------------------------------------------------------------------------------
# MFMA against numpy, operands packed with the calculator's register -> element formulas
def info(tn, mn: str, gfx950: bool):
    out = run(tn, "info", mn, str(int(gfx950))).split()
    if out == ["none"]:
        return None
    a, b, cd, M, N, K, blocks, scaled = map(int, out)
    return dict(a=a, b=b, cd=cd, M=M, N=N, K=K, blocks=blocks, scaled=bool(scaled))


def run_mfma(tn, tmp_path, mn, arch950, a_img, b_img, c_img, sa=None, sb=None,
             cbsz=0, abid=0, blgp=0, neg=0, opsa=0, opsb=0):
    sa = np.zeros(64, np.uint32) if sa is None else sa.astype(np.uint32)
    sb = np.zeros(64, np.uint32) if sb is None else sb.astype(np.uint32)
    data = np.concatenate([a_img.ravel(), b_img.ravel(), c_img.ravel(), sa, sb]).astype(np.uint32)
    fin, fout = tmp_path / "in.bin", tmp_path / "out.bin"
    fin.write_bytes(data.tobytes())
    mods = [str(v) for v in (int(arch950), cbsz, abid, blgp, neg, opsa, opsb)]
    run(tn, "mfma", mn, *mods, str(fin), str(fout))
    return np.frombuffer(fout.read_bytes(), dtype=np.uint32).reshape(c_img.shape)



CASES = [(mn, False) for mn in COMMON] + [(mn, True) for mn in COMMON + GFX950_ONLY]


def test_mfma_table_matches_mnemonics(tn):
    """Register counts and shapes in the C++ table agree with the ones derived from the mnemonic, and
    each form exists exactly on the archs it should."""
    for mn in COMMON + GFX950_ONLY + F8F6F4:
        for arch950 in (False, True):
            inf = info(tn, mn, arch950)
            exists = arch950 or (mn in COMMON)
            assert (inf is not None) == exists, (mn, arch950)
            if inf is not None:
                assert inf == shape_info(mn), (mn, inf, shape_info(mn))


@pytest.mark.parametrize("mn,arch950", CASES, ids=[f"{'gfx950' if a else 'gfx942'}-{m}" for m, a in CASES])
def test_mfma_shape_against_numpy(tn, tmp_path, mn, arch950):
    inf = info(tn, mn, arch950)
    assert inf is not None, f"{mn} not implemented for {'gfx950' if arch950 else 'gfx942'}"
    ta, tb, to = operand_types(mn)
    rng = np.random.default_rng(zlib.crc32(mn.encode()))
    NB, M, N, K = inf["blocks"], inf["M"], inf["N"], inf["K"]
    A = random_values(ta, (NB, M, K), rng, arch950)
    B = random_values(tb, (NB, N, K), rng, arch950)  # stored as [block][j][k]
    if to == "i32":
        C = rng.integers(-1000, 1000, (NB, M, N)).astype(np.int64)
    else:
        C = rng.standard_normal((NB, M, N)).astype(np.float32).astype(np.float64)
    a_img = pack_operand(mn, inf, ta, A, inf["a"], arch950)
    b_img = pack_operand(mn, inf, tb, B, inf["b"], arch950)
    c_img = pack_d(inf, to, C, inf["cd"])
    d_img = run_mfma(tn, tmp_path, mn, arch950, a_img, b_img, c_img)
    got = unpack_d(inf, to, d_img)
    check_mfma(mn, arch950, got, A, B, C)


def test_mfma_fp8_flavour_differs_by_arch(tn, tmp_path):
    """The same bits mean different numbers on gfx942 (FNUZ) and gfx950 (OCP): 0x40 is 1.0 in
    e4m3fnuz but 2.0 in e4m3fn."""
    mn = "v_mfma_f32_16x16x32_fp8_fp8"
    res = []
    for arch950 in (False, True):
        inf = info(tn, mn, arch950)
        a = np.full((2, 64), 0x40404040, np.uint32)
        b = np.full((2, 64), 0x40404040, np.uint32)
        c = np.zeros((4, 64), np.uint32)
        d = run_mfma(tn, tmp_path, mn, arch950, a, b, c).view(np.float32)
        assert inf["K"] == 32
        res.append(float(d[0, 0]))
    assert res == [32.0, 128.0]


def test_mfma_cbsz_abid_blgp(tn, tmp_path):
    mn = "v_mfma_f32_16x16x4_4b_f16"
    inf = info(tn, mn, False)
    rng = np.random.default_rng(5)
    A = rng.standard_normal((4, 16, 4)).astype(np.float16).astype(np.float64)
    B = rng.standard_normal((4, 16, 4)).astype(np.float16).astype(np.float64)
    C = np.zeros((4, 16, 16))
    a_img = pack_operand(mn, inf, "f16", A, 2, False)
    b_img = pack_operand(mn, inf, "f16", B, 2, False)
    c_img = pack_d(inf, "f32", C, 16)
    # CBSZ=1, ABID=1: blocks 0,1 use A block 1; blocks 2,3 use A block 3
    got = unpack_d(inf, "f32", run_mfma(tn, tmp_path, mn, False, a_img, b_img, c_img, cbsz=1, abid=1))
    check_mfma(mn, False, got, A[[1, 1, 3, 3]], B, C)
    # CBSZ=2, ABID=2: all blocks use A block 2
    got = unpack_d(inf, "f32", run_mfma(tn, tmp_path, mn, False, a_img, b_img, c_img, cbsz=2, abid=2))
    check_mfma(mn, False, got, A[[2, 2, 2, 2]], B, C)
    # BLGP: lane patterns on B (blocks = 16-lane groups here)
    patterns = {1: [0, 1, 0, 1], 2: [2, 3, 2, 3], 3: [1, 2, 3, 0], 4: [0, 0, 0, 0], 5: [1, 1, 1, 1], 6: [2, 2, 2, 2],
                7: [3, 3, 3, 3]}
    for blgp, src in patterns.items():
        got = unpack_d(inf, "f32", run_mfma(tn, tmp_path, mn, False, a_img, b_img, c_img, blgp=blgp))
        check_mfma(mn, False, got, A, B[src], C)


def test_mfma_f64_neg(tn, tmp_path):
    mn = "v_mfma_f64_16x16x4_f64"
    inf = info(tn, mn, False)
    rng = np.random.default_rng(6)
    A, B, C = rng.standard_normal((1, 16, 4)), rng.standard_normal((1, 16, 4)), rng.standard_normal((1, 16, 16))
    a_img, b_img = pack_operand(mn, inf, "f64", A, 2, False), pack_operand(mn, inf, "f64", B, 2, False)
    c_img = pack_d(inf, "f64", C, 8)
    for neg in range(8):
        sa, sb, sc = (-1 if neg & 1 else 1), (-1 if neg & 2 else 1), (-1 if neg & 4 else 1)
        got = unpack_d(inf, "f64", run_mfma(tn, tmp_path, mn, False, a_img, b_img, c_img, neg=neg))
        check_close("f64", got, np.einsum("bik,bjk->bij", sa * A, sb * B) + sc * C)



@pytest.mark.parametrize("mn", F8F6F4)
@pytest.mark.parametrize("cbsz,blgp", [(0, 0), (1, 1), (0, 1), (2, 2), (3, 3), (4, 4), (0, 4), (4, 2), (1, 3)])
def test_mfma_f8f6f4(tn, tmp_path, mn, cbsz, blgp):
    inf = info(tn, mn, True)
    assert inf is not None and info(tn, mn, False) is None
    ta, tb = F8F6F4_SEL[cbsz], F8F6F4_SEL[blgp]
    rng = np.random.default_rng(cbsz * 8 + blgp)
    M, N, K = inf["M"], inf["N"], inf["K"]
    A = random_values(ta, (1, M, K), rng, True)
    B = random_values(tb, (1, N, K), rng, True)
    C = rng.standard_normal((1, M, N)).astype(np.float32).astype(np.float64)
    a_img = pack_operand(mn, inf, ta, A, f8f6f4_regs(cbsz), True)
    b_img = pack_operand(mn, inf, tb, B, f8f6f4_regs(blgp), True)
    c_img = pack_d(inf, "f32", C, inf["cd"])
    KB = K // 32
    if inf["scaled"]:
        opsa, opsb = int(rng.integers(0, 4)), int(rng.integers(0, 4))
        ea, eb, sa, sb = scale_images(rng, M, N, KB, opsa, opsb)
        Asc = A * np.repeat(2.0 ** (ea - 127), 32, axis=1)[None]
        Bsc = B * np.repeat(2.0 ** (eb - 127), 32, axis=1)[None]
        d = run_mfma(tn, tmp_path, mn, True, a_img, b_img, c_img, sa=sa, sb=sb, cbsz=cbsz, blgp=blgp,
                     opsa=opsa, opsb=opsb)
        want = np.einsum("bik,bjk->bij", Asc, Bsc) + C
    else:
        d = run_mfma(tn, tmp_path, mn, True, a_img, b_img, c_img, cbsz=cbsz, blgp=blgp)
        want = np.einsum("bik,bjk->bij", A, B) + C
    check_close("f32", unpack_d(inf, "f32", d), want)


def test_mfma_scale_nan_and_special_values(tn, tmp_path):
    mn = "v_mfma_scale_f32_16x16x128_f8f6f4"
    inf = info(tn, mn, True)
    a = np.full((8, 64), 0x38383838, np.uint32)  # e4m3fn 1.0 everywhere
    b = np.full((8, 64), 0x38383838, np.uint32)
    c = np.zeros((4, 64), np.uint32)
    sa = np.full(64, 127, np.uint32)
    sb = np.full(64, 127, np.uint32)
    d = run_mfma(tn, tmp_path, mn, True, a, b, c, sa=sa, sb=sb).view(np.float32)
    assert np.all(d == 128.0)
    sa2 = sa.copy()
    sa2[16 * 2 + 5] = 0xFF  # NaN scale for row 5, k-block 2 -> row 5 of D is NaN
    D = unpack_d(inf, "f32", run_mfma(tn, tmp_path, mn, True, a, b, c, sa=sa2, sb=sb))
    assert np.all(np.isnan(D[0, 5])) and not np.any(np.isnan(np.delete(D[0], 5, axis=0)))
    # scale 2^-127 (E8M0 0) on A and 2^+127 on B cancel exactly
    d = run_mfma(tn, tmp_path, mn, True, a, b, c, sa=np.zeros(64, np.uint32), sb=np.full(64, 254, np.uint32))
    d = d.view(np.float32)
    assert np.all(d == 128.0)


def test_mfma_specials_propagate(tn, tmp_path):
    """Inf*0 -> NaN, Inf propagates, f16 denormal inputs are honoured (not flushed)."""
    mn = "v_mfma_f32_16x16x16_f16"
    inf = info(tn, mn, False)
    A = np.zeros((1, 16, 16))
    B = np.zeros((1, 16, 16))
    A[0, 0, 0], B[0, 0, 0] = np.inf, 0.0           # D[0][0] = Inf*0 -> NaN
    A[0, 1, 1], B[0, 1, 1] = np.inf, 1.0           # D[1][1] = Inf
    A[0, 2, 2], B[0, 2, 2] = 2.0**-24, 2.0**-24    # f16 denormal squared: 2^-48, a normal f32
    a_img = pack_operand(mn, inf, "f16", A, 2, False)
    b_img = pack_operand(mn, inf, "f16", B, 2, False)
    c_img = np.zeros((4, 64), np.uint32)
    D = unpack_d(inf, "f32", run_mfma(tn, tmp_path, mn, False, a_img, b_img, c_img))
    assert np.isnan(D[0, 0, 0])
    assert D[0, 1, 1] == np.inf
    assert D[0, 2, 2] == 2.0**-48
    assert D[0, 3, 3] == 0.0
