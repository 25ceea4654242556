"""Hardware fp8/bf8/bf16 conversions in whole kernels (tests/corpus/fp8_convert.hip):
gfx942 converts to/from e4m3fnuz / e5m2fnuz, gfx950 to/from OCP e4m3fn / e5m2. In-range results are
checked against torch's float8 dtypes; out-of-range and NaN/Inf inputs against the documented
non-saturating behaviour (clamp bit clear): FNUZ -> 0x80 (NaN), e4m3fn -> S.1111.111 (NaN),
e5m2 -> +-Inf."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_util import ARCHS, session_corpus  # noqa: E402
from mfma_ref import MAX_FINITE, TORCH_DTYPES, ref_encode, ref_value  # noqa: E402


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return session_corpus(tmp_path_factory)


FMT = {
    ("gfx942", "fp8"): "e4m3fnuz", ("gfx942", "bf8"): "e5m2fnuz",
    ("gfx950", "fp8"): "e4m3fn", ("gfx950", "bf8"): "e5m2",
}


def inputs(name: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    maxv = MAX_FINITE[name]
    vals = sorted({abs(ref_value(name, c)) for c in range(256) if math.isfinite(ref_value(name, c))})
    mids = [(a + b) / 2 for a, b in zip(vals, vals[1:])]
    xs = vals + mids + list(rng.uniform(-maxv, maxv, 500)) + [maxv * 1.01, maxv * 4, 1e30, 1e-30]
    xs = np.array(xs, dtype=np.float32)
    xs = np.concatenate([xs, -xs, np.array([np.inf, -np.inf, np.nan, 0.0], np.float32)])
    pad = (-len(xs)) % 4
    return np.concatenate([xs, np.zeros(pad, np.float32)])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["fp8", "bf8"])
def test_encode(corpus, arch, kind):
    name = FMT[(arch, kind)]
    xs = inputs(name)
    n4 = len(xs) // 4
    out = torch.zeros(n4, dtype=torch.int32)
    corpus.module("fp8_convert", arch).launch(f"to_{kind}", grid=((n4 + 63) // 64, 1, 1), block=(64, 1, 1),
                                              args=[torch.from_numpy(xs), out, n4])
    got = out.numpy().view(np.uint8)  # little endian: byte 4i+k is x[4i+k]
    want = np.array([ref_encode(name, float(x), False) if not math.isnan(x) else -1 for x in xs])
    for x, g, w in zip(xs, got, want):
        if math.isnan(x):
            assert math.isnan(ref_value(name, int(g))), (name, x, hex(g))
        else:
            assert g == w, (name, float(x), hex(g), hex(w))
    # independent check: torch's casts agree wherever the value is in range
    inr = np.isfinite(xs) & (np.abs(xs) <= MAX_FINITE[name])
    t = torch.from_numpy(xs[inr]).to(TORCH_DTYPES[name]).view(torch.uint8).numpy()
    assert np.array_equal(got[inr], t)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["fp8", "bf8", "fp8_pk"])
def test_decode(corpus, arch, kind):
    """Every byte decoded (fp8_pk: the packed v_cvt_pk_f32_fp8, both words: gfx942's fnuz widening path)."""
    name = FMT[(arch, kind.removesuffix("_pk"))]
    codes = np.arange(256, dtype=np.uint8)
    words = torch.from_numpy(codes.view(np.int32).copy())
    out = torch.zeros(256)
    corpus.module("fp8_convert", arch).launch(f"from_{kind}", grid=(1, 1, 1), block=(64, 1, 1), args=[words, out, 64])
    t = torch.from_numpy(codes).view(TORCH_DTYPES[name]).float().numpy()
    got = out.numpy()
    assert np.array_equal(np.isnan(got), np.isnan(t))
    ok = ~np.isnan(t)
    assert np.array_equal(got[ok], t[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(t[ok]))


@pytest.mark.parametrize("arch", ARCHS)
def test_encode_stochastic_rounding(corpus, arch):
    """v_cvt_sr_fp8_f32: the ISA pseudocode adds S1[31:12] to the f32 mantissa (wrapping in 23 bits)
    and converts the result with round-to-nearest-even."""
    name = FMT[(arch, "fp8")]
    rng = np.random.default_rng(1)
    n = 256
    x = rng.uniform(-200, 200, n).astype(np.float32)
    rnd = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = torch.zeros(n, dtype=torch.int32)
    corpus.module("fp8_convert", arch).launch("to_fp8_sr", grid=(4, 1, 1), block=(64, 1, 1),
                                              args=[torch.from_numpy(x), torch.from_numpy(rnd.view(np.int32)), out, n])
    got = out.numpy().view(np.uint32)
    for i in range(n):
        u = int(x[i].view(np.uint32))
        m = ((u & 0x7FFFFF) + (int(rnd[i]) >> 12)) & 0x7FFFFF
        pert = np.array([(u & 0xFF800000) | m], np.uint32).view(np.float32)[0]
        code = ref_encode(name, float(pert), False)
        byte = i & 3
        want = (0x11111111 & ~(0xFF << (8 * byte))) | (code << (8 * byte))
        assert int(got[i]) == want, (i, float(x[i]), hex(int(got[i])), hex(want))


@pytest.mark.parametrize("arch", ARCHS)
def test_to_bf16_round_nearest_even(corpus, arch):
    rng = np.random.default_rng(2)
    bits = np.concatenate([rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32),
                           np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x00008000, 0x00018000, 0x7F800000,
                                     0xFF800000, 0x7FC00000, 0x80000000, 0x7F800001, 0xFF9391EF], np.uint32)])
    x = bits.view(np.float32)
    out = torch.zeros(len(x), dtype=torch.int16)
    corpus.module("fp8_convert", arch).launch("to_bf16", grid=((len(x) + 255) // 256, 1, 1), block=(256, 1, 1),
                                              args=[torch.from_numpy(x.copy()), out, len(x)])
    got = out.numpy().view(np.uint16)
    want = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    # NaN: quiet bit forced, sign and top payload bits kept: (x | 0x00400000) >> 16. On gfx942 this is
    # LLVM's integer expansion (v_or_b32 0x400000 / v_cndmask on v_cmp_u_f32), executed instruction by
    # instruction; on gfx950 it is our model of v_cvt_pk_bf16_f32 (which LLVM substitutes for that
    # sequence). A NaN must never come out as Inf (0x7f800001 -> 0x7fc0, not 0x7f80).
    assert np.array_equal(got[nan], ((bits[nan] | np.uint32(0x00400000)) >> 16).astype(np.uint16))
