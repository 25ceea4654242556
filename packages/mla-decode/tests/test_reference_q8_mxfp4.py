"""The fp8-Q x MXFP4-KV definition (reference.mla_decode_q8_mxfp4: PV on the scaled fp8 MFMA; no kernel, no
public op yet): against float64 attention over the exact MXFP4 KV, its V requantisation, its split-independent
P, windows and empty requests, the GPU MODE check."""
from __future__ import annotations

import pytest
import torch
from _mla_formats import gpumode_check, gpumode_exact, gpumode_inputs, gpumode_run, quantize_mxfp4

from moonmath_mla_decode import reference as R


def rel_fro(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def _case(B=2, S=200, H=16, seed=0, spread=False):
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(B * S, 576, generator=g)
    if spread:  # rows of very different magnitudes: MXFP4 scales far apart inside a 32-token group
        kv = kv * torch.exp2(torch.randint(-12, 1, (B * S, 1), generator=g).float())
    codes, scales = quantize_mxfp4(kv)
    return dict(q_lat=torch.randn(B, H, 512, generator=g).bfloat16(),
                q_pe=torch.randn(B, H, 64, generator=g).bfloat16(), pool=codes.view(-1, 1, 288),
                scales=scales.view(-1, 1, 18),
                seq_lens=torch.full((B,), S, dtype=torch.int32),
                kv_indices=torch.randperm(B * S, generator=g).to(torch.int32),
                kv_indptr=torch.arange(B + 1, dtype=torch.int32) * S)


def _run(x, fn=R.mla_decode_q8_mxfp4, seq_lens=None):
    return fn(x["q_lat"], x["q_pe"], x["pool"], x["scales"], x["seq_lens"] if seq_lens is None else seq_lens,
              x["kv_indices"], x["kv_indptr"], 576 ** -0.5, None, 0, 1)


def test_close_to_float64_over_the_exact_mxfp4_kv():
    x = _case()
    o, lse = _run(x)
    ro, rlse = _run(x, R.mla_decode_mxfp4)  # bf16 Q x the same exact KV, fp32 softmax, bf16 P-free
    err = rel_fro(o, ro)
    # fp8 Q (per tensor) and fp8 P: the a8w8 format's error level (2-4e-2), far below MXFP4's own 0.11
    assert 5e-3 < err < 0.05, err
    assert (lse - rlse).abs().max() < 0.05


def test_v_requantisation_is_exact_for_randn_and_rounds_far_below_the_group_max():
    x = _case(B=1, S=96)
    slots = x["kv_indices"].long()
    v = R.mxfp4_v_as_fp8(x["pool"], x["scales"], slots)
    exact = R.mxfp4_rows(x["pool"], x["scales"])(slots)[:, :512].double()
    assert torch.equal(v, exact)
    # magnitudes 2^-12 .. 1 between rows: some blocks sit more than 2^8 below their group's largest scale
    y = _case(B=1, S=96, spread=True, seed=5)
    ys = y["kv_indices"].long()
    y_exact = R.mxfp4_rows(y["pool"], y["scales"])(ys)[:, :512].double()
    vy = R.mxfp4_v_as_fp8(y["pool"], y["scales"], ys)
    assert not torch.equal(vy, y_exact)
    # ...only by the rounding of e4m3fn's subnormal step: at most 2^-10 of the group's largest block scale
    e = y["scales"].view(-1, 18)[ys, :16].double().view(3, 32, 16)
    F = torch.exp2(e.amax(1, keepdim=True) - 127).repeat_interleave(32, -1)              # [3, 1, 512]
    assert ((vy - y_exact).abs().view(3, 32, 512) <= F * 2.0 ** -10).all()


def _a8w8_rule(x):
    """a8w8's P (docs/numerics.md): against the running max of 32-row tiles, relative weights."""
    m = x.view(x.shape[0], -1, 32).amax(-1, keepdim=True).cummax(1).values
    p = torch.exp2(x.view(x.shape[0], -1, 32) - m + 8).float().to(torch.float8_e4m3fn).double()
    return (p * torch.exp2(m - m.amax(1, keepdim=True))).view(x.shape)


def _same_up_to_a_power_of_two(whole, part):
    """Row by row: whole = 2^k part exactly (zeros where part is zero)."""
    if not torch.equal(whole == 0, part == 0):
        return False
    ratio = torch.where(part > 0, whole / part, float("nan"))
    row = ratio.nanmean(1, keepdim=True)
    return (torch.equal(torch.where(part > 0, ratio, row), row.expand_as(ratio))
            and torch.equal(torch.exp2(torch.log2(row).round()), row))


def test_p_rounding_is_split_independent():
    """P of a 32-token block depends on that block only: the weights of a KV part [128, 256) computed alone are
    the whole window's up to one power of two per row (the E8M0 relative scale), exactly, although the row's max
    lies in the other part. a8w8's running-max P fails the same check (the part restarts its max)."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(16, 256, generator=g, dtype=torch.float64) * 4
    x[:, :64] += 6
    assert _same_up_to_a_power_of_two(R.q8_mxfp4_p(x)[:, 128:], R.q8_mxfp4_p(x[:, 128:]))
    assert not _same_up_to_a_power_of_two(_a8w8_rule(x)[:, 128:], _a8w8_rule(x[:, 128:].contiguous()))


def test_windows_and_empty_requests():
    x = _case(B=3, S=64, seed=3)
    lens = torch.tensor([64, 0, 33], dtype=torch.int32)
    ip = torch.tensor([0, 64, 64, 97], dtype=torch.int32)
    y = dict(x, kv_indptr=ip)
    o, lse = _run(y, seq_lens=lens)
    ro, _ = _run(y, R.mla_decode_mxfp4, seq_lens=lens)
    assert torch.all(o[1] == 0) and torch.isneginf(lse[1]).all()
    assert rel_fro(o[[0, 2]], ro[[0, 2]]) < 0.05


@pytest.mark.parametrize("B,kv_len,seed", [(2, 1024, 5412)])
def test_gpumode_check(B, kv_len, seed):
    x = gpumode_inputs(B, kv_len, seed)
    ref = gpumode_run("a8w8", x, "reference")
    q = dict(q_lat=x["q_lat"], q_pe=x["q_pe"], pool=x["kv_mxfp4"], scales=x["kv_mxfp4_scales"].view(-1, 1, 18),
             seq_lens=x["seq_lens"], kv_indices=x["kv_indices"], kv_indptr=x["kv_indptr"])
    o, _ = _run(q)
    ok, worst = gpumode_check(o, ref)
    assert ok, worst
    # the MXFP4 KV's own error dominates: as far from the exact math as bf16-Q mxfp4, within 10 %
    ex = gpumode_exact(x)
    assert rel_fro(o, ex) < 1.1 * rel_fro(gpumode_run("mxfp4", x, "reference"), ex)
