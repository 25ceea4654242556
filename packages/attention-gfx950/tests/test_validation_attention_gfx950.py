"""gfx950 attention: every argument of forward, forward_varlen, forward_paged and VarlenPlan rejects bad input
with a TypeError/ValueError naming it."""
from __future__ import annotations

import pytest
import torch

import moonmath_attention_gfx950 as att
from moonmath_common import use_backend

bf = torch.bfloat16
i32 = torch.int32


@pytest.fixture(autouse=True, params=["reference", "emu"])
def _backend(request, monkeypatch):
    """One set of checks runs before the backend is chosen: every rejection holds on both."""
    if request.param == "emu":
        pytest.importorskip("moonmath_emu")
        monkeypatch.setenv("MOONMATH_EMU_ARCH", "gfx950")
    with use_backend(request.param):
        yield


def z(*shape, dtype=bf):
    return torch.zeros(shape, dtype=dtype)


def batch_args():
    return dict(q=z(1, 4, 3, 128), k=z(1, 2, 5, 128), v=z(1, 2, 5, 128))


FORWARD = [
    ("q type", dict(q=1), TypeError, "q must be a torch.Tensor"),
    ("q dtype", dict(q=z(1, 4, 3, 128, dtype=torch.float16)), TypeError, "q must have dtype bfloat16"),
    ("q rank", dict(q=z(4, 3, 128)), ValueError, "q must be 4-D"),
    ("q head dim", dict(q=z(1, 4, 3, 64)), ValueError, "k head dim must equal q's"),
    ("q heads not multiple", dict(q=z(1, 3, 3, 128)), ValueError, "q heads must be a multiple of k heads"),
    ("q head dim not contiguous", dict(q=z(1, 4, 3, 256)[..., ::2]), ValueError, "q must have a contiguous last dim"),
    ("q token stride", dict(q=torch.empty(1, 4, 3, 1 << 23, dtype=bf, device="meta")[..., :128],
                            k=torch.empty(1, 2, 5, 128, dtype=bf, device="meta"),
                            v=torch.empty(1, 2, 5, 128, dtype=bf, device="meta")), ValueError,
     "q tokens must be at most 2\\^22 elements apart"),
    ("k dtype", dict(k=z(1, 2, 5, 128, dtype=torch.float32)), TypeError, "k must have dtype bfloat16"),
    ("k rank", dict(k=z(2, 5, 128)), ValueError, "k must be 4-D"),
    ("k batch", dict(k=z(2, 2, 5, 128)), ValueError, "k and v must have q's batch"),
    ("k zero heads", dict(k=z(1, 0, 5, 128), v=z(1, 0, 5, 128)), ValueError, "k must have at least 1 head"),
    ("k seq vs v", dict(k=z(1, 2, 6, 128)), ValueError, "v must have k's sequence length"),
    ("k not contiguous dim", dict(k=z(1, 2, 5, 256)[..., ::2]), ValueError, "k must have a contiguous last dim"),
    ("v dtype", dict(v=z(1, 2, 5, 128, dtype=torch.float32)), TypeError, "v must have dtype bfloat16"),
    ("v rank", dict(v=z(2, 5, 128)), ValueError, "v must be 4-D"),
    ("v heads", dict(v=z(1, 1, 5, 128)), ValueError, "v must have k's number of heads"),
    ("v head dim", dict(v=z(1, 2, 5, 64)), ValueError, "head dims"),
    ("dims 192/192", dict(q=z(1, 4, 3, 192), k=z(1, 2, 5, 192), v=z(1, 2, 5, 192)), ValueError, "head dims"),
    ("v not contiguous dim", dict(v=z(1, 2, 5, 256)[..., ::2]), ValueError, "v must have a contiguous last dim"),
    ("out dtype", dict(out=z(1, 4, 3, 128, dtype=torch.float32)), TypeError, "out must have dtype bfloat16"),
    ("out shape", dict(out=z(1, 4, 4, 128)), ValueError, "out must have shape"),
    ("out head dim", dict(out=z(1, 4, 3, 256)[..., ::2]), ValueError, "out must have a contiguous last dim"),
    ("out device", dict(out=torch.empty(1, 4, 3, 128, dtype=bf, device="meta")), ValueError, "device"),
    ("round_mode", dict(round_mode="rtna"), ValueError, "round_mode must be 'rtne'"),
    ("layout", dict(layout="sbhd"), ValueError, "layout must be one of"),
    ("causal", dict(causal=1), TypeError, "causal must be a bool"),
    ("softmax_scale type", dict(softmax_scale="x"), TypeError, "softmax_scale must be a float"),
    ("softmax_scale nan", dict(softmax_scale=float("nan")), ValueError, "softmax_scale must be finite"),
    ("softmax_scale beyond fp32", dict(softmax_scale=1e39), ValueError, "softmax_scale must be within fp32"),
    ("softmax_scale * log2e beyond fp32", dict(softmax_scale=-3e38), ValueError,
     r"softmax_scale must have \|softmax_scale\| \* log2\(e\) within fp32"),
    ("return_lse", dict(return_lse=None), TypeError, "return_lse must be a bool"),
]


@pytest.mark.parametrize("name,change,exc,msg", FORWARD, ids=[c[0] for c in FORWARD])
def test_forward_rejects(name, change, exc, msg):
    args = batch_args()
    args.update(change)
    with pytest.raises(exc, match=msg):
        att.forward(**args)


def varlen_args():
    cu = torch.tensor([0, 2, 5], dtype=i32)
    return dict(q=z(5, 4, 128), k=z(5, 2, 128), v=z(5, 2, 128), cu_seqlens_q=cu, cu_seqlens_k=cu.clone(),
                max_seqlen_q=3, max_seqlen_k=3)


VARLEN = [
    ("q dtype", dict(q=z(5, 4, 128, dtype=torch.float32)), TypeError, "q must have dtype bfloat16"),
    ("q rank", dict(q=z(1, 5, 4, 128)), ValueError, "q must be 3-D"),
    ("k rank", dict(k=z(5, 2)), ValueError, "k must be 3-D"),
    ("v total", dict(v=z(4, 2, 128)), ValueError, "v must have k's total tokens"),
    ("q heads", dict(q=z(5, 3, 128)), ValueError, "q heads must be a multiple"),
    ("q token stride", dict(q=torch.empty(5, 4, 1 << 21, dtype=bf, device="meta")[:, :, :128],
                            k=torch.empty(5, 2, 128, dtype=bf, device="meta"),
                            v=torch.empty(5, 2, 128, dtype=bf, device="meta"),
                            cu_seqlens_q=torch.tensor([0, 2, 5], dtype=i32, device="meta"),
                            cu_seqlens_k=torch.tensor([0, 2, 5], dtype=i32, device="meta")), ValueError,
     "q tokens must be at most"),
    ("cu_seqlens_q dtype", dict(cu_seqlens_q=torch.tensor([0, 2, 5])), TypeError, "cu_seqlens_q must have dtype int32"),
    ("cu_seqlens_q rank", dict(cu_seqlens_q=torch.tensor([[0, 2, 5]], dtype=i32)),
     ValueError, "cu_seqlens_q must be 1-D"),
    ("cu_seqlens_q empty", dict(cu_seqlens_q=z(0, dtype=i32), cu_seqlens_k=z(0, dtype=i32)), ValueError,
     "cu_seqlens_q must have B \\+ 1 >= 1"),
    ("cu_seqlens_q decreasing", dict(cu_seqlens_q=torch.tensor([0, 3, 2], dtype=i32)), ValueError,
     "cu_seqlens_q must be non-decreasing"),
    ("cu_seqlens_q negative", dict(cu_seqlens_q=torch.tensor([-1, 2, 5], dtype=i32)), ValueError,
     "cu_seqlens_q values must be >= 0"),
    ("cu_seqlens_q past total", dict(cu_seqlens_q=torch.tensor([0, 2, 6], dtype=i32)), ValueError,
     "cu_seqlens_q\\[-1\\] must be <= q.shape\\[0\\]"),
    ("cu_seqlens_q device", dict(cu_seqlens_q=torch.tensor([0, 2, 5], dtype=i32, device="meta")), ValueError,
     "cu_seqlens_q must be on the CPU or on cpu"),
    ("cu_seqlens_k length", dict(cu_seqlens_k=torch.tensor([0, 5], dtype=i32)), ValueError,
     "cu_seqlens_k must have 3 elements"),
    ("cu_seqlens_k past total", dict(cu_seqlens_k=torch.tensor([0, 2, 9], dtype=i32)), ValueError,
     "cu_seqlens_k\\[-1\\] must be <= k.shape\\[0\\]"),
    ("max_seqlen_q small", dict(max_seqlen_q=2), ValueError, "max_seqlen_q must bound every sequence"),
    ("max_seqlen_q type", dict(max_seqlen_q=3.0), TypeError, "max_seqlen_q must be an int"),
    ("max_seqlen_k small", dict(max_seqlen_k=1), ValueError, "max_seqlen_k must bound every sequence"),
    ("max_seqlen_k negative", dict(max_seqlen_k=-1), ValueError, "max_seqlen_k must be in"),
    ("max_seqlen_q beyond 32 bits", dict(max_seqlen_q=2**31), ValueError, "max_seqlen_q must be in"),
    ("softmax_scale beyond fp32", dict(softmax_scale=1e39), ValueError, "softmax_scale must be within fp32"),
    ("softmax_scale", dict(softmax_scale=float("inf")), ValueError, "softmax_scale must be finite"),
    ("causal", dict(causal="yes"), TypeError, "causal must be a bool"),
    ("return_lse", dict(return_lse=0), TypeError, "return_lse must be a bool"),
    ("out shape", dict(out=z(5, 4, 192)), ValueError, "out must have shape"),
    ("out dtype", dict(out=z(5, 4, 128, dtype=torch.float16)), TypeError, "out must have dtype"),
    ("round_mode", dict(round_mode="rtz"), ValueError, "round_mode must be 'rtne'"),
    ("host_cu_seqlens_q device", dict(host_cu_seqlens_q=torch.tensor([0, 2, 5], dtype=i32, device="meta")),
     ValueError, "device|host_cu_seqlens_q must be a CPU tensor"),
    ("host_cu_seqlens_q values", dict(host_cu_seqlens_q=torch.tensor([0, 4, 5], dtype=i32)), ValueError,
     "max_seqlen_q must bound every sequence of host_cu_seqlens_q"),
    ("host_cu_seqlens_k shape", dict(host_cu_seqlens_k=torch.tensor([0, 5], dtype=i32)), ValueError,
     "host_cu_seqlens_k must have 3 elements"),
]


@pytest.mark.parametrize("name,change,exc,msg", VARLEN, ids=[c[0] for c in VARLEN])
def test_varlen_rejects(name, change, exc, msg):
    args = varlen_args()
    args.update(change)
    pos = [args.pop(n) for n in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")]
    with pytest.raises(exc, match=msg):
        att.forward_varlen(*pos, **args)


def paged_args(form="list"):
    a = dict(q=z(5, 4, 128), k_cache=z(6, 8, 2, 128), v_cache=z(6, 8, 2, 128),
             cu_seqlens_q=torch.tensor([0, 2, 5], dtype=i32), seqlens_k=torch.tensor([9, 3], dtype=i32))
    if form == "list":
        a.update(kv_indptr=torch.tensor([0, 2, 3], dtype=i32), kv_page_indices=torch.tensor([4, 0, 5], dtype=i32))
    else:
        a.update(block_table=torch.tensor([[4, 0], [5, 1]], dtype=i32))
    return a


PAGED = [
    ("q dtype", "list", dict(q=z(5, 4, 128, dtype=torch.float32)), TypeError, "q must have dtype bfloat16"),
    ("q rank", "list", dict(q=z(5, 4)), ValueError, "q must be 3-D"),
    ("k_cache dtype", "list", dict(k_cache=z(6, 8, 2, 128, dtype=torch.float16)), TypeError, "k_cache must have dtype"),
    ("k_cache rank", "list", dict(k_cache=z(48, 2, 128)), ValueError, "k_cache must be 4-D"),
    ("page size not pow2", "list", dict(k_cache=z(6, 12, 2, 128), v_cache=z(6, 12, 2, 128)), ValueError,
     "page_size .* must be a power of two >= 8"),
    ("page size too small d128", "list", dict(k_cache=z(6, 4, 2, 128), v_cache=z(6, 4, 2, 128)), ValueError,
     "page_size .* >= 8"),
    ("page size too small MLA", "list", dict(q=z(5, 4, 192), k_cache=z(6, 8, 2, 192), v_cache=z(6, 8, 2, 128)),
     ValueError, "page_size .* >= 16"),
    ("k_cache heads", "list", dict(k_cache=z(6, 8, 3, 128), v_cache=z(6, 8, 3, 128)), ValueError,
     "q heads must be a multiple of k_cache heads"),
    ("v_cache pages", "list", dict(v_cache=z(5, 8, 2, 128)), ValueError, "v_cache must have k_cache's"),
    ("v_cache heads", "list", dict(v_cache=z(6, 8, 1, 128)), ValueError, "v_cache must have k_cache's number of heads"),
    ("v_cache dtype", "list", dict(v_cache=z(6, 8, 2, 128, dtype=torch.float32)), TypeError, "v_cache must have dtype"),
    ("strides differ d128", "list", dict(v_cache=z(6, 8, 4, 128)[:, :, :2]), ValueError, "same strides"),
    ("cu_seqlens_q dtype", "list", dict(cu_seqlens_q=torch.tensor([0, 2, 5])),
     TypeError, "cu_seqlens_q must have dtype"),
    ("cu_seqlens_q past total", "list", dict(cu_seqlens_q=torch.tensor([0, 2, 7], dtype=i32)), ValueError,
     "cu_seqlens_q\\[-1\\]"),
    ("seqlens_k length", "list", dict(seqlens_k=torch.tensor([9], dtype=i32)), ValueError, "seqlens_k must have 2"),
    ("seqlens_k device", "list", dict(seqlens_k=torch.tensor([9, 3], dtype=i32, device="meta")), ValueError,
     "seqlens_k must be on the CPU or on cpu"),
    ("kv_indptr device", "list", dict(kv_indptr=torch.tensor([0, 2, 3], dtype=i32, device="meta")), ValueError,
     "kv_indptr must be on the CPU or on cpu"),
    ("seqlens_k negative", "list", dict(seqlens_k=torch.tensor([-1, 3], dtype=i32)), ValueError, "seqlens_k values"),
    ("seqlens_k too long", "list", dict(seqlens_k=torch.tensor([17, 3], dtype=i32)), ValueError,
     "kv_indptr gives sequence 0 2 pages"),
    ("kv_indptr missing", "none", dict(kv_page_indices=torch.tensor([0], dtype=i32)), ValueError,
     "give the pages either"),
    ("both forms", "list", dict(block_table=torch.zeros(2, 2, dtype=i32)), ValueError, "not both"),
    ("kv_indptr dtype", "list", dict(kv_indptr=torch.tensor([0, 2, 3])), TypeError, "kv_indptr must have dtype int32"),
    ("kv_indptr decreasing", "list", dict(kv_indptr=torch.tensor([0, 2, 1], dtype=i32)), ValueError,
     "kv_indptr must be non-decreasing"),
    ("kv_indptr past pages", "list", dict(kv_indptr=torch.tensor([0, 2, 4], dtype=i32)), ValueError,
     "kv_indptr\\[-1\\] must be <="),
    ("kv_page_indices range", "list", dict(kv_page_indices=torch.tensor([4, 6, 5], dtype=i32)), ValueError,
     "kv_page_indices values must be < 6"),
    ("kv_page_indices dtype", "list", dict(kv_page_indices=torch.tensor([4, 0, 5], dtype=torch.int64)), TypeError,
     "kv_page_indices must have dtype int32"),
    ("block_table rows", "table", dict(block_table=torch.zeros(3, 2, dtype=i32)), ValueError,
     "block_table must have B = 2 rows"),
    ("block_table columns", "table", dict(block_table=torch.zeros(2, 1, dtype=i32)), ValueError,
     "block_table has 1 columns"),
    ("block_table range", "table", dict(block_table=torch.tensor([[4, -1], [5, 1]], dtype=i32)), ValueError,
     "block_table values must be >= 0"),
    ("block_table dtype", "table", dict(block_table=torch.zeros(2, 2)), TypeError, "block_table must have dtype int32"),
    ("causal", "list", dict(causal=None), TypeError, "causal must be a bool"),
    ("softmax_scale", "list", dict(softmax_scale=[1.0]), TypeError, "softmax_scale must be a float"),
    ("return_lse", "list", dict(return_lse="no"), TypeError, "return_lse must be a bool"),
    ("out shape", "list", dict(out=z(4, 4, 128)), ValueError, "out must have shape"),
    ("round_mode", "list", dict(round_mode="rtna"), ValueError, "round_mode must be 'rtne'"),
]


@pytest.mark.parametrize("name,form,change,exc,msg", PAGED, ids=[c[0] for c in PAGED])
def test_paged_rejects(name, form, change, exc, msg):
    args = paged_args(form if form != "none" else "table")
    if form == "none":
        args.pop("block_table")
    args.update(change)
    pos = [args.pop(n) for n in ("q", "k_cache", "v_cache", "cu_seqlens_q", "seqlens_k")]
    with pytest.raises(exc, match=msg):
        att.forward_paged(*pos, **args)


def test_paged_valid_inputs_run():
    for form in ("list", "table"):
        a = paged_args(form)
        pos = [a.pop(n) for n in ("q", "k_cache", "v_cache", "cu_seqlens_q", "seqlens_k")]
        assert att.forward_paged(*pos, **a).shape == (5, 4, 128)


PLAN = [
    ("cu_seqlens_q dtype", dict(cu_seqlens_q=torch.tensor([0, 2])), TypeError, "cu_seqlens_q must have dtype int32"),
    ("cu_seqlens_k length", dict(cu_seqlens_k=torch.tensor([0, 2, 3], dtype=i32)),
     ValueError, "cu_seqlens_k must have 2"),
    ("max_seqlen_q", dict(max_seqlen_q=1), ValueError, "max_seqlen_q must bound"),
    ("max_seqlen_k", dict(max_seqlen_k=-2), ValueError, "max_seqlen_k must be in"),
    ("total_q", dict(total_q=1), ValueError, "cu_seqlens_q\\[-1\\] must be <= total_q"),
    ("total_k", dict(total_k="4"), TypeError, "total_k must be an int"),
    ("heads", dict(heads=0), ValueError, "heads must be in"),
    ("kv_heads", dict(kv_heads=3), ValueError, "heads must be a multiple of kv_heads"),
    ("causal", dict(causal=2), TypeError, "causal must be a bool"),
    ("softmax_scale", dict(softmax_scale=float("nan")), ValueError, "softmax_scale must be finite"),
    ("softmax_scale beyond fp32", dict(softmax_scale=1e39), ValueError, "softmax_scale must be within fp32"),
    ("heads beyond 32 bits", dict(heads=2**32, kv_heads=2), ValueError, "heads must be in"),
    ("kv_heads beyond 32 bits", dict(heads=2**33, kv_heads=2**32), ValueError, "heads must be in"),
]


@pytest.mark.parametrize("name,change,exc,msg", PLAN, ids=[c[0] for c in PLAN])
def test_plan_rejects(name, change, exc, msg):
    a = dict(cu_seqlens_q=torch.tensor([0, 2], dtype=i32), cu_seqlens_k=torch.tensor([0, 2], dtype=i32),
             max_seqlen_q=2, max_seqlen_k=2, total_q=2, total_k=2, heads=4, kv_heads=2)
    a.update(change)
    pos = [a.pop(n) for n in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "total_q", "total_k")]
    with pytest.raises(exc, match=msg):
        att.VarlenPlan().plan(*pos, **a)


def test_plan_run_checks_shapes_and_order():
    cu = torch.tensor([0, 2], dtype=i32)
    with pytest.raises(RuntimeError, match="before plan"):
        att.VarlenPlan().run(z(2, 4, 128), z(2, 2, 128), z(2, 2, 128))
    plan = att.VarlenPlan().plan(cu, cu, 2, 2, 2, 2, heads=4, kv_heads=2)
    with pytest.raises(ValueError, match="q must be \\[total_q=2, heads=4"):
        plan.run(z(3, 4, 128), z(2, 2, 128), z(2, 2, 128))
    with pytest.raises(ValueError, match="k must be \\[total_k=2, kv_heads=2"):
        plan.run(z(2, 4, 128), z(2, 1, 128), z(2, 1, 128))
    with pytest.raises(ValueError, match="v must be"):
        plan.run(z(2, 4, 128), z(2, 2, 128), z(3, 2, 128))
