"""mla_dcp_lse_merge_ranks: reference vs an independent formulation, kernels (emu) vs reference."""
from __future__ import annotations

import math

import pytest
import torch

import moonmath_mla_decode as mld
from moonmath_common import use_backend
from moonmath_mla_decode.merge import reference

ARCHS = ["gfx942", "gfx950"]


def make_inputs(R, T, H, *, seed=0, empty_frac=0.0, all_empty_rows=0):
    g = torch.Generator().manual_seed(seed)
    parts = (torch.randn(R, T, H, 512, generator=g) * 2).to(torch.bfloat16)
    lse = torch.randn(R, T, H, generator=g) * 8
    if empty_frac:
        mask = torch.rand(R, T, H, generator=g) < empty_frac
        fill = torch.tensor([float("inf"), float("-inf"), 3e38, -3.5e38])  # empty ranks (NaN is not empty)
        lse[mask] = fill[torch.randint(0, len(fill), (int(mask.sum()),), generator=g)]
        # an empty rank's part may hold garbage, NaN included; it must not leak into the result
        parts[mask] = float("nan")
    if all_empty_rows:
        lse[:, :all_empty_rows, 0] = float("-inf")
    return parts, lse


def independent(parts, lse):
    """fp64 merge through logsumexp in natural log, written apart from the reference."""
    ln2 = math.log(2.0)
    l64 = lse.double()
    valid = l64.abs() < 3e38
    ln_lse = torch.where(valid, l64 * ln2, torch.full_like(l64, float("-inf")))
    total = torch.logsumexp(ln_lse, dim=0)  # [T,H]
    w = torch.exp(ln_lse - total.unsqueeze(0))
    w = torch.nan_to_num(w, nan=0.0)
    p = torch.where(valid.unsqueeze(-1), parts.double(), torch.zeros((), dtype=torch.float64))
    out = (w.unsqueeze(-1) * p).sum(0)
    return out, total / ln2


def ulp_distance_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    def ordered(x):
        i = x.contiguous().view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -(i & 0x7FFF), i)
    return (ordered(a) - ordered(b)).abs()


def run(backend, parts, lse, with_lse=True, arch=None, monkeypatch=None):
    if arch is not None:
        monkeypatch.setenv("MOONMATH_EMU_ARCH", arch)
    R, T, H, D = parts.shape
    out = torch.full((T, H, D), 7.0, dtype=torch.bfloat16)
    lse_out = torch.full((T, H), 7.0) if with_lse else None
    with use_backend(backend):
        mld.mla_dcp_lse_merge_ranks(parts, lse, out, lse_out)
    return out, lse_out


@pytest.mark.parametrize("R", [1, 2, 3, 5, 8, 16])
def test_reference_matches_independent_fp64(R):
    parts, lse = make_inputs(R, 3, 5, seed=R, empty_frac=0.3, all_empty_rows=1)
    out, lse_out = reference(parts, lse)
    want, want_lse = independent(parts, lse)
    live = torch.isfinite(want_lse)
    assert torch.equal(torch.isneginf(lse_out), ~live)
    assert torch.all(out[~live].float() == 0)
    err = (out.double() - want).abs()[live]
    assert float(err.max()) <= float(want.abs()[live].max()) * 2 ** -8 + 1e-30
    assert torch.allclose(lse_out[live].double(), want_lse[live], atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("R,T,H", [(1, 1, 1), (2, 3, 16), (5, 2, 12), (8, 4, 7), (16, 2, 3)])
def test_kernel_matches_reference(arch, R, T, H, monkeypatch):
    parts, lse = make_inputs(R, T, H, seed=R * 31 + T, empty_frac=0.25, all_empty_rows=1)
    out, lse_out = run("emu", parts, lse, arch=arch, monkeypatch=monkeypatch)
    ref_out, ref_lse = reference(parts, lse)
    # exp2/log2/reciprocal are approximate on the GPU: allow one bf16 ulp on out, 1e-5 on the LSE.
    assert int(ulp_distance_bf16(out, ref_out).max()) <= 1
    assert torch.equal(torch.isneginf(lse_out), torch.isneginf(ref_lse))
    fin = torch.isfinite(ref_lse)
    assert torch.allclose(lse_out[fin], ref_lse[fin], atol=1e-5, rtol=1e-6)
    assert torch.all(out[:1, 0].float() == 0)  # rows whose every rank is empty


@pytest.mark.parametrize("arch", ARCHS)
def test_kernel_deterministic_and_lse_optional(arch, monkeypatch):
    parts, lse = make_inputs(6, 5, 9, seed=7, empty_frac=0.2)
    a, la = run("emu", parts, lse, arch=arch, monkeypatch=monkeypatch)
    b, lb = run("emu", parts, lse, arch=arch, monkeypatch=monkeypatch)
    c, _ = run("emu", parts, lse, with_lse=False, arch=arch, monkeypatch=monkeypatch)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    assert torch.equal(la.view(torch.int32), lb.view(torch.int32))
    assert torch.equal(a.view(torch.int16), c.view(torch.int16))


@pytest.mark.parametrize("arch", ARCHS)
def test_kernel_nan_in_live_rank_is_canonical(arch, monkeypatch):
    parts, lse = make_inputs(2, 1, 2, seed=3)
    parts[1, 0, 0, 5] = float("nan")
    out, _ = run("emu", parts, lse, arch=arch, monkeypatch=monkeypatch)
    bits = out.view(torch.int16).to(torch.int32) & 0xFFFF
    assert int(bits[0, 0, 5]) == 0x7FFF
    assert not torch.isnan(out[0, 1].float()).any()


@pytest.mark.parametrize("arch", ARCHS)
def test_kernel_nan_lse_poisons_the_row(arch, monkeypatch):
    """A rank whose lse is NaN (its inputs held NaN/Inf) is not an empty rank: the row comes out NaN
    (canonical 0x7FFF, lse NaN) on the kernel and the reference, and the other rows are untouched."""
    parts, lse = make_inputs(3, 2, 2, seed=11)
    lse[1, 0, 1] = float("nan")
    out, lo = run("emu", parts, lse, arch=arch, monkeypatch=monkeypatch)
    ref, lref = run("reference", parts, lse, arch=arch, monkeypatch=monkeypatch)
    bits = out.view(torch.int16).to(torch.int32) & 0xFFFF
    assert torch.all(bits[0, 1] == 0x7FFF) and torch.isnan(lo[0, 1])
    assert torch.equal(out.view(torch.int16), ref.view(torch.int16))
    assert torch.isnan(lref[0, 1]) and not torch.isnan(lo[0, 0]) and not torch.isnan(lo[1]).any()


def test_rejections():
    parts, lse = make_inputs(2, 3, 4)
    out = torch.empty(3, 4, 512, dtype=torch.bfloat16)
    lse_out = torch.empty(3, 4)
    f = mld.mla_dcp_lse_merge_ranks
    with pytest.raises(TypeError, match="parts_in"):
        f(parts.float(), lse, out, lse_out)
    with pytest.raises(TypeError, match="parts_in"):
        f("x", lse, out, lse_out)
    with pytest.raises(ValueError, match="parts_in"):
        f(parts[0], lse, out, lse_out)
    with pytest.raises(ValueError, match="last dim 512"):
        f(parts[..., :256].contiguous(), lse, out[..., :256].contiguous(), lse_out)
    with pytest.raises(ValueError, match="1 to 16 ranks"):
        f(torch.zeros(17, 3, 4, 512, dtype=torch.bfloat16), torch.zeros(17, 3, 4), out, lse_out)
    with pytest.raises(ValueError, match="contiguous"):
        f(parts.transpose(1, 2).contiguous().transpose(1, 2), lse, out, lse_out)
    with pytest.raises(TypeError, match="lse_in"):
        f(parts, lse.double(), out, lse_out)
    with pytest.raises(ValueError, match="lse_in"):
        f(parts, lse[:, :2], out, lse_out)
    with pytest.raises(TypeError, match="out"):
        f(parts, lse, out.float(), lse_out)
    with pytest.raises(ValueError, match="out"):
        f(parts, lse, out[:2], lse_out)
    with pytest.raises(TypeError, match="lse_out"):
        f(parts, lse, out, lse_out.half())
    with pytest.raises(ValueError, match="lse_out"):
        f(parts, lse, out, lse_out[:1])
    with pytest.raises(ValueError, match="overlap"):
        f(parts, lse, parts[0], lse_out)


def test_zero_rows_is_a_no_op(monkeypatch):
    parts = torch.zeros(2, 0, 4, 512, dtype=torch.bfloat16)
    out, lse_out = run("emu", parts, torch.zeros(2, 0, 4), arch="gfx942", monkeypatch=monkeypatch)
    assert out.numel() == 0 and lse_out.numel() == 0


@pytest.mark.parametrize("with_lse", [True, False])
def test_torch_compile_fullgraph(with_lse):
    parts, lse = make_inputs(3, 2, 4, seed=9)
    out = torch.empty(2, 4, 512, dtype=torch.bfloat16)
    lse_out = torch.empty(2, 4) if with_lse else None

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(p, l, o, lo):
        mld.mla_dcp_lse_merge_ranks(p, l, o, lo)
        return o

    with use_backend("reference"):
        f(parts, lse, out, lse_out)
    ref_out, ref_lse = reference(parts, lse)
    assert torch.equal(out.view(torch.int16), ref_out.view(torch.int16))
    if with_lse:
        assert torch.equal(lse_out, ref_lse)


def test_merge_rejects_out_overlapping_parts_through_another_storage():
    """Two storages over one buffer (numpy views): the old check compared storage base pointers and let
    `out` clobber parts_in."""
    import numpy as np

    from moonmath_mla_decode import mla_dcp_lse_merge_ranks

    R, T, H = 2, 1, 2
    raw = np.zeros(R * T * H * 512, dtype=np.int16)
    parts = torch.from_numpy(raw).view(torch.bfloat16).view(R, T, H, 512)
    out = torch.from_numpy(raw[T * H * 512:]).view(torch.bfloat16).view(T, H, 512)   # aliases rank 1
    assert parts.untyped_storage().data_ptr() != out.untyped_storage().data_ptr()
    lse = torch.zeros(R, T, H)
    for backend in ("reference", "emu"):
        with use_backend(backend), pytest.raises(ValueError, match="out must not overlap parts_in"):
            mla_dcp_lse_merge_ranks(parts, lse, out)
