"""Reference material for the emulator's numerics and MFMA tests (shared by test_numerics_cpp.py and
the kernel tests): narrow-format value tables built from the format definitions, a nearest-value
encoder, and the MFMA register layouts written in the *register -> element* direction of AMD's
Matrix Instruction Calculator (CDNA3) plus the ROCm blog figures for the gfx950 f8f6f4 forms.

Nothing here imports the emulator: it is the independent side of the comparison.
"""
from __future__ import annotations

import math
import re

import numpy as np
import torch

# Narrow formats: reference from the definitions
FORMATS = {
    # name: (ebits, mbits, bias, bits, kind)  kind: fnuz | fn (S.1111.111 NaN) | ieee | plain
    "e4m3fnuz": (4, 3, 8, 8, "fnuz"),
    "e5m2fnuz": (5, 2, 16, 8, "fnuz"),
    "e4m3fn": (4, 3, 7, 8, "fn"),
    "e5m2": (5, 2, 15, 8, "ieee"),
    "e2m3": (2, 3, 1, 6, "plain"),
    "e3m2": (3, 2, 3, 6, "plain"),
    "e2m1": (2, 1, 1, 4, "plain"),
}
MAX_FINITE = {
    "e4m3fnuz": 240.0, "e5m2fnuz": 57344.0, "e4m3fn": 448.0, "e5m2": 57344.0, "e2m3": 7.5, "e3m2": 28.0, "e2m1": 6.0,
}
TORCH_DTYPES = {
    "e4m3fnuz": torch.float8_e4m3fnuz,
    "e5m2fnuz": torch.float8_e5m2fnuz,
    "e4m3fn": torch.float8_e4m3fn,
    "e5m2": torch.float8_e5m2,
}


def ref_value(name: str, code: int) -> float:
    e_bits, m_bits, bias, bits, kind = FORMATS[name]
    sign = code >> (bits - 1)
    mag = code & ((1 << (bits - 1)) - 1)
    e, m = mag >> m_bits, mag & ((1 << m_bits) - 1)
    if kind == "fnuz" and code == 1 << (bits - 1):
        return math.nan
    if kind == "fn" and mag == (1 << (bits - 1)) - 1:
        return math.nan
    if kind == "ieee" and e == (1 << e_bits) - 1:
        return math.nan if m else (-math.inf if sign else math.inf)
    v = (m / 2**m_bits) * 2.0 ** (1 - bias) if e == 0 else (1 + m / 2**m_bits) * 2.0 ** (e - bias)
    return -v if sign else v




def ref_encode(name: str, x: float, saturate: bool) -> int:
    """Nearest representable value by search; ties go to the code with an even mantissa LSB."""
    e_bits, m_bits, bias, bits, kind = FORMATS[name]
    sign_bit = 1 << (bits - 1)
    has_nan = kind != "plain"
    maxv = MAX_FINITE[name]
    neg = math.copysign(1.0, x) < 0
    nan_code = sign_bit if kind == "fnuz" else ((sign_bit if neg else 0) | (sign_bit - 1))
    if math.isnan(x):
        if not has_nan:
            return (sign_bit if neg else 0) | max(c for c in range(sign_bit) if ref_value(name, c) == maxv)
        return sign_bit if kind == "fnuz" else (0x7F | (0x80 if neg else 0))
    pos_codes = [c for c in range(sign_bit) if math.isfinite(ref_value(name, c))]
    vals = sorted((ref_value(name, c), c) for c in pos_codes)
    ax = abs(x)
    max_code = max(c for v, c in vals if v == maxv)

    def with_sign(c: int) -> int:
        if c == 0 and kind == "fnuz":
            return 0
        return c | (sign_bit if neg else 0)

    def overflow() -> int:
        if saturate or not has_nan:
            return with_sign(max_code)
        if kind == "ieee":
            return with_sign(((1 << e_bits) - 1) << m_bits)
        return nan_code

    if math.isinf(ax):
        return overflow()
    # candidates: the value just below and just above ax (above may be "past max": the next binade)
    below = max((v, c) for v, c in vals if v <= ax)
    above_list = [(v, c) for v, c in vals if v >= ax]
    if not above_list:
        # past max: the next value after max is max + ulp(max) (continuing the top binade's spacing)
        top_e = math.frexp(maxv)[1] - 1
        ulp = 2.0 ** (top_e - m_bits)
        above = (maxv + ulp, None)
    else:
        above = min(above_list)
    if below[0] == ax:
        return with_sign(below[1])
    db, da = ax - below[0], above[0] - ax
    if db < da:
        pick = below
    elif da < db:
        pick = above
    else:  # tie: even mantissa LSB; "past max" counts as the even side iff max's LSB is odd
        if above[1] is None:
            pick = below if (below[1] & 1) == 0 else above
        else:
            pick = below if (below[1] & 1) == 0 else above
    if pick[1] is None:
        return overflow()
    return with_sign(pick[1])



ELEM_BITS = {"f32": 32, "f64": 64, "f16": 16, "bf16": 16, "i8": 8, "fp8": 8, "bf8": 8,
             "e4m3": 8, "e5m2": 8, "e2m3": 6, "e3m2": 6, "e2m1": 4}
F8F6F4_SEL = {0: "e4m3", 1: "e5m2", 2: "e2m3", 3: "e3m2", 4: "e2m1"}


def operand_types(mn: str) -> tuple[str, str, str]:
    parts = mn.split("_")
    if "f8f6f4" in mn:
        return "f8f6f4", "f8f6f4", "f32"
    out = {"f32": "f32", "f64": "f64", "i32": "i32"}[parts[2] if parts[1] == "mfma" else parts[2]]
    if parts[-2] in ("fp8", "bf8"):
        return parts[-2], parts[-1], out
    return parts[-1], parts[-1], out


def ab_element_of(mn: str, inf: dict, ty: str, lane: int, e: int) -> tuple[int, int, int]:
    """(block, row-or-col, k) held by element e of `lane` (calculator's register->element direction)."""
    M, blocks = inf["M"], inf["blocks"]
    if ty == "f64":
        if blocks == 1:
            return 0, lane % 16, lane // 16
        return (lane // 4) % 4, lane % 4, lane // 16
    if blocks > 1:
        return lane // M, lane % M, e
    G = 64 // M
    g = lane // M
    if "f8f6f4" in mn:
        if ELEM_BITS[ty] == 8:  # two 16-element passes (ROCm blog figure, 32x32x64 fp8)
            return 0, lane % M, 16 * G * (e // 16) + 16 * g + e % 16
        return 0, lane % M, 32 * g + e  # fp4 (blog figure) and fp6 (assumed: same as fp4)
    E = inf["K"] // G
    return 0, lane % M, E * g + e


def d_element_of(inf: dict, out_ty: str, reg: int, lane: int) -> tuple[int, int, int]:
    M, N, blocks = inf["M"], inf["N"], inf["blocks"]
    if out_ty == "f64":
        if blocks == 1:
            return 0, 4 * (reg // 2) + lane // 16, lane % 16
        return (lane // 4) % 4, lane // 16, lane % 4
    if M == 4:
        return lane // 4, reg, lane % 4
    per_block = M * N // 64
    b, r = divmod(reg, per_block)
    G = 64 // N
    return b, 4 * G * (r // 4) + 4 * (lane // N) + r % 4, lane % N


def encode_values(ty: str, vals: np.ndarray, arch950: bool) -> np.ndarray:
    """Return integer codes for exactly representable values."""
    if ty == "f32":
        return vals.astype(np.float32).view(np.uint32).astype(np.uint64)
    if ty == "f64":
        return vals.astype(np.float64).view(np.uint64)
    if ty == "f16":
        return vals.astype(np.float16).view(np.uint16).astype(np.uint64)
    if ty == "bf16":
        return (vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
    if ty == "i8":
        return (vals.astype(np.int64) & 0xFF).astype(np.uint64)
    name = {"fp8": "e4m3fn" if arch950 else "e4m3fnuz", "bf8": "e5m2" if arch950 else "e5m2fnuz",
            "e4m3": "e4m3fn", "e5m2": "e5m2", "e2m3": "e2m3", "e3m2": "e3m2", "e2m1": "e2m1"}[ty]
    lut = {ref_value(name, c): c for c in range(1 << FORMATS[name][3]) if math.isfinite(ref_value(name, c))}
    lut[0.0] = 0
    return np.array([lut[float(v)] for v in vals.ravel()], dtype=np.uint64).reshape(vals.shape)


def random_values(ty: str, shape, rng, arch950: bool) -> np.ndarray:
    if ty == "i8":
        return rng.integers(-128, 128, shape).astype(np.float64)
    if ty in ("f32", "f64"):
        return rng.standard_normal(shape).astype(np.float32 if ty == "f32" else np.float64).astype(np.float64)
    if ty == "f16":
        return rng.standard_normal(shape).astype(np.float16).astype(np.float64)
    if ty == "bf16":
        return torch.from_numpy(rng.standard_normal(shape)).to(torch.bfloat16).to(torch.float64).numpy()
    name = {"fp8": "e4m3fn" if arch950 else "e4m3fnuz", "bf8": "e5m2" if arch950 else "e5m2fnuz",
            "e4m3": "e4m3fn", "e5m2": "e5m2", "e2m3": "e2m3", "e3m2": "e3m2", "e2m1": "e2m1"}[ty]
    codes = range(1 << FORMATS[name][3])
    vals = np.array(sorted({ref_value(name, c) for c in codes if math.isfinite(ref_value(name, c))}))
    vals = vals[np.abs(vals) <= 64]  # keep the dot products well inside f32
    return rng.choice(vals, shape)


def pack_operand(mn, inf, ty, mat, regs, arch950):
    """mat[block][x][k] -> uint32 register image regs x 64."""
    width = ELEM_BITS[ty]
    elems = regs * 32 // width if ty != "f64" else 1
    if "f8f6f4" in mn:
        elems = 32
    img = np.zeros((regs, 64), dtype=np.uint64)
    codes = encode_values(ty, mat, arch950)
    for lane in range(64):
        for e in range(elems):
            b, x, k = ab_element_of(mn, inf, ty, lane, e)
            if b >= mat.shape[0] or k >= mat.shape[2]:
                continue
            c = int(codes[b, x, k])
            bit = e * width
            if width == 64:
                img[0, lane] = c & 0xFFFFFFFF
                img[1, lane] = c >> 32
                continue
            r, o = divmod(bit, 32)
            img[r, lane] |= (c << o) & 0xFFFFFFFF
            if o + width > 32:
                img[r + 1, lane] |= c >> (32 - o)
    return img.astype(np.uint32)



def reference(ty_out, A, B, C, scale=None):
    """D[b] = A[b] @ B[b] + C[b] in float64 (i8: exact ints), rounded like the output type."""
    if ty_out == "i32":
        D = np.einsum("bik,bkj->bij", A.astype(np.int64), B.astype(np.int64)) + C.astype(np.int64)
        return ((D + 2**31) % 2**32 - 2**31).astype(np.int64)
    D = np.einsum("bik,bkj->bij", A, B) + C
    return D


def unpack_d(inf, ty_out, img):
    M, N, blocks = inf["M"], inf["N"], inf["blocks"]
    D = np.zeros((blocks, M, N), dtype=np.float64 if ty_out != "i32" else np.int64)
    seen = np.zeros((blocks, M, N), dtype=int)
    regs = img.shape[0]
    step = 2 if ty_out == "f64" else 1
    for reg in range(0, regs, step):
        for lane in range(64):
            b, i, j = d_element_of(inf, ty_out, reg, lane)
            if ty_out == "f64":
                u = int(img[reg, lane]) | (int(img[reg + 1, lane]) << 32)
                D[b, i, j] = np.array([u], dtype=np.uint64).view(np.float64)[0]
            elif ty_out == "i32":
                D[b, i, j] = np.array([img[reg, lane]], dtype=np.uint32).view(np.int32)[0]
            else:
                D[b, i, j] = np.array([img[reg, lane]], dtype=np.uint32).view(np.float32)[0]
            seen[b, i, j] += 1
    assert np.all(seen == 1), "D layout is not a bijection"
    return D


def pack_d(inf, ty_out, D, regs):
    img = np.zeros((regs, 64), dtype=np.uint64)
    step = 2 if ty_out == "f64" else 1
    for reg in range(0, regs, step):
        for lane in range(64):
            b, i, j = d_element_of(inf, ty_out, reg, lane)
            v = D[b, i, j]
            if ty_out == "f64":
                u = int(np.array([v], dtype=np.float64).view(np.uint64)[0])
                img[reg, lane], img[reg + 1, lane] = u & 0xFFFFFFFF, u >> 32
            elif ty_out == "i32":
                img[reg, lane] = int(np.array([v], dtype=np.int64).astype(np.int32).view(np.uint32)[0])
            else:
                img[reg, lane] = int(np.array([v], dtype=np.float32).view(np.uint32)[0])
    return img.astype(np.uint32)


def check_close(ty_out, got, want):
    if ty_out == "i32":
        assert np.array_equal(got, want)
    elif ty_out == "f64":
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    else:
        # our model rounds the exact (double) sum once; numpy's float64 einsum differs only far below
        # f32 precision, so the f32-rounded values must agree to within one f32 ulp
        w32 = want.astype(np.float32)
        ulp = np.spacing(np.abs(w32)).astype(np.float64)
        assert np.all(np.abs(got - w32.astype(np.float64)) <= ulp), np.max(np.abs(got - w32) / ulp)



def shape_info(mn: str) -> dict:
    """Shape and register counts derived from the mnemonic alone (M x N x K, _Nb blocks, element widths):
    per-lane elements = M*K*blocks/64 for A, M*N*blocks/64 for C/D."""
    m = re.search(r"_(\d+)x(\d+)x(\d+)", mn)
    M, N, K = map(int, m.groups())
    b = re.search(r"_(\d+)b_", mn)
    blocks = int(b.group(1)) if b else 1
    ta, tb, to = operand_types(mn)
    if ta == "f8f6f4":
        a_regs = b_regs = 8  # maximum (fp8); fp6 uses 6, fp4 4
    else:
        a_regs = max(1, M * K * blocks // 64 * ELEM_BITS[ta] // 32)
        b_regs = max(1, N * K * blocks // 64 * ELEM_BITS[tb] // 32)
    cd = M * N * blocks // 64 * (2 if to == "f64" else 1)
    return dict(a=a_regs, b=b_regs, cd=cd, M=M, N=N, K=K, blocks=blocks, scaled="_scale_" in mn)


def f8f6f4_regs(sel: int) -> int:
    return {8: 8, 6: 6, 4: 4}[ELEM_BITS[F8F6F4_SEL[sel]]]


COMMON = [
    "v_mfma_f32_32x32x1_2b_f32", "v_mfma_f32_16x16x1_4b_f32", "v_mfma_f32_4x4x1_16b_f32",
    "v_mfma_f32_32x32x2_f32", "v_mfma_f32_16x16x4_f32",
    "v_mfma_f32_32x32x4_2b_f16", "v_mfma_f32_16x16x4_4b_f16", "v_mfma_f32_4x4x4_16b_f16",
    "v_mfma_f32_32x32x8_f16", "v_mfma_f32_16x16x16_f16",
    "v_mfma_f32_32x32x4_2b_bf16", "v_mfma_f32_16x16x4_4b_bf16", "v_mfma_f32_4x4x4_16b_bf16",
    "v_mfma_f32_32x32x8_bf16", "v_mfma_f32_16x16x16_bf16",
    "v_mfma_i32_32x32x4_2b_i8", "v_mfma_i32_16x16x4_4b_i8", "v_mfma_i32_4x4x4_16b_i8",
    "v_mfma_i32_32x32x16_i8", "v_mfma_i32_16x16x32_i8",
    "v_mfma_f64_16x16x4_f64", "v_mfma_f64_4x4x4_4b_f64",
] + [f"v_mfma_f32_{s}_{a}_{b}" for s in ("16x16x32", "32x32x16") for a in ("fp8", "bf8") for b in ("fp8", "bf8")]
GFX950_ONLY = [
    "v_mfma_f32_16x16x32_bf16", "v_mfma_f32_32x32x16_bf16", "v_mfma_f32_16x16x32_f16", "v_mfma_f32_32x32x16_f16",
    "v_mfma_i32_16x16x64_i8", "v_mfma_i32_32x32x32_i8",
]
F8F6F4 = ["v_mfma_f32_16x16x128_f8f6f4", "v_mfma_f32_32x32x64_f8f6f4",
          "v_mfma_scale_f32_16x16x128_f8f6f4", "v_mfma_scale_f32_32x32x64_f8f6f4"]


def scale_images(rng, M: int, N: int, KB: int, opsa: int, opsb: int, lo: int = 120, hi: int = 135):
    """E8M0 exponents ea[i][kb], eb[j][kb] placed in lane M*kb+i / N*kb+j, byte opsel, other bytes random."""
    ea = rng.integers(lo, hi, (M, KB))
    eb = rng.integers(lo, hi, (N, KB))
    sa = rng.integers(0, 2**32, 64, dtype=np.uint64)
    sb = rng.integers(0, 2**32, 64, dtype=np.uint64)
    for kb in range(KB):
        for i in range(M):
            lane = M * kb + i
            sa[lane] = (int(sa[lane]) & ~(0xFF << (8 * opsa))) | (int(ea[i, kb]) << (8 * opsa))
        for j in range(N):
            lane = N * kb + j
            sb[lane] = (int(sb[lane]) & ~(0xFF << (8 * opsb))) | (int(eb[j, kb]) << (8 * opsb))
    return ea, eb, sa.astype(np.uint32), sb.astype(np.uint32)


# --------------------------------------------------------------------------------------------------
# CDNA3 (gfx942) accumulation model, written from the description in MMA-Sim (Xie et al.,
# arXiv:2511.10909; derived from and validated bitwise against MI300X), independently of the C++:
# exact rational arithmetic with fractions.Fraction.
from fractions import Fraction  # noqa: E402

_EMIN = {"f16": -14, "bf16": -126, "fp8": -7, "bf8": -15, "f32": -126}


def _sig_exp(x: float, emin: int):
    """x = sig * 2^e with 1 <= |sig| < 2 (denormals: e = emin, |sig| < 1); zero -> (0, None)."""
    if x == 0:
        return Fraction(0), None
    e = max(math.frexp(abs(x))[1] - 1, emin)
    return Fraction(x) / Fraction(2) ** e, e


def f32_rne(q: Fraction) -> float:
    """Round an exact rational to the nearest f32 (ties to even), with f32 denormals and overflow to Inf."""
    if q == 0:
        return 0.0
    sign = -1.0 if q < 0 else 1.0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1  # now 2^e <= q < 2^(e+1)
    e = max(e, -126)
    scaled = q / Fraction(2) ** (e - 23)  # 24-bit significand units
    n = math.floor(scaled)
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = math.ldexp(float(n), e - 23)
    if v >= 2.0**128:
        v = math.inf
    return sign * float(np.float32(v))


def _fused_sum(terms):
    """terms: (sig, e) of products; each aligned to the largest e, truncated toward zero to 24
    fractional bits. Returns (s, E) with value s * 2^E, or (0, None) if every term is zero."""
    es = [e for s, e in terms if s != 0]
    if not es:
        return Fraction(0), None
    E = max(es)
    total = Fraction(0)
    for s, e in terms:
        if s != 0:
            total += Fraction(int(s * Fraction(2) ** (24 + e - E)), 2**24)  # int() truncates toward zero
    return total, E


def _cdna3_group(a, b, ta, tb, c: float, fp8: bool) -> float:
    exact = [float(x) * float(y) for x, y in zip(a, b)]
    if not all(math.isfinite(v) for v in list(a) + list(b) + [c]):
        return float(np.float32(sum(exact) + c))
    if any(abs(p) >= 2.0**128 for p in exact):
        pos = any(p >= 2.0**128 for p in exact)
        neg = any(p <= -(2.0**128) for p in exact)
        return math.nan if pos and neg else (math.inf if pos else -math.inf)
    terms = []
    for x, y in zip(a, b):
        sa, ea = _sig_exp(float(x), _EMIN[ta])
        sb, eb = _sig_exp(float(y), _EMIN[tb])
        terms.append((sa * sb, None if ea is None or eb is None else ea + eb))
    terms = [(s, e) for s, e in terms if e is not None]
    if fp8:
        # even / odd positions of the group (by k), each fused separately, then floor-aligned
        even = [(s, e) for idx, (s, e) in enumerate(_positions(a, b, ta, tb)) if idx % 2 == 0 and e is not None]
        odd = [(s, e) for idx, (s, e) in enumerate(_positions(a, b, ta, tb)) if idx % 2 == 1 and e is not None]
        s0, e0 = _fused_sum(even)
        s1, e1 = _fused_sum(odd)
        if e0 is None and e1 is None:
            s, E = Fraction(0), None
        else:
            E = max(e for e in (e0, e1) if e is not None)
            s = Fraction(0)
            for sk, ek in ((s0, e0), (s1, e1)):
                if ek is not None:
                    s += Fraction(math.floor(sk * Fraction(2) ** (24 + ek - E)), 2**24)
    else:
        s, E = _fused_sum(terms)
    sc, ec = _sig_exp(c, -126)
    if E is None and ec is None:
        return 0.0
    Emax = max(e for e in (E, ec) if e is not None)
    total = Fraction(0)
    if E is not None:
        total += Fraction(math.floor(s * Fraction(2) ** (31 + E - Emax)), 2**31)
    if ec is not None and not (fp8 and ec < Emax - 25):
        total += Fraction(math.floor(sc * Fraction(2) ** (24 + ec - Emax)), 2**24)
    return f32_rne(total * Fraction(2) ** Emax)


def _positions(a, b, ta, tb):
    out = []
    for x, y in zip(a, b):
        sa, ea = _sig_exp(float(x), _EMIN[ta])
        sb, eb = _sig_exp(float(y), _EMIN[tb])
        out.append((sa * sb, None if ea is None or eb is None else ea + eb))
    return out


def cdna3_model_applies(mn: str, arch950: bool) -> bool:
    ta, tb, to = operand_types(mn)
    return not arch950 and to == "f32" and ta in ("f16", "bf16", "fp8", "bf8", "f32")


def cdna3_reference(mn: str, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """D per the CDNA3 model. A[b][i][k], B[b][j][k], C[b][i][j] (exact input values)."""
    ta, tb, _ = operand_types(mn)
    NB, M, K = A.shape
    N = B.shape[1]
    fp8 = ta in ("fp8", "bf8")
    G = 16 if fp8 else min(8, K)
    D = np.zeros((NB, M, N))
    for b in range(NB):
        for i in range(M):
            for j in range(N):
                acc = float(np.float32(C[b, i, j]))
                if ta == "f32":
                    for k in range(K):
                        acc = f32_rne(Fraction(float(A[b, i, k])) * Fraction(float(B[b, j, k])) + Fraction(acc))
                else:
                    for k0 in range(0, K, G):
                        acc = _cdna3_group(A[b, i, k0:k0 + G], B[b, j, k0:k0 + G], ta, tb, acc, fp8)
                D[b, i, j] = acc
    return D


def check_mfma(mn: str, arch950: bool, got: np.ndarray, A: np.ndarray, B: np.ndarray, C: np.ndarray):
    """gfx942 f16/bf16/fp8/f32 forms: bit-exact against the CDNA3 model, and within its error bound of
    the exact product; other forms: within one f32 ulp of the exact result (see check_close)."""
    _, _, to = operand_types(mn)
    exact = reference(to, A, B.transpose(0, 2, 1), C)
    if not cdna3_model_applies(mn, arch950):
        check_close(to, got, exact)
        return
    want = cdna3_reference(mn, A, B, C)
    bad = np.argwhere(got.astype(np.float32).view(np.uint32) != want.astype(np.float32).view(np.uint32))
    assert bad.size == 0, f"{mn}: {len(bad)} elements differ from the CDNA3 model, first {bad[0]}: " \
                          f"{got[tuple(bad[0])]!r} vs {want[tuple(bad[0])]!r}"
    # the model's truncations stay within a small relative bound of the exact result
    mag = np.einsum("bik,bjk->bij", np.abs(A), np.abs(B)) + np.abs(C)
    assert np.all(np.abs(got - exact) <= 2.0**-16 * mag + 2 * np.spacing(np.abs(exact).astype(np.float32)))
