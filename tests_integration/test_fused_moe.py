"""moonmath_amd.fused_moe: a whole MXFP4 MoE layer in one call (align, gate/up, down, top-k sum) built from the
public ops, against float64 formulations written independently from the stock weights: a16w4 on the reference
backend and on the emulator (gfx942, gfx950), a4w4 (AITER's per_1x32 semantics) on the emulator's gfx950."""
from __future__ import annotations

import pytest
import torch

import moonmath_amd as ma
from moonmath_common import get_backend, use_backend
from moonmath_common.numerics import e8m0_to_f32, unpack_e2m1
from moonmath_common.testing import random_mxfp4_moe_weights
from moonmath_mxfp4_moe import quant

T, H, I, E, TOP_K = 6, 256, 256, 5, 3


def dense(w, s):
    return unpack_e2m1(w).double() * e8m0_to_f32(s).double().repeat_interleave(32, -1)


@pytest.fixture(scope="module")
def layer():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(T, H, generator=g).to(torch.bfloat16)
    w13, s13, w2, s2 = random_mxfp4_moe_weights(E, H, I, g)
    ids = torch.stack([torch.randperm(E, generator=g)[:TOP_K] for _ in range(T)]).to(torch.int32)
    ids[0, 0] = E + 3  # routed nowhere (another EP rank's expert): contributes 0
    wts = torch.softmax(torch.randn(T, TOP_K, generator=g), -1)
    return dict(x=x, w13=w13, s13=s13, w2=w2, s2=s2, ids=ids, wts=wts)


def expected(L, a4w4=False):
    """float64: per token and expert, SwiGLU then the intermediate rounded to bf16 (a4w4: the activations and
    the intermediate quantised by AITER's rule), the down projection, the routing weight, the sum."""
    W13, W2 = dense(L["w13"], L["s13"]), dense(L["w2"], L["s2"])
    x = quant.dequantize(*quant.quantize_reference(L["x"])).double() if a4w4 else L["x"].double()
    out = torch.zeros(T, H, dtype=torch.float64)
    for t in range(T):
        for k in range(TOP_K):
            e = int(L["ids"][t, k])
            if not 0 <= e < E:
                continue
            a = W13[e] @ x[t]
            h = (a[:I] * torch.sigmoid(a[:I]) * a[I:]).to(torch.bfloat16)
            hq = quant.dequantize(*quant.quantize_reference(h[None]))[0].double() if a4w4 else h.double()
            out[t] += float(L["wts"][t, k]) * (W2[e] @ hq)
    return out


def run(L, **kw):
    return ma.fused_moe(L["x"], ma.repack_mxfp4(L["w13"]), ma.repack_mxfp4_scales(L["s13"]), ma.repack_mxfp4(L["w2"]),
                        ma.repack_mxfp4_scales(L["s2"]), L["wts"], L["ids"], **kw)


def rel(a, b):
    return float((a.double() - b).abs().max() / b.abs().max())


def test_reference_backend(layer):
    with use_backend("reference"):
        y = run(layer)
    assert y.shape == (T, H) and y.dtype == torch.bfloat16
    assert rel(y, expected(layer)) < 1e-2


def _emu(monkeypatch, arch):
    try:
        import moonmath_emu  # noqa: F401
    except ImportError:
        pytest.skip("needs moonmath-emu")
    if get_backend() == "hip":
        pytest.skip("emulator test")
    monkeypatch.setenv("MOONMATH_EMU_ARCH", arch)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_a16w4_on_the_emulator(layer, monkeypatch, arch):
    _emu(monkeypatch, arch)
    with use_backend("emu"):
        y = run(layer)
        out = torch.full((T, H), float("nan"), dtype=torch.bfloat16)
        y2 = run(layer, out=out)
    assert y2 is out and torch.equal(y, out)
    assert rel(y, expected(layer)) < 1e-2


def test_a4w4_on_the_emulator(layer, monkeypatch):
    _emu(monkeypatch, "gfx950")
    with use_backend("emu"):
        y = run(layer, activations="mxfp4")
    ref = expected(layer, a4w4=True)
    assert rel(y, ref) < 1e-2
    assert bool(torch.isclose(y.float(), ref.float(), rtol=5e-2, atol=5e-2).all())  # GPU MODE's check
    with use_backend("reference"):
        yr = run(layer, activations="mxfp4")
    assert rel(yr, ref) < 1e-2


def test_a4w4_gfx942_has_no_kernel(layer, monkeypatch):
    _emu(monkeypatch, "gfx942")
    with use_backend("emu"), pytest.raises(ma.NoKernelError):
        run(layer, activations="mxfp4")


def test_rejections(layer):
    with pytest.raises(ValueError, match="activations"):
        run(layer, activations="fp8")
    with pytest.raises(ValueError, match="epilogue"):
        run(layer, epilogue=ma.EPI_NONE)
    with pytest.raises(ValueError, match="topk_weights"):
        ma.fused_moe(layer["x"], ma.repack_mxfp4(layer["w13"]), ma.repack_mxfp4_scales(layer["s13"]),
                     ma.repack_mxfp4(layer["w2"]), ma.repack_mxfp4_scales(layer["s2"]), layer["wts"][:, :2],
                     layer["ids"])
    with pytest.raises(TypeError, match="hidden_states"):
        ma.fused_moe(layer["x"].float(), ma.repack_mxfp4(layer["w13"]), ma.repack_mxfp4_scales(layer["s13"]),
                     ma.repack_mxfp4(layer["w2"]), ma.repack_mxfp4_scales(layer["s2"]), layer["wts"], layer["ids"])
