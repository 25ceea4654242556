"""fp8 K/V (e4m3fnuz, gfx942's native fp8) with per-tensor and per-head fp32 descales, bf16 q, on the gfx942
kernels: mha_kv_fp8[_d64] widens K and V to bf16 exactly (every one of the 256 codes, both halves of
v_cvt_pk_f32_fp8), the feature kernels fold k_descale into the logit factor and v_descale into O. vs float64 of the
dequantised K/V at the bounds of test_mha_kernel.py in every rounding mode, BHSD and BSHD, head dims 64 and 128, the
tail split forced, with sinks and soft-cap; power-of-two descales give the bf16 kernels' bits on the dequantised
K/V (the descales fold exactly); bad dtypes, shapes and values named."""
from __future__ import annotations

import pytest
import torch
from _mha_testing import bits, oracle_fp64, qkv, row_ulp
from test_mha_features import sinks_for
from test_mha_kernel import MODES, check_fp64, forced_split

import moonmath_mha_gfx942 as mha
from moonmath_common.numerics import e4m3fnuz_to_f32
from moonmath_mha_gfx942 import kernel

F8 = torch.float8_e4m3fnuz


def fp8_kv(k, v, layout, per_head, seed):
    """k, v quantised to e4m3fnuz with amax scaling (per head or per tensor); returns (k8, v8, k_descale, v_descale,
    K, V) with K, V the exact dequantised values (fp64) in k's layout."""
    hdim = 2 if layout == "bshd" else 1
    H = k.shape[hdim]
    out = []
    for t, bump in ((k, 1.0), (v, 0.75)):
        dims = [d for d in range(4) if d != hdim] if per_head else list(range(4))
        amax = t.float().abs().amax(dim=dims) * bump  # bump < 1: some codes saturate-free but large
        descale = (amax / 224.0).reshape(-1).expand(H if per_head else 1).contiguous()
        shape = [1] * 4
        shape[hdim] = -1
        q8 = (t.float() / (descale.view(shape) if per_head else descale)).clamp(-240, 240).to(F8)
        deq = e4m3fnuz_to_f32(q8).double() * (descale.double().view(shape) if per_head else descale.double())
        out.append((q8, descale, deq))
    (k8, kd, K), (v8, vd, V) = out
    return k8, v8, kd, vd, K, V


SHAPES = [(1, 2, 63, 65, 128), (2, 3, 300, 130, 64), (1, 1, 1, 383, 128), (1, 2, 257, 1000, 64)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", MODES)
def test_fp8_kv_against_fp64(emu_backend, shape, mode):
    B, H, Sq, Skv, D = shape
    layout = "bshd" if Sq % 2 else "bhsd"
    per_head = (Skv + (mode == "rtz")) % 2 == 0
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=sum(shape), scale=1.5, D=D)
    k8, v8, kd, vd, K, V = fp8_kv(k, v, layout, per_head, sum(shape))
    out = mha.forward(q, k8, v8, round_mode=mode, layout=layout, k_descale=kd, v_descale=vd)
    ref = oracle_fp64(q, K, V, layout)
    check_fp64(out, ref, mode)
    # the descales are applied (a kernel ignoring them is off by their factor)
    assert float(((oracle_fp64(q, e4m3fnuz_to_f32(k8), V, layout) - ref).abs() / row_ulp(ref)).max()) > 10


@pytest.mark.parametrize("D", (64, 128))
def test_fp8_widening_is_exact_for_every_code(emu_backend, D):
    """Every e4m3fnuz code (0x80 the NaN) in K and V: the widened K rows are the codes' exact values; the V_t
    block is the bf16 transpose's of the widened V, byte for byte."""
    H, Skv = 2, 130
    g = torch.Generator().manual_seed(D)
    codes = torch.randint(0, 256, (1, H, Skv, D), generator=g, dtype=torch.uint8)
    codes.view(-1)[:256] = torch.arange(256, dtype=torch.uint8)
    codes.view(-1)[-256:] = torch.arange(256, dtype=torch.uint8).flip(0)
    k8, v8 = codes.view(F8), codes.flip(2).contiguous().view(F8)
    bh, nkb = H, -(-Skv // 64)
    kw = torch.empty(bh * Skv * D, dtype=torch.bfloat16)
    vt = torch.empty(bh * nkb * 64 * D, dtype=torch.bfloat16)
    st = (D, Skv * D, H * Skv * D)
    kernel.KERNELS.launch(kernel.OP, kernel.ARCH, kernel.code_object(D), kernel.transpose_kernel(D, fp8=True),
                          grid=(nkb, bh), block=256, args=[k8, v8, kw, vt, Skv, H, *st])
    want = e4m3fnuz_to_f32(k8).reshape(-1)
    nan = torch.isnan(want)
    assert int(nan.sum()) > 0 and torch.equal(torch.isnan(kw.float()), nan)
    assert torch.equal(kw.float()[~nan], want[~nan])
    vw = e4m3fnuz_to_f32(v8).to(torch.bfloat16)   # exact
    vt_ref = torch.empty_like(vt)
    kernel.KERNELS.launch(kernel.OP, kernel.ARCH, kernel.code_object(D), kernel.transpose_kernel(D), grid=(nkb, bh),
                          block=256, args=[vw, vt_ref, Skv, H, 2 * D, 2 * Skv * D, 2 * H * Skv * D])
    same = (bits(vt) == bits(vt_ref)) | (torch.isnan(vt.float()) & torch.isnan(vt_ref.float()))
    assert bool(same.all())


@pytest.mark.parametrize("mode,D", [("rtna", 128), ("rtne", 64), ("rtz", 128)])
def test_power_of_two_descales_give_the_bf16_kernel_bits(emu_backend, mode, D):
    """S = (q . k8) (scale k_descale) and O = v_descale (P V8) / l are exact rescalings of the bf16 kernel's
    arithmetic on K = k_descale k8, V = v_descale v8 when the descales are powers of two."""
    B, H, Sq, Skv = 1, 2, 300, 200
    q, k, v = qkv(B, H, Sq, Skv, seed=12, D=D)
    k8, v8 = (k.float() * 8).to(F8), (v.float() * 16).to(F8)
    kd, vd = torch.tensor([0.125, 0.0625]), torch.tensor([2.0 ** -4])
    K = (e4m3fnuz_to_f32(k8) * kd.view(1, -1, 1, 1)).to(torch.bfloat16)
    V = (e4m3fnuz_to_f32(v8) * vd).to(torch.bfloat16)
    got = mha.forward(q, k8, v8, round_mode=mode, k_descale=kd, v_descale=vd)
    assert torch.equal(bits(got), bits(mha.forward(q, K, V, round_mode=mode)))


@pytest.mark.parametrize("mode,layout,D,cap,with_sinks", [
    ("rtna", "bhsd", 128, 0.0, False), ("rtne", "bshd", 64, 12.0, True), ("rtz", "bhsd", 128, 8.0, True),
    ("rtna", "bshd", 64, 0.0, True)])
def test_fp8_tail_split_and_features(emu_backend, mode, layout, D, cap, with_sinks):
    B, H, Sq, Skv, cus = 1, 3, 385, 1000, 4
    forced_split(B, H, Sq, Skv, cus)
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=13, scale=2.5, D=D)
    k8, v8, kd, vd, K, V = fp8_kv(k, v, layout, per_head=True, seed=13)
    sk = sinks_for(q, K, layout, cap, 13) if with_sinks else None
    out = torch.empty_like(q)
    launches = kernel.run(q, k8, v8, out, layout, mode, cus=cus, min_kv_blocks=4, sinks=sk, softcap=cap,
                          k_descale=kd, v_descale=vd)
    assert len(launches) == 4
    ref = oracle_fp64(q, K, V, layout, cap, sk)
    check_fp64(out, ref, mode)
    unsplit = mha.forward(q, k8, v8, layout=layout, round_mode=mode, sinks=sk, softcap=cap, k_descale=kd,
                          v_descale=vd)
    assert float(((out.double() - unsplit.double()).abs() / row_ulp(unsplit)).max()) <= 1.0


def test_fp8_reference_backend():
    from moonmath_common import use_backend

    q, k, v = qkv(2, 3, 40, 70, layout="bshd", seed=14, scale=2.0, D=64)
    k8, v8, kd, vd, K, V = fp8_kv(k, v, "bshd", per_head=False, seed=14)
    with use_backend("reference"):
        out = mha.forward(q, k8, v8, layout="bshd", round_mode="rtne", softcap=6.0, k_descale=kd, v_descale=vd)
    check_fp64(out, oracle_fp64(q, K, V, "bshd", 6.0), "rtne")


def _f8(*shape):
    return torch.zeros(shape).to(F8)


@pytest.mark.parametrize("args,err,match", [
    (dict(k=_f8(1, 2, 8, 128)), TypeError, "v must have dtype float8_e4m3fnuz"),
    (dict(k=_f8(1, 2, 8, 128).view(torch.uint8).view(torch.float8_e4m3fn), v=_f8(1, 2, 8, 128).view(torch.uint8)
          .view(torch.float8_e4m3fn)), TypeError, "k must have dtype bfloat16 or float8_e4m3fnuz"),
    (dict(k_descale=torch.ones(1)), ValueError, "k_descale applies to fp8"),
    (dict(v_descale=torch.ones(2)), ValueError, "v_descale applies to fp8"),
    (dict(k=_f8(1, 2, 8, 128), v=_f8(1, 2, 8, 128), k_descale=torch.ones(3)), ValueError, "k_descale must be one"),
    (dict(k=_f8(1, 2, 8, 128), v=_f8(1, 2, 8, 128), v_descale=torch.ones(1, 2)), ValueError, "v_descale must be one"),
    (dict(k=_f8(1, 2, 8, 128), v=_f8(1, 2, 8, 128), k_descale=torch.ones(2, dtype=torch.float64)), TypeError,
     "k_descale must have dtype float32"),
    (dict(k=_f8(1, 2, 8, 128), v=_f8(1, 2, 8, 128), v_descale=torch.tensor([1.0, 0.0])), ValueError,
     "v_descale must be finite and > 0"),
    (dict(k=_f8(1, 2, 8, 128), v=_f8(1, 2, 8, 128), k_descale=torch.tensor(float("inf"))), ValueError,
     "k_descale must be finite and > 0"),
    (dict(k=_f8(1, 2, 8, 128), v=_f8(1, 2, 9, 128)), ValueError, "v must have k's shape"),
    (dict(k=_f8(1, 2, 8, 128), v=_f8(1, 2, 8, 128), k_descale=0.5), TypeError, "k_descale must be a torch.Tensor"),
    (dict(k=_f8(1, 2, 8, 128), v=_f8(1, 2, 8, 128), v_descale=torch.ones(2, device="meta")), ValueError,
     "v_descale must be on cpu"),
])
def test_bad_fp8_arguments_are_named(args, err, match):
    from moonmath_common import use_backend

    q, k, v = qkv(1, 2, 8, 8, seed=9)
    kw = dict(q=q, k=k, v=v)
    kw.update(args)
    with use_backend("reference"), pytest.raises(err, match=match):
        mha.forward(**kw)


def test_metapackage_fp8_on_gfx942(emu_backend):
    ma = pytest.importorskip("moonmath_amd")
    from moonmath_common import target_arch

    if target_arch() != "gfx942":
        pytest.skip("the emulator targets another arch here")
    q, k, v = qkv(1, 2, 63, 65, layout="bshd", seed=15, D=64)
    k8, v8, kd, vd, K, V = fp8_kv(k, v, "bshd", per_head=True, seed=15)
    out = ma.forward(q, k8, v8, layout="bshd", k_descale=kd, v_descale=vd)
    assert torch.equal(bits(out), bits(mha.forward(q, k8, v8, layout="bshd", k_descale=kd, v_descale=vd)))
    check_fp64(out, oracle_fp64(q, K, V, "bshd"), "rtna")
    with pytest.raises(TypeError, match="k must have dtype bfloat16 or float8_e4m3fnuz"):
        ma.forward(q, k8.view(torch.uint8).view(torch.float8_e4m3fn), v8.view(torch.uint8).view(torch.float8_e4m3fn),
                   layout="bshd")
