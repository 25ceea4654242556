"""Head dims 64 and 96 on the gfx942 kernels (HeadDim<D>: mha_fwd_d64_<m> / mha_fwd_d96_<m>, the split / merge /
feature variants and mha_v_transpose_d64 / _d96): vs float64 at the bounds of test_mha_kernel.py in every rounding
mode, BHSD == BSHD bit for bit, the tail KV-split forced, with sinks and soft-cap; the d64 / d96 kernels are the ones
that ran. (The slow sweep of every length pair runs them too: test_mha_kernel.py.)"""
from __future__ import annotations

import pytest
import torch
from _mha_testing import bits, oracle_fp64, qkv, row_ulp
from test_mha_features import FEATURES, sinks_for
from test_mha_kernel import MODES, check_fp64, forced_split

import moonmath_mha_gfx942 as mha
from moonmath_mha_gfx942 import kernel

CASES = [(64, s) for s in [(1, 1, 1, 1), (1, 2, 63, 65), (2, 1, 257, 383), (1, 3, 385, 1000)]] + \
        [(96, s) for s in [(1, 2, 63, 65), (1, 3, 385, 1000)]]


@pytest.fixture
def launched(monkeypatch):
    """The names of the kernels kernel.run launches, in order."""
    names, launch = [], kernel.KERNELS.launch

    def record(op, arch, code_object, name, **kw):
        names.append(name)
        return launch(op, arch, code_object, name, **kw)

    monkeypatch.setattr(kernel.KERNELS, "launch", record)
    return names


@pytest.mark.parametrize("D,shape", CASES, ids=lambda c: "x".join(map(str, c)) if isinstance(c, tuple) else str(c))
@pytest.mark.parametrize("mode", MODES)
def test_head_dim_against_fp64(emu_backend, D, shape, mode):
    B, H, Sq, Skv = shape
    layout = "bshd" if Sq % 2 else "bhsd"
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=sum(shape), scale=1.5, D=D)
    out = mha.forward(q, k, v, round_mode=mode, layout=layout)
    assert out.shape == q.shape
    check_fp64(out, oracle_fp64(q, k, v, layout), mode)


@pytest.mark.parametrize("D", (64, 96))
def test_head_dim_kernels_run_and_layouts_agree(emu_backend, launched, D):
    B, H, Sq, Skv = 1, 2, 65, 130
    q, k, v = qkv(B, H, Sq, Skv, seed=3, D=D)
    out = torch.empty_like(q)
    kernel.run(q, k, v, out, "bhsd", "rtne")
    assert launched == [f"mha_v_transpose_d{D}", f"mha_fwd_d{D}_rtne"]
    qs, ks, vs = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    s = mha.forward(qs, ks, vs, layout="bshd", round_mode="rtne")
    assert torch.equal(bits(s.transpose(1, 2)), bits(out))


@pytest.mark.parametrize("D", (64, 96))
@pytest.mark.parametrize("mode,layout", [("rtna", "bhsd"), ("rtne", "bshd"), ("rtz", "bhsd")])
def test_head_dim_tail_split(emu_backend, launched, mode, layout, D):
    B, H, Sq, Skv, cus = 1, 3, 385, 1000, 4
    p = forced_split(B, H, Sq, Skv, cus)
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=4, D=D)
    out = torch.empty_like(q)
    launches = kernel.run(q, k, v, out, layout, mode, cus=cus, min_kv_blocks=4)
    assert launched[2:] == [f"mha_fwd_split_d{D}_{mode}", f"mha_merge_d{D}_{mode}"]
    assert launches[2]["workgroups"] == p.slots
    check_fp64(out, oracle_fp64(q, k, v, layout), mode)
    unsplit = mha.forward(q, k, v, layout=layout, round_mode=mode)
    assert float(((out.double() - unsplit.double()).abs() / row_ulp(unsplit)).max()) <= 1.0


@pytest.mark.parametrize("D,feature,mode,split", [
    (64, "sinks", "rtna", False), (64, "softcap", "rtz", True), (64, "softcap+sinks", "rtne", False),
    (64, "softcap+sinks", "rtna", True), (96, "softcap+sinks", "rtz", False), (96, "softcap+sinks", "rtne", True)])
def test_head_dim_features(emu_backend, launched, D, feature, mode, split):
    cap, with_sinks = FEATURES[feature]
    B, H, Sq, Skv, cus = 1, 3, 385, 1000, 4
    layout = "bshd" if split else "bhsd"
    q, k, v = qkv(B, H, Sq, Skv, layout=layout, seed=6, scale=3.0, D=D)  # scores up to ~25: the cap binds
    sk = sinks_for(q, k, layout, cap, 6) if with_sinks else None
    out = torch.empty_like(q)
    kernel.run(q, k, v, out, layout, mode, cus=cus if split else None, min_kv_blocks=4, tail=split, sinks=sk,
               softcap=cap)
    assert launched[1] == f"mha_fwd_feat_d{D}_{mode}"
    assert (launched[2] == f"mha_fwd_split_feat_d{D}_{mode}") if split else len(launched) == 2
    ref = oracle_fp64(q, k, v, layout, cap, sk)
    check_fp64(out, ref, mode)
    plain = oracle_fp64(q, k, v, layout)
    assert float(((plain - ref).abs() / row_ulp(ref)).max()) > 4 * 2.5


@pytest.mark.parametrize("D", (64, 96))
def test_head_dim_reference_backend(D):
    from moonmath_common import use_backend

    q, k, v = qkv(2, 3, 40, 70, layout="bshd", seed=8, scale=2.5, D=D)
    with use_backend("reference"):
        out = mha.forward(q, k, v, layout="bshd", round_mode="rtne", softcap=6.0)
    check_fp64(out, oracle_fp64(q, k, v, "bshd", 6.0), "rtne")



def test_d96_pad_of_the_k_stage_is_never_read(emu_backend):
    """Head dim 96 copies 256 bytes per K row into its padded LDS row: in BSHD the 64 bytes after a row of head 0
    are the first 32 dims of head 1. NaN there (all of head 1's k) must stay in head 1."""
    B, H, Sq, Skv = 1, 2, 70, 130
    q, k, v = qkv(B, H, Sq, Skv, layout="bshd", seed=16, D=96)
    k[:, :, 1] = float("nan")
    out = mha.forward(q, k, v, layout="bshd", round_mode="rtne")
    assert bool(torch.isnan(out[:, :, 1]).all())
    check_fp64(out[:, :, :1], oracle_fp64(q[:, :, :1], k[:, :, :1], v[:, :, :1], "bshd"), "rtne")
