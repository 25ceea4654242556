"""mla_decode_a16w8: every argument's bad inputs are rejected with a TypeError/ValueError naming it."""
from __future__ import annotations

import pytest
import torch

from moonmath_common import use_backend
from moonmath_mla_decode.decode import mla_decode_a16w8

bf, i32, u8 = torch.bfloat16, torch.int32, torch.uint8


def good(B=2, q_len=2, H=4, lens=(5, 3), slots=10):
    T = B * q_len
    return dict(q_lat=torch.zeros(T, H, 512, dtype=bf), q_pe=torch.zeros(T, H, 64, dtype=bf),
                kv_pool=torch.zeros(slots, 1, 576).to(torch.float8_e4m3fnuz), o_lat=torch.zeros(T, H, 512, dtype=bf),
                seq_lens=torch.tensor(lens, dtype=i32), kv_indices=torch.arange(sum(lens), dtype=i32),
                kv_indptr=torch.tensor([0, lens[0], sum(lens)], dtype=i32), scale=0.1, kv_scale=0.5)


CASES = [
    ("q_lat type", dict(q_lat=None), TypeError, "q_lat must be a torch.Tensor"),
    ("q_lat dtype", dict(q_lat=torch.zeros(4, 4, 512)), TypeError, "q_lat must have dtype bfloat16"),
    ("q_lat rank", dict(q_lat=torch.zeros(4, 512, dtype=bf)), ValueError, "q_lat must be 3-D"),
    ("q_lat width", dict(q_lat=torch.zeros(4, 4, 256, dtype=bf)), ValueError, "q_lat must be \\[T, H, 512\\]"),
    ("q_lat contiguous", dict(q_lat=torch.zeros(4, 512, 4, dtype=bf).transpose(1, 2)), ValueError,
     "q_lat must be contiguous"),
    ("H zero", dict(q_lat=torch.zeros(4, 0, 512, dtype=bf)),
     ValueError, "H \\(q_lat.shape\\[1\\]\\) must be in \\[1, 128\\]"),
    ("H 129", dict(q_lat=torch.zeros(4, 129, 512, dtype=bf)), ValueError, "H \\(q_lat.shape\\[1\\]\\) must be in"),
    ("T not multiple of B", dict(q_lat=torch.zeros(3, 4, 512, dtype=bf), q_pe=torch.zeros(3, 4, 64, dtype=bf),
                                 o_lat=torch.zeros(3, 4, 512, dtype=bf)),
                                  ValueError, "T \\(q_lat.shape\\[0\\]\\) must be B \\* q_len"),
    ("q_pe dtype", dict(q_pe=torch.zeros(4, 4, 64)), TypeError, "q_pe must have dtype bfloat16"),
    ("q_pe shape", dict(q_pe=torch.zeros(4, 4, 32, dtype=bf)), ValueError, "q_pe must have shape \\[4, 4, 64\\]"),
    ("q_pe contiguous", dict(q_pe=torch.zeros(4, 64, 4, dtype=bf).transpose(1, 2)),
     ValueError, "q_pe must be contiguous"),
    ("kv_pool dtype", dict(kv_pool=torch.zeros(10, 1, 576).to(torch.float8_e4m3fn)), TypeError,
     "kv_pool must have dtype float8_e4m3fnuz on gfx942"),
    ("kv_pool not fp8", dict(kv_pool=torch.zeros(10, 1, 576, dtype=u8)), TypeError, "kv_pool must have dtype"),
    ("kv_pool rank", dict(kv_pool=torch.zeros(10, 576).to(torch.float8_e4m3fnuz)), ValueError, "kv_pool must be 3-D"),
    ("kv_pool row", dict(kv_pool=torch.zeros(10, 1, 512).to(torch.float8_e4m3fnuz)), ValueError,
     "kv_pool must be \\[slots, 1, 576\\]"),
    ("kv_pool page size", dict(kv_pool=torch.zeros(5, 2, 576).to(torch.float8_e4m3fnuz)), ValueError,
     "kv_pool must be \\[slots, 1, 576\\]"),
    ("o_lat dtype", dict(o_lat=torch.zeros(4, 4, 512)), TypeError, "o_lat must have dtype bfloat16"),
    ("o_lat shape", dict(o_lat=torch.zeros(4, 2, 512, dtype=bf)), ValueError, "o_lat must have shape"),
    ("o_lat contiguous", dict(o_lat=torch.zeros(4, 512, 4, dtype=bf).transpose(1, 2)), ValueError,
     "o_lat must be contiguous"),
    ("seq_lens dtype", dict(seq_lens=torch.tensor([5, 3])), TypeError, "seq_lens must have dtype int32"),
    ("seq_lens shape", dict(seq_lens=torch.tensor([5, 3, 1], dtype=i32)),
     ValueError, "seq_lens must have shape \\[2\\]"),
    ("seq_lens negative", dict(seq_lens=torch.tensor([-1, 3], dtype=i32)), ValueError, "seq_lens values must be >= 0"),
    ("seq_lens past span", dict(seq_lens=torch.tensor([6, 3], dtype=i32)), ValueError, "seq_lens\\[0\\] = 6 exceeds"),
    ("kv_indices dtype", dict(kv_indices=torch.arange(8)), TypeError, "kv_indices must have dtype int32"),
    ("kv_indices rank", dict(kv_indices=torch.arange(8, dtype=i32).view(2, 4)), ValueError, "kv_indices must be 1-D"),
    ("kv_indices range", dict(kv_indices=torch.tensor([0, 1, 2, 3, 10, 5, 6, 7], dtype=i32)), ValueError,
     "kv_indices \\(request 0\\) values must be in \\[0, 10\\)"),
    ("kv_indices negative", dict(kv_indices=torch.tensor([0, 1, 2, 3, 4, -5, 6, 7], dtype=i32)), ValueError,
     "kv_indices \\(request 1\\) values must be in \\[0, 10\\).*got -5 at kv_indices\\[5\\]"),
    ("scale beyond fp32", dict(scale=1e39), ValueError, "scale must be within fp32's range"),
    ("kv_scale beyond fp32", dict(kv_scale=-1e39), ValueError, "kv_scale must be within fp32's range"),
    ("kv_scale 2-element tensor", dict(kv_scale=torch.tensor([1.0, 2.0])), ValueError, "kv_scale must be a scalar"),
    ("scale meta tensor", dict(scale=torch.tensor(0.1, device="meta")), TypeError, "scale must be a float or a CPU"),
    ("cp_world 2**31", dict(cp_world=2**31), ValueError, "cp_world must be in"),
    ("kv_indptr dtype", dict(kv_indptr=torch.tensor([0, 5, 8])), TypeError, "kv_indptr must have dtype int32"),
    ("kv_indptr short", dict(kv_indptr=torch.tensor([0], dtype=i32)), ValueError, "kv_indptr must have B \\+ 1 >= 2"),
    ("kv_indptr decreasing", dict(kv_indptr=torch.tensor([0, 5, 4], dtype=i32)), ValueError,
     "kv_indptr must be non-decreasing"),
    ("kv_indptr past indices", dict(kv_indptr=torch.tensor([0, 5, 9], dtype=i32)),
     ValueError, "kv_indptr\\[-1\\] must be <="),
    ("kv_indptr negative", dict(kv_indptr=torch.tensor([-1, 5, 8], dtype=i32)),
     ValueError, "kv_indptr values must be >= 0"),
    ("scale type", dict(scale="0.1"), TypeError, "scale must be a float"),
    ("scale nan", dict(scale=float("nan")), ValueError, "scale must be finite"),
    ("kv_scale inf", dict(kv_scale=float("inf")), ValueError, "kv_scale must be finite"),
    ("lse dtype", dict(lse=torch.zeros(4, 4, dtype=bf)), TypeError, "lse must have dtype float32"),
    ("lse shape", dict(lse=torch.zeros(4, 3)), ValueError, "lse must have shape \\[4, 4\\]"),
    ("lse contiguous", dict(lse=torch.zeros(4, 4).t()), ValueError, "lse must be contiguous"),
    ("glen dtype", dict(glen=torch.tensor([5, 3])), TypeError, "glen must have dtype int32"),
    ("glen shape", dict(glen=torch.tensor([5], dtype=i32)), ValueError, "glen must have shape \\[2\\]"),
    ("glen missing with dcp", dict(cp_world=2, cp_rank=1), ValueError, "glen \\(the GLOBAL lengths"),
    ("glen negative", dict(glen=torch.tensor([-2, 3], dtype=i32), cp_world=2), ValueError, "glen values must be >= 0"),
    ("glen beyond seq_lens", dict(glen=torch.tensor([11, 3], dtype=i32), cp_world=2), ValueError,
     "glen\\[0\\] = 11 puts 6 positions on rank 0"),
    ("cp_rank type", dict(cp_rank=0.0), TypeError, "cp_rank must be an int"),
    ("cp_rank range", dict(cp_rank=2, cp_world=2, glen=torch.tensor([5, 3], dtype=i32)), ValueError,
     "cp_rank must satisfy 0 <= cp_rank < cp_world"),
    ("cp_rank negative", dict(cp_rank=-1), ValueError, "cp_rank must satisfy"),
    ("cp_world zero", dict(cp_world=0), ValueError, "cp_world must be in"),
    ("cp_world type", dict(cp_world=True), TypeError, "cp_world must be an int"),
    ("device mix", dict(lse=torch.zeros(4, 4, device="meta")), ValueError, "device"),
]


@pytest.mark.parametrize("name,change,exc,msg", CASES, ids=[c[0] for c in CASES])
def test_rejects(name, change, exc, msg):
    a = good()
    a.update(change)
    with use_backend("reference"), pytest.raises(exc, match=msg):
        mla_decode_a16w8(**a)


def test_no_cu_cap():
    # the original refused B * ceil(q_len * H / 96) > 304; we serve it (here 2 * ceil(120 * 128 / 96) = 320)
    a = good(B=2, q_len=120, H=128, lens=(1, 1), slots=2)
    a["lse"] = None
    with use_backend("reference"):
        mla_decode_a16w8(**a)
    assert torch.isfinite(a["o_lat"].float()).all()


def test_good_inputs_run():
    with use_backend("reference"):
        mla_decode_a16w8(**good())
        mla_decode_a16w8(**good(), lse=torch.empty(4, 4), glen=torch.tensor([10, 6], dtype=i32), cp_rank=1, cp_world=2)


def test_gfx950_pool_is_ocp_e4m3fn(monkeypatch):
    monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    a = good()
    with use_backend("reference"), pytest.raises(TypeError, match="kv_pool must have dtype float8_e4m3fn on gfx950"):
        mla_decode_a16w8(**a)
    a["kv_pool"] = torch.zeros(10, 1, 576).to(torch.float8_e4m3fn)
    with use_backend("reference"):
        mla_decode_a16w8(**a)


def test_reference_accepts_an_empty_pool():
    """A valid empty pool [0, 1, 576] with every length 0 (failed with a reshape error): o = 0, lse = -inf."""
    a = good(lens=(0, 0), slots=0)
    a["o_lat"].fill_(7)
    lse = torch.zeros(4, 4)
    with use_backend("reference"):
        mla_decode_a16w8(**a, lse=lse)
    assert bool((a["o_lat"] == 0).all()) and bool(torch.isneginf(lse).all())


@pytest.mark.parametrize("conv", [float, torch.tensor, lambda v: torch.tensor([v]), __import__("numpy").float64],
                         ids=["float", "0-d tensor", "1-elem tensor", "numpy"])
def test_scale_forms_accepted(conv):
    """scale / kv_scale as clients hold them (the original calls float() on each)."""
    a = good()
    a["scale"], a["kv_scale"] = conv(0.1), conv(0.5)
    with use_backend("reference"):
        mla_decode_a16w8(**a)
