"""The seed API as moonmath_amd exposes it: every name, argument order and defaults; arch dispatch and
the clear errors for features an arch lacks."""
from __future__ import annotations

import inspect
import math

import pytest
import torch

import moonmath_amd as ma
from moonmath_common import use_backend
from moonmath_common.numerics import bf16_bits

SEED_API = {
    "forward": ["q", "k", "v", "out", "round_mode", "layout", "causal", "softmax_scale", "return_lse"],
    "forward_varlen": ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"],
    "forward_paged": ["q", "k_cache", "v_cache", "cu_seqlens_q", "seqlens_k", "kv_indptr", "kv_page_indices",
                      "block_table", "causal"],
    "mla_decode_a16w8": ["q_lat", "q_pe", "kv_pool", "o_lat", "seq_lens", "kv_indices", "kv_indptr", "scale",
                         "kv_scale", "lse", "glen", "cp_rank", "cp_world"],
    "mla_dcp_lse_merge_ranks": ["parts_in", "lse_in", "out", "lse_out"],
    "repack_mxfp4": ["B"],
    "repack_mxfp4_scales": ["Bs"],
    "mxfp4_moe_gateup_block_m": ["num_valid_tokens", "num_active_experts"],
    "mxfp4_moe_gateup": ["A", "B", "Bs", "C", "topk_weights", "sorted_token_ids", "expert_ids",
                         "num_tokens_post_padded", "num_m_blocks", "block_m", "num_valid_tokens", "top_k", "epilogue",
                         "mul_routed_weight", "situ_beta", "situ_linear_beta"],
    "mxfp4_moe_down": ["A", "B", "Bs", "C", "topk_weights", "sorted_token_ids", "expert_ids",
                       "num_tokens_post_padded", "num_m_blocks",
                       "block_m", "n_steps", "nt", "num_valid_tokens", "top_k", "mul_routed_weight"],
    "mxfp4_moe_down_block_m": ["num_valid_tokens", "num_active_experts", "K"],
    "mxfp4_moe_down_nt": ["num_valid_tokens", "num_active_experts"],
    "mxfp4_moe_down_n_steps": ["num_m_blocks", "N", "num_cus", "block_m", "nt"],
    "mxfp4_moe_down_plan": ["num_valid_tokens", "num_active_experts", "N", "K", "num_m_blocks", "num_cus"],
    "moe_align_block_size": ["topk_ids", "block_m", "num_experts"],
}
DEFAULTS = {
    ("forward", "round_mode"): None, ("forward", "layout"): "bhsd", ("forward", "causal"): False,
    ("forward", "return_lse"): False, ("forward", "softmax_scale"): None,
    ("mla_decode_a16w8", "lse"): None, ("mla_decode_a16w8", "glen"): None, ("mla_decode_a16w8", "cp_rank"): 0,
    ("mla_decode_a16w8", "cp_world"): 1, ("mla_dcp_lse_merge_ranks", "lse_out"): None,
    ("mxfp4_moe_gateup", "epilogue"): 0, ("mxfp4_moe_gateup", "mul_routed_weight"): False,
    ("mxfp4_moe_gateup", "situ_beta"): 1.0, ("mxfp4_moe_gateup", "situ_linear_beta"): 1.0,
    ("mxfp4_moe_down", "mul_routed_weight"): False, ("mxfp4_moe_down_plan", "num_cus"): 0,
}


@pytest.mark.parametrize("name", sorted(SEED_API))
def test_names_and_argument_order(name):
    fn = getattr(ma, name)
    assert name in ma.__all__
    params = list(inspect.signature(fn).parameters)
    assert params[:len(SEED_API[name])] == SEED_API[name]
    for (op, arg), want in DEFAULTS.items():
        if op == name:
            assert inspect.signature(fn).parameters[arg].default == want


def test_constants_and_plan():
    assert (ma.EPI_NONE, ma.EPI_SITU, ma.EPI_SILU) == (0, 1, 2)
    import moonmath_amd.moe as moe

    assert moe.EPI_SILU == ma.EPI_SILU
    assert list(inspect.signature(ma.VarlenPlan.plan).parameters)[1:] == [
        "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "total_q", "total_k", "heads", "kv_heads",
        "causal", "softmax_scale", "host_cu_seqlens_q", "host_cu_seqlens_k", "softcap", "window_size"]
    assert list(inspect.signature(ma.VarlenPlan.run).parameters)[1:4] == ["q", "k", "v"]


@pytest.fixture
def arch(request, monkeypatch):
    monkeypatch.setenv("MOONMATH_EMU_ARCH", request.param)
    with use_backend("reference"):
        yield request.param


def rand(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


@pytest.mark.parametrize("arch", ["gfx942"], indirect=True)
def test_gfx942_dispatch(arch):
    import moonmath_mha_gfx942 as mha

    q, k, v = rand(1, 2, 5, 128, seed=1), rand(1, 2, 7, 128, seed=2), rand(1, 2, 7, 128, seed=3)
    out = ma.forward(q, k, v)
    assert torch.equal(bf16_bits(out), bf16_bits(mha.forward(q, k, v, round_mode="rtna")))  # gfx942 default: RTNA
    rtz = mha.forward(q, k, v, round_mode="rtz")
    assert torch.equal(bf16_bits(ma.forward(q, k, v, round_mode="rtz")), bf16_bits(rtz))
    ma.forward(q, k, v, softmax_scale=1 / math.sqrt(128))     # the fixed scale may be spelled out
    for kwargs, what in ((dict(return_lse=True), "return_lse"), (dict(softmax_scale=0.1), "softmax_scale")):
        with pytest.raises(ma.ArchFeatureError, match=what):
            ma.forward(q, k, v, **kwargs)
    sinks = torch.tensor([0.5, -1.0])   # issue 17: soft-cap, sinks, causal and window are built on gfx942
    got = ma.forward(q, k, v, softcap=3.0, sinks=sinks)
    assert torch.equal(bf16_bits(got), bf16_bits(mha.forward(q, k, v, softcap=3.0, sinks=sinks)))
    assert not torch.equal(bf16_bits(got), bf16_bits(out))
    win = dict(causal=True, window_size=(4, -1))
    got = ma.forward(q, k, v, **win)
    assert torch.equal(bf16_bits(got), bf16_bits(mha.forward(q, k, v, **win)))
    assert not torch.equal(bf16_bits(got), bf16_bits(out))
    with pytest.raises(ValueError, match=r"window_size\[1\]"):
        ma.forward(q, k, v, window_size=(4, -2))
    for kwargs, what in ((dict(softcap=-1.0), "softcap"), (dict(sinks=torch.zeros(3)), "sinks")):
        with pytest.raises(ValueError, match=what):
            ma.forward(q, k, v, **kwargs)
    with pytest.raises(ma.ArchFeatureError, match="GQA"):
        ma.forward(q, k[:, :1], v[:, :1])
    for d in (80, 256):        # issue 17: head dims of gfx950 only
        with pytest.raises(ma.ArchFeatureError, match=f"head dim {d} .*exist on gfx950"):
            ma.forward(rand(1, 2, 5, d), rand(1, 2, 7, d), rand(1, 2, 7, d))
    q64, k64, v64 = rand(1, 2, 5, 64, seed=4), rand(1, 2, 7, 64, seed=5), rand(1, 2, 7, 64, seed=6)  # built on gfx942
    assert torch.equal(bf16_bits(ma.forward(q64, k64, v64, softmax_scale=1 / 8)), bf16_bits(mha.forward(q64, k64, v64)))
    with pytest.raises(ma.ArchFeatureError, match="softmax_scale"):
        ma.forward(q64, k64, v64, softmax_scale=1 / math.sqrt(128))
    q96, k96, v96 = rand(1, 2, 5, 96, seed=7), rand(1, 2, 7, 96, seed=8), rand(1, 2, 7, 96, seed=9)
    assert torch.equal(bf16_bits(ma.forward(q96, k96, v96)), bf16_bits(mha.forward(q96, k96, v96)))
    with pytest.raises(ValueError, match="fp8 k/v are supported for head dims"):
        ma.forward(q96, k96.to(torch.float8_e4m3fnuz), v96.to(torch.float8_e4m3fnuz))
    for d in (32, 512):        # no arch has these: the package's own check
        with pytest.raises(ValueError, match="head dim"):
            ma.forward(rand(1, 2, 5, d), rand(1, 2, 7, d), rand(1, 2, 7, d))
    f8 = torch.zeros(1, 2, 7, 128, dtype=torch.float8_e4m3fn)   # issue 17: gfx942's fp8 K/V is e4m3fnuz
    with pytest.raises(TypeError, match="k must have dtype bfloat16 or float8_e4m3fnuz"):
        ma.forward(q, f8, f8)
    with pytest.raises(ValueError, match="k_descale applies to fp8"):
        ma.forward(q, k, v, k_descale=torch.ones(1))
    k8, v8 = (k.float() * 4).to(torch.float8_e4m3fnuz), (v.float() * 4).to(torch.float8_e4m3fnuz)
    kd = torch.tensor([0.25, 0.5])
    assert torch.equal(bf16_bits(ma.forward(q, k8, v8, k_descale=kd, v_descale=kd[:1])),
                       bf16_bits(mha.forward(q, k8, v8, k_descale=kd, v_descale=kd[:1])))
    cu = torch.tensor([0, 5], dtype=torch.int32)
    with pytest.raises(ma.ArchFeatureError, match="forward_varlen: varlen batching exists on gfx950"):
        ma.forward_varlen(q[0, 0][:, None], k[0, 0][:, None], v[0, 0][:, None], cu, cu, 5, 5)
    with pytest.raises(ma.ArchFeatureError, match="forward_paged"):
        ma.forward_paged(q[0, 0][:, None], k, v, cu, cu[1:], block_table=cu[None])
    with pytest.raises(ValueError, match="VarlenPlan"):
        ma.VarlenPlan()


@pytest.mark.parametrize("arch", ["gfx950"], indirect=True)
def test_gfx950_dispatch(arch):
    import moonmath_attention_gfx950 as att

    q, k, v = rand(1, 7, 4, 192, seed=4), rand(1, 9, 2, 192, seed=5), rand(1, 9, 2, 128, seed=6)
    out, lse = ma.forward(q, k, v, layout="bshd", causal=True, return_lse=True)
    o2, l2 = att.forward(q, k, v, layout="bshd", causal=True, return_lse=True)
    assert torch.equal(bf16_bits(out), bf16_bits(o2)) and torch.equal(lse, l2)
    with pytest.raises(ValueError, match="round_mode must be 'rtne'"):
        ma.forward(q, k, v, layout="bshd", round_mode="rtna")
    cu_q = torch.tensor([0, 3, 7], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 9], dtype=torch.int32)
    a = ma.forward_varlen(q[0], k[0], v[0], cu_q, cu_k, 4, 5, causal=True)
    plan = ma.VarlenPlan().plan(cu_q, cu_k, 4, 5, 7, 9, heads=4, kv_heads=2, causal=True)
    assert isinstance(plan, att.VarlenPlan)
    assert torch.equal(bf16_bits(plan.run(q[0], k[0], v[0])), bf16_bits(a))
    kc = torch.zeros(2, 16, 2, 192, dtype=torch.bfloat16)
    vc = torch.zeros(2, 16, 2, 128, dtype=torch.bfloat16)
    kc[0, :4], kc[1, :5], vc[0, :4], vc[1, :5] = k[0, :4], k[0, 4:], v[0, :4], v[0, 4:]
    p = ma.forward_paged(q[0], kc, vc, cu_q, torch.tensor([4, 5], dtype=torch.int32),
                         block_table=torch.tensor([[0], [1]], dtype=torch.int32), causal=True)
    assert torch.equal(bf16_bits(p), bf16_bits(a))
    # the attention features pass through the metapackage unchanged
    feats = dict(softcap=20.0, window_size=(3, 0), sinks=torch.tensor([0.5, -1.0, 0.0, 2.0]))
    fo, fl = ma.forward(q, k, v, layout="bshd", causal=True, return_lse=True, **feats)
    go, gl = att.forward(q, k, v, layout="bshd", causal=True, return_lse=True, **feats)
    assert torch.equal(bf16_bits(fo), bf16_bits(go)) and torch.equal(fl, gl) and not torch.equal(fl, lse)
    fv = ma.forward_varlen(q[0], k[0], v[0], cu_q, cu_k, 4, 5, causal=True, **feats)
    assert torch.equal(bf16_bits(fv), bf16_bits(att.forward_varlen(q[0], k[0], v[0], cu_q, cu_k, 4, 5, causal=True,
                                                                   **feats)))
    fp = ma.forward_paged(q[0], kc, vc, cu_q, torch.tensor([4, 5], dtype=torch.int32),
                          block_table=torch.tensor([[0], [1]], dtype=torch.int32), causal=True, **feats)
    assert torch.equal(bf16_bits(fp), bf16_bits(fv))
    q1, k8, v8 = rand(1, 5, 4, 128, seed=9), rand(1, 9, 2, 128, seed=10), rand(1, 9, 2, 128, seed=11)
    k8, v8 = k8.to(torch.float8_e4m3fn), v8.to(torch.float8_e4m3fn)     # issue 17: fp8 K/V pass through
    f8 = dict(k_descale=torch.tensor([0.5, 0.25]), v_descale=torch.tensor(2.0))
    assert torch.equal(bf16_bits(ma.forward(q1, k8, v8, layout="bshd", causal=True, **f8)),
                       bf16_bits(att.forward(q1, k8, v8, layout="bshd", causal=True, **f8)))
    for d in (64, 80, 96, 256):        # issue 17: the other head dims (256: two column passes of a (256, 128) kernel)
        qd, kd, vd = rand(1, 5, 2, d, seed=d), rand(1, 9, 1, d, seed=d + 1), rand(1, 9, 1, d, seed=d + 2)
        fd = dict(feats, sinks=torch.tensor([0.5, -1.0]))
        assert torch.equal(bf16_bits(ma.forward(qd, kd, vd, layout="bshd", causal=True, **fd)),
                           bf16_bits(att.forward(qd, kd, vd, layout="bshd", causal=True, **fd)))
    with pytest.raises(ValueError, match="head dims"):
        ma.forward(rand(1, 5, 2, 32), rand(1, 9, 1, 32), rand(1, 9, 1, 32), layout="bshd")


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"], indirect=True)
def test_dispatch_traces_under_compile(arch):
    q = rand(1, 2, 6, 128, seed=7)
    kwargs = dict(causal=True) if arch == "gfx950" else dict(round_mode="rtz")

    def f(q):
        return ma.forward(q, q, q, **kwargs) * 2

    eager = f(q)
    assert torch.equal(torch.compile(f, fullgraph=True, backend="aot_eager")(q), eager)
