"""fp8 K/V of the gfx950 attention forward (issue 17): OCP e4m3fn k and v with per-tensor or per-head descales,
bf16 q. The kernels (dequantising load stage, descales folded into the logit factor and the output) on the emulator
against float64 of the dequantised K/V at the seed's tolerance, through forward, forward_varlen, forward_paged
(== varlen bit for bit) and VarlenPlan (host- and device-planned), with features and split KV; the reference
backend likewise; bad input."""
from __future__ import annotations

import math

import pytest
import torch
from _attn_testing import check, cu, ref64, rnd, varlen_ref

import moonmath_attention_gfx950 as att
from moonmath_attention_gfx950 import as_emu_device, kernel
from moonmath_common import use_backend

bf, F8 = torch.bfloat16, torch.float8_e4m3fn

needs_kernels = pytest.mark.skipif(kernel.ARCH not in kernel.KERNELS.archs_built(),
                                   reason="this build has no gfx950 code objects")


def fp8(*shape, seed, amax=448.0):
    """Seeded e4m3fn values spread over most of the format (normals, subnormals, zeros, both signs)."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * (amax / 4)
    return x.clamp(-448, 448).to(F8)


def deq(t, d, head_dim):
    """float64 K/V: the fp8 values times the head's descale."""
    shape = [1] * t.dim()
    shape[head_dim] = -1
    return t.double() * d.double().reshape(-1).expand(t.shape[head_dim]).reshape(shape)


def test_fp8_kv_values_cover_the_format():
    k = fp8(4, 64, 128, seed=1)
    bits = k.view(torch.uint8)
    assert int(((bits & 0x78) == 0).sum()) > 0          # subnormals and zeros
    assert float(k.float().abs().max()) >= 256           # large exponents


@needs_kernels
@pytest.mark.parametrize("D,B,Hq,Hkv,Sq,Skv,causal,per_head", [
    (128, 1, 4, 2, 129, 300, False, True),
    (128, 2, 2, 1, 300, 130, True, False),    # Sq > Skv causal, per-tensor
    (64, 1, 8, 2, 200, 333, True, True),      # gpt-oss head dim, GQA 4:1
    (256, 1, 4, 2, 129, 200, True, True),     # two column passes of the staged (256, 128) kernel, GQA 2:1
])
def test_fp8_forward_matches_float64(emu_gfx950, D, B, Hq, Hkv, Sq, Skv, causal, per_head):
    q = rnd(B, Hq, Sq, D, seed=D)
    k, v = fp8(B, Hkv, Skv, D, seed=D + 1), fp8(B, Hkv, Skv, D, seed=D + 2)
    kd = torch.linspace(0.002, 0.004, Hkv) if per_head else torch.tensor([0.003])
    vd = torch.linspace(0.01, 0.02, Hkv) if per_head else torch.tensor(0.015)
    o, lse = att.forward(q, k, v, causal=causal, return_lse=True, k_descale=kd, v_descale=vd)
    for b in range(B):
        check(o[b], lse[b], *ref64(q[b], deq(k[b], kd, 0), deq(v[b], vd, 0), causal, 1 / math.sqrt(D)))
    # the same as the bf16 kernel on the dequantised K/V when the descales are powers of two (exact in bf16)
    kd2, vd2 = torch.full((Hkv,), 2.0 ** -8), torch.full((Hkv,), 2.0 ** -6)
    o8 = att.forward(q, k, v, causal=causal, k_descale=kd2, v_descale=vd2)
    ob = att.forward(q, (k.float() * 2.0 ** -8).to(bf), (v.float() * 2.0 ** -6).to(bf), causal=causal)
    assert torch.equal(o8.view(torch.int16), ob.view(torch.int16))


@needs_kernels
@pytest.mark.parametrize("D", (128, 256))
def test_fp8_split_features_varlen_and_plans(emu_gfx950, D):
    """Split KV, softcap + window + sinks, forward_varlen and VarlenPlan (host and device plan) with fp8 K/V."""
    lens_q, lens_k = [5, 0, 150, 40], [30, 7, 400, 40]
    hq, hk = 4, 2
    cq, ck = cu(lens_q), cu(lens_k)
    q = rnd(int(cq[-1]), hq, D, seed=3, scale=2)
    k, v = fp8(int(ck[-1]), hk, D, seed=4), fp8(int(ck[-1]), hk, D, seed=5)
    kd, vd = torch.tensor([0.004, 0.006]), torch.tensor([0.02, 0.01])
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0])
    feats = dict(softcap=20.0, window_size=(64, -1))
    kq, vq = deq(k, kd, 1), deq(v, vd, 1)
    ro, rl = varlen_ref(q, kq, vq, lens_q, lens_k, True, 1 / math.sqrt(D), 20.0, (64, -1), sinks)
    with kernel.planner_options(num_cus=4096, min_part_blocks=1):
        o, lse = att.forward_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=True, return_lse=True,
                                    sinks=sinks, k_descale=kd, v_descale=vd, **feats)
    check(o.transpose(0, 1), lse, ro.transpose(0, 1), rl)
    with kernel.planner_options(num_cus=1):
        o1, l1 = att.forward_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=True, return_lse=True,
                                    sinks=sinks, k_descale=kd, v_descale=vd, **feats)
        host = att.VarlenPlan().plan(cq, ck, max(lens_q), max(lens_k), q.shape[0], k.shape[0], heads=hq, kv_heads=hk,
                                     causal=True, **feats)
        o2, l2 = host.run(q, k, v, return_lse=True, sinks=sinks, k_descale=kd, v_descale=vd)
    check(o1.transpose(0, 1), l1, ro.transpose(0, 1), rl)
    dev = att.VarlenPlan().plan(as_emu_device(cq.clone()), as_emu_device(ck.clone()), max(lens_q), max(lens_k),
                                q.shape[0], k.shape[0], heads=hq, kv_heads=hk, causal=True, **feats)
    o3, l3 = dev.run(q, k, v, return_lse=True, sinks=sinks, k_descale=kd, v_descale=vd)
    for oo, ll in ((o2, l2), (o3, l3)):
        assert torch.equal(oo.view(torch.int16), o1.view(torch.int16)) and torch.equal(ll, l1)


def test_fp8_reference_matches_float64():
    q = rnd(1, 4, 50, 64, seed=7)
    k, v = fp8(1, 2, 90, 64, seed=8), fp8(1, 2, 90, 64, seed=9)
    kd, vd = torch.tensor([0.003, 0.001]), torch.tensor(0.02)
    with use_backend("reference"):
        o, lse = att.forward(q, k, v, causal=True, return_lse=True, k_descale=kd, v_descale=vd)
    check(o[0], lse[0], *ref64(q[0], deq(k[0], kd, 0), deq(v[0], vd, 0), True, 1 / math.sqrt(64)))


@pytest.mark.parametrize("what,kw,exc,match", [
    ("mixed k/v dtypes", dict(v=torch.zeros(1, 1, 8, 128, dtype=bf)), TypeError, "v must have dtype float8_e4m3fn"),
    ("fnuz is not gfx950's", dict(k=torch.zeros(1, 1, 8, 128, dtype=torch.float8_e4m3fnuz)), TypeError, "k must"),
    ("descale on bf16", dict(k=torch.zeros(1, 1, 8, 128, dtype=bf), v=torch.zeros(1, 1, 8, 128, dtype=bf),
                             k_descale=torch.ones(1)), ValueError, "k_descale applies to fp8"),
    ("descale shape", dict(k_descale=torch.ones(3)), ValueError, r"k_descale must be one fp32 scale per tensor"),
    ("descale dtype", dict(v_descale=torch.ones(1, dtype=torch.float64)), TypeError, "v_descale must have dtype"),
    ("descale <= 0", dict(v_descale=torch.tensor([0.0])), ValueError, "v_descale must be finite and > 0"),
    ("descale nan", dict(k_descale=torch.tensor([float("nan")])), ValueError, "k_descale must be finite"),
    ("head dim", dict(q=torch.zeros(1, 2, 4, 96, dtype=bf), k=torch.zeros(1, 1, 8, 96, dtype=F8),
                      v=torch.zeros(1, 1, 8, 96, dtype=F8)), ValueError, r"fp8 k/v are supported for head dims"),
])
def test_fp8_bad_input_names_it(what, kw, exc, match):
    a = dict(q=torch.zeros(1, 2, 4, 128, dtype=bf), k=torch.zeros(1, 1, 8, 128, dtype=F8),
             v=torch.zeros(1, 1, 8, 128, dtype=F8))
    a.update(kw)
    with use_backend("reference"), pytest.raises(exc, match=match):
        att.forward(a.pop("q"), a.pop("k"), a.pop("v"), **a)


@needs_kernels
@pytest.mark.parametrize("D,page_size,causal", [(128, 16, True), (64, 8, False), (256, 8, True)])
def test_fp8_paged_equals_varlen(emu_gfx950, D, page_size, causal):
    """fp8 caches: shuffled pages of a cache whose other bytes are fp8 NaN (0x7F), page lists and block tables,
    per-head descales: == forward_varlen on the packed fp8 K/V bit for bit, and float64 within tolerance."""
    lens_q, lens_k, hq, hk = [9, 150], [77, 260], 4, 2
    cq, ck = cu(lens_q), cu(lens_k)
    q = rnd(int(cq[-1]), hq, D, seed=D)
    k, v = fp8(int(ck[-1]), hk, D, seed=D + 1), fp8(int(ck[-1]), hk, D, seed=D + 2)
    kd, vd = torch.tensor([0.003, 0.002]), torch.tensor([0.01, 0.03])
    need = [-(-n // page_size) for n in lens_k]
    perm = torch.randperm(sum(need) + 3, generator=torch.Generator().manual_seed(D)).to(torch.int32)
    kc = torch.full((perm.numel(), page_size, hk, D), 0x7F, dtype=torch.uint8).view(F8)
    vc = kc.clone()
    table = torch.full((2, max(need) + 1), 2**30, dtype=torch.int32)
    lists, at = [], 0
    for b, n in enumerate(lens_k):
        pg = perm[at:at + need[b]]
        at += need[b]
        lists.append(pg)
        table[b, :need[b]] = pg
        for j in range(n):
            kc[pg[j // page_size], j % page_size] = k[int(ck[b]) + j]
            vc[pg[j // page_size], j % page_size] = v[int(ck[b]) + j]
    indptr = torch.tensor([0] + list(torch.tensor(need).cumsum(0)), dtype=torch.int32)
    fk = dict(causal=causal, return_lse=True, k_descale=kd, v_descale=vd)
    o, lse = att.forward_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), **fk)
    ro, rl = varlen_ref(q, deq(k, kd, 1), deq(v, vd, 1), lens_q, lens_k, causal, 1 / math.sqrt(D), 0.0)
    check(o.transpose(0, 1), lse, ro.transpose(0, 1), rl)
    lens = torch.tensor(lens_k, dtype=torch.int32)
    for pk in (dict(block_table=table), dict(kv_indptr=indptr, kv_page_indices=torch.cat(lists))):
        op, lp = att.forward_paged(q, kc, vc, cq, lens, **pk, **fk)
        assert torch.equal(op.view(torch.int16), o.view(torch.int16)) and torch.equal(lp, lse)


def test_fp8_paged_reference_and_checks():
    q = torch.zeros(4, 2, 96, dtype=bf)
    kc = torch.zeros(1, 16, 1, 96, dtype=F8)
    with use_backend("reference"), pytest.raises(ValueError, match=r"fp8 k_cache/v_cache are supported for head"):
        att.forward_paged(q, kc, kc, cu([4]), torch.tensor([4], dtype=torch.int32),
                          block_table=torch.zeros(1, 1, dtype=torch.int32))
    with use_backend("reference"), pytest.raises(TypeError, match="v_cache must have dtype float8_e4m3fn"):
        att.forward_paged(q, kc, kc.to(bf), cu([4]), torch.tensor([4], dtype=torch.int32),
                          block_table=torch.zeros(1, 1, dtype=torch.int32))
    # reference backend: paged fp8 == varlen fp8 on the same keys
    qq, k8 = rnd(5, 2, 64, seed=1), fp8(16, 1, 64, seed=2)
    with use_backend("reference"):
        a = att.forward_paged(qq, k8[None], k8[None], cu([5]), torch.tensor([16], dtype=torch.int32),
                              block_table=torch.zeros(1, 1, dtype=torch.int32), k_descale=torch.tensor(0.01))
        b = att.forward_varlen(qq, k8, k8, cu([5]), cu([16]), 5, 16, k_descale=torch.tensor(0.01))
    assert torch.equal(a, b)


@needs_kernels
def test_fp8_kernel_alignment(emu_gfx950):
    q = rnd(1, 2, 4, 128, seed=1)
    k = fp8(1, 1, 8, 136, seed=2)[..., :128]          # token stride 136: not a multiple of 16 bytes
    v = fp8(1, 1, 8, 128, seed=3)
    with pytest.raises(ValueError, match=r"k.stride\(2\) must be a multiple of 16 elements"):
        att.forward(q, k, v)
