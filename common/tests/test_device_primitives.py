"""The moonmath device primitives (common/include/moonmath) run in moonmath-emu, checked against torch."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import moonmath_emu as emu  # noqa: E402 - the device tests run in the emulator; CI always installs it
from moonmath_common.numerics import e4m3fn_to_f32, e4m3fnuz_to_f32, round_bf16

SRC = Path(__file__).parent / "device" / "primitives.hip"
ARCHS = ["gfx942", "gfx950"]


@pytest.fixture(params=ARCHS)
def mod(request, compile_hip):
    m = emu.Module(compile_hip(SRC, request.param))
    assert m.arch == request.param
    return m


def bits16(t):
    return t.view(torch.int16).to(torch.int32) & 0xFFFF


def test_bf16_rounding_modes(mod):
    g = torch.Generator().manual_seed(0)
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0 + 2**-8, 1.0 + 3 * 2**-8,
                            -(1.0 + 2**-8), 3.3895313892515355e38, -3.3895313892515355e38, 1e-40, -1e-40])
    payloads = [0x7FC00001, 0xFFFF0000 - 2**32, 0x7F800001]  # quiet, negative, signalling NaNs
    nan_payload = torch.tensor(payloads, dtype=torch.int64).to(torch.int32).view(torch.float32)
    x = torch.cat([special, nan_payload, torch.randn(1000, generator=g) * 100]).contiguous()
    n = x.numel()
    outs = [torch.zeros(n, dtype=torch.int16) for _ in range(3)]
    mod.launch("t_bf16_round", grid=((n + 63) // 64, 1, 1), block=(64, 1, 1), args=[x, *outs, n])
    for out, mode in zip(outs, ["rtne", "rtna", "rtz"]):
        want = bits16(round_bf16(x, mode))
        assert torch.equal(out.to(torch.int32) & 0xFFFF, want), mode


def test_pack_bf16x2(mod):
    x = torch.randn(256, generator=torch.Generator().manual_seed(1))
    out = torch.zeros(128, dtype=torch.int32)
    mod.launch("t_pack_bf16x2", grid=(2, 1, 1), block=(64, 1, 1), args=[x, out, 128])
    r = bits16(round_bf16(x, "rtne")).view(128, 2)
    assert torch.equal(out & 0xFFFF, r[:, 0]) and torch.equal((out >> 16) & 0xFFFF, r[:, 1])


def test_pack_f16x2(mod):
    g = torch.Generator().manual_seed(2)
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 65504.0, 65520.0, -70000.0, 1.0 + 2**-11,
                            1.0 + 3 * 2**-11, 6e-8, -3e-8, 1e-5, 1e-40])  # ties, overflow, subnormals
    x = torch.cat([special, torch.randn(243, generator=g) * 100, torch.randn(256, generator=g)]).contiguous()
    out = torch.zeros(256, dtype=torch.int32)
    mod.launch("t_pack_f16x2", grid=(4, 1, 1), block=(64, 1, 1), args=[x, out, 256])
    r = bits16(x.half()).view(256, 2)
    assert torch.equal(out & 0xFFFF, r[:, 0]) and torch.equal((out >> 16) & 0xFFFF, r[:, 1])


def test_decode_every_byte(mod):
    fnuz, fn, e2m1, e8m0 = (torch.zeros(256) for _ in range(4))
    mod.launch("t_decode", grid=(4, 1, 1), block=(64, 1, 1), args=[fnuz, fn, e2m1, e8m0])
    b = torch.arange(256, dtype=torch.uint8)
    torch.testing.assert_close(fnuz, e4m3fnuz_to_f32(b), equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(fn, e4m3fn_to_f32(b), equal_nan=True, rtol=0, atol=0)
    # independent checks through torch's own fp8 dtypes
    torch.testing.assert_close(fnuz, b.view(torch.float8_e4m3fnuz).float(), equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(fn, b.view(torch.float8_e4m3fn).float(), equal_nan=True, rtol=0, atol=0)
    mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    want_e2m1 = torch.tensor([(-1 if n & 8 else 1) * mags[n & 7] for n in range(16)] * 16)
    assert torch.equal(e2m1, want_e2m1)
    e8m0_values = [2.0 ** (e - 127) if e < 255 else float("nan") for e in range(256)]
    want_e8m0 = torch.tensor(e8m0_values, dtype=torch.float64).float()
    torch.testing.assert_close(e8m0, want_e8m0, equal_nan=True, rtol=0, atol=0)


def test_convert_fp8_and_bf16_packs(mod):
    words = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.int32)  # bytes 0..255 in order
    f = torch.zeros(256)
    hi_pack, rna_pack = torch.zeros(64, dtype=torch.int32), torch.zeros(64, dtype=torch.int32)
    x = torch.randn(128, generator=torch.Generator().manual_seed(6)) * 50
    mod.launch("t_convert", grid=(1, 1, 1), block=(64, 1, 1), args=[words, f, hi_pack, rna_pack, x])
    b = torch.arange(256, dtype=torch.uint8)
    native = e4m3fnuz_to_f32(b) if mod.arch == "gfx942" else e4m3fn_to_f32(b)
    torch.testing.assert_close(f, native, equal_nan=True, rtol=0, atol=0)
    for got, mode in ((hi_pack, "rtz"), (rna_pack, "rtna")):
        r = bits16(round_bf16(x, mode)).view(64, 2)
        assert torch.equal(got & 0xFFFF, r[:, 0]) and torch.equal((got >> 16) & 0xFFFF, r[:, 1]), mode


def test_buffer_range_rules_and_direct_to_lds(mod):
    src = torch.arange(1, 65, dtype=torch.int32) * 10
    dst = torch.full((64,), -1, dtype=torch.int32)
    lds_out = torch.full((64,), -1, dtype=torch.int32)
    # only the first 40 source dwords and the first 24 destination dwords are in range
    mod.launch("t_buffer", grid=(1, 1, 1), block=(64, 1, 1), args=[src, 40 * 4, dst, 24 * 4, lds_out])
    loaded = torch.where(torch.arange(64) < 40, src, torch.zeros_like(src))
    assert torch.equal(dst[:24], loaded[:24] + 1000)
    assert torch.all(dst[24:] == -1), "out-of-range stores must be dropped"
    assert torch.equal(lds_out, loaded)


def test_direct_to_lds_instruction_offset(mod):
    src = torch.arange(1, 257, dtype=torch.int32)
    lds_out = torch.full((192,), -1, dtype=torch.int32)
    soff = 64 * 4  # piece 1 reads dwords 128.. of the source (offset 256 + soff) into LDS dwords 64..
    n_valid = 170  # dwords in range: piece 1 is cut at 170 - 128 = 42 lanes, piece 2 at 170 - 128 = 42
    mod.launch("t_buffer_to_lds_at", grid=(1, 1, 1), block=(64, 1, 1), args=[src, n_valid * 4, soff, lds_out])
    lanes = torch.arange(64)
    want0 = src[:64]
    idx1, idx2 = lanes + 128, lanes + 128
    want1 = torch.where(idx1 < n_valid, src[idx1.clamp(max=255)], torch.zeros(64, dtype=torch.int32))
    want2 = torch.where(idx2 < n_valid, src[idx2.clamp(max=255)], torch.zeros(64, dtype=torch.int32))
    assert torch.equal(lds_out[:64], want0)
    assert torch.equal(lds_out[64:128], want1), "piece 1: LDS at +256 bytes, source at +256 + soffset"
    assert torch.equal(lds_out[128:], want2), "piece 2: LDS and source both at +512 bytes"


def test_buffer_wide_loads_stores(mod):
    n_bytes = 64 * 16
    src = torch.arange(n_bytes // 4, dtype=torch.int32)
    dst = torch.zeros(n_bytes // 4 + 64 * 2, dtype=torch.int32)
    mod.launch("t_buffer_wide", grid=(1, 1, 1), block=(64, 1, 1), args=[src, dst, n_bytes])
    half = n_bytes // 8  # dwords before the b64 stores
    want = src.clone()
    want[half:] = src[: n_bytes // 4 - half] + 7  # b64 stores at n_bytes/2 overwrite the upper half
    assert torch.equal(dst[: n_bytes // 4], want)
    assert torch.all(dst[n_bytes // 4:] == 0), "stores past num_records must be dropped"


def test_cross_lane(mod):
    x = torch.randn(64, generator=torch.Generator().manual_seed(2))
    sw, bp, dpp = (torch.zeros(64, dtype=torch.int32) for _ in range(3))
    wmax, wsum = torch.zeros(64), torch.zeros(64)
    mod.launch("t_xlane", grid=(1, 1, 1), block=(64, 1, 1), args=[x, sw, bp, dpp, wmax, wsum])
    lane = torch.arange(64)
    v = lane * 3 + 1
    # ds_swizzle bit-mask mode works within 32-lane halves: xor 1 and xor 16
    assert torch.equal(sw & 0xFFFF, v[lane ^ 1].int())
    assert torch.equal(sw >> 16, v[lane ^ 16].int())
    assert torch.equal(bp, v[(lane * 7 + 5) & 63].int())
    # DPP row_shr:1 within rows of 16; lane 0 of a row has no source: bound_ctrl gives 0
    want = torch.where(lane % 16 == 0, torch.zeros_like(v), v[(lane - 1).clamp(min=0)])
    assert torch.equal(dpp, want.int())
    assert torch.all(wmax == x.max())
    torch.testing.assert_close(wsum, torch.full((64,), float(x.double().sum())), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_wave_reduce_uniform_is_the_butterfly_bit_for_bit(mod, seed):
    """mm::wave_sum_uniform / wave_max_uniform (DPP within rows, then the rows by readlane) give wave_sum's and
    wave_max's bits: the same pairs are added in the same order. Seeds 4 and 5 put a -inf and a NaN among the lanes."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, generator=g) * torch.exp2(torch.randint(-20, 20, (64,), generator=g).float())
    if seed >= 4:
        x[int(torch.randint(64, (1,), generator=g))] = float("-inf") if seed == 4 else float("nan")
    out = torch.zeros(4)
    mod.launch("t_wave_reduce_uniform", grid=(1, 1, 1), block=(64, 1, 1), args=[x, out])
    bits = out.view(torch.int32)
    if seed < 5:  # a NaN sum is NaN both ways (its payload is not compared)
        assert int(bits[0]) == int(bits[1])
    else:
        assert bool(torch.isnan(out[0])) and bool(torch.isnan(out[1]))
    assert int(bits[2]) == int(bits[3])


def _bf16(t):
    return t.to(torch.bfloat16)


def test_mfma_16x16x16_bf16_layout(mod):
    g = torch.Generator().manual_seed(3)
    a, b = _bf16(torch.randn(16, 16, generator=g)), _bf16(torch.randn(16, 16, generator=g))
    c = torch.randn(16, 16, generator=g)
    d = torch.zeros(16, 16)
    mod.launch("t_mfma16", grid=(1, 1, 1), block=(64, 1, 1),
               args=[a.view(torch.int16), b.view(torch.int16), c, d])
    want = (a.double() @ b.double() + c.double()).float()
    torch.testing.assert_close(d, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("c_fill", [float("nan"), float("inf"), float("-inf")])
def test_mfma_propagates_nonfinite_accumulator(mod, c_fill):
    g = torch.Generator().manual_seed(8)
    a, b = _bf16(torch.randn(16, 16, generator=g)), _bf16(torch.randn(16, 16, generator=g))
    c = torch.zeros(16, 16)
    c[3] = c_fill  # row 3 of C
    d = torch.zeros(16, 16)
    mod.launch("t_mfma16", grid=(1, 1, 1), block=(64, 1, 1), args=[a.view(torch.int16), b.view(torch.int16), c, d])
    want = a.double() @ b.double() + c.double()
    assert torch.equal(torch.isnan(d), torch.isnan(want)) and torch.equal(torch.isinf(d), torch.isinf(want))
    torch.testing.assert_close(d[3], want[3].float(), equal_nan=True, rtol=0, atol=0)


def test_mfma_sum_overflows_to_inf(mod):
    a = _bf16(torch.full((16, 16), 2.0**63))
    c = torch.full((16, 16), 3e38)
    d = torch.zeros(16, 16)
    mod.launch("t_mfma16", grid=(1, 1, 1), block=(64, 1, 1), args=[a.view(torch.int16), a.view(torch.int16), c, d])
    assert torch.all(d == float("inf"))


def test_mfma_16x16x32_bf16_layout(compile_hip):
    mod = emu.Module(compile_hip(SRC, "gfx950"))
    g = torch.Generator().manual_seed(4)
    a, b = _bf16(torch.randn(16, 32, generator=g)), _bf16(torch.randn(32, 16, generator=g))
    c = torch.randn(16, 16, generator=g)
    d = torch.zeros(16, 16)
    mod.launch("t_mfma16x32", grid=(1, 1, 1), block=(64, 1, 1),
               args=[a.view(torch.int16), b.view(torch.int16), c, d])
    want = (a.double() @ b.double() + c.double()).float()
    torch.testing.assert_close(d, want, rtol=1e-5, atol=1e-5)


def test_online_softmax_and_lse_merge(mod):
    g = torch.Generator().manual_seed(5)
    n_blocks, block_len, n_lses = 3, 5, 4
    s = torch.randn(64, n_blocks, block_len, generator=g) * 6
    s[0] = float("-inf")  # a row that sees nothing
    lses = torch.randn(64, n_lses, generator=g) * 4
    lses[1] = float("inf")  # every partial empty
    lses[2, 0] = float("nan")
    lse_online, lse_merged = torch.zeros(64), torch.zeros(64)
    mod.launch("t_softmax", grid=(1, 1, 1), block=(64, 1, 1),
               args=[s, n_blocks, block_len, lse_online, lses, n_lses, lse_merged])
    ln2 = torch.log(torch.tensor(2.0, dtype=torch.float64))
    want = torch.logsumexp(s.double().flatten(1) * ln2, 1) / ln2
    assert torch.isneginf(lse_online[0])
    torch.testing.assert_close(lse_online[1:].double(), want[1:], rtol=1e-5, atol=1e-5)
    valid = lses.abs() < 3e38
    neg_inf = torch.tensor(float("-inf"), dtype=torch.float64)
    wm = torch.logsumexp(torch.where(valid, lses.double() * ln2, neg_inf), 1) / ln2
    assert torch.isneginf(lse_merged[1])
    assert torch.isnan(lse_merged[2])  # a NaN part poisons the merge, it is not an empty part
    keep = (torch.arange(64) != 1) & (torch.arange(64) != 2)
    torch.testing.assert_close(lse_merged[keep].double(), wm[keep], rtol=1e-5, atol=1e-5)


def test_ids_and_hidden_args(mod):
    grid, block = (3, 2, 1), (128, 1, 1)
    n = 3 * 2 * 128
    out = torch.full((n * 4,), -1, dtype=torch.int32)
    mod.launch("t_ids", grid=grid, block=block, args=[out])
    o = out.view(2, 3, 128, 4)
    assert torch.equal(o[..., 0], torch.arange(128).expand(2, 3, 128).int())
    assert torch.all(o[..., 1] == 128 | (1 << 16))
    assert torch.all(o[..., 2] == 3)
    t = torch.arange(128)
    assert torch.equal(o[..., 3], ((t % 64) | ((t // 64) << 8)).expand(2, 3, 128).int())


def test_block_sync_exchanges_lds_across_waves(mod):
    out = torch.zeros(256, dtype=torch.int32)
    mod.launch("t_block_sync", grid=(1, 1, 1), block=(256, 1, 1), args=[out])
    t = torch.arange(256)
    assert torch.equal(out, ((255 - t) * (255 - t)).int())


def test_perm_selects_bytes(mod):
    g = torch.Generator().manual_seed(9)
    hi, lo = (torch.randint(-2**31, 2**31 - 1, (64,), generator=g, dtype=torch.int64).to(torch.int32) for _ in range(2))
    choices = torch.tensor(list(range(8)) + [0x0C])
    sel_bytes = choices[torch.randint(0, 9, (64, 4), generator=g)]
    sel = (sel_bytes[:, 0] | sel_bytes[:, 1] << 8 | sel_bytes[:, 2] << 16 | sel_bytes[:, 3] << 24).to(torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    mod.launch("t_perm", grid=(1, 1, 1), block=(64, 1, 1), args=[hi, lo, sel, out])
    src = torch.stack([lo.view(torch.uint8).view(64, 4), hi.view(torch.uint8).view(64, 4)], 1)
    src = src.view(64, 8).to(torch.int64)
    want = torch.where(sel_bytes == 0x0C, 0, torch.gather(src, 1, sel_bytes.clamp(max=7)))
    assert torch.equal(out.view(torch.uint8).view(64, 4).to(torch.int64), want)
