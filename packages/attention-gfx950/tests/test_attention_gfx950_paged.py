"""forward_paged on the gfx950 kernels (emulator): bit for bit equal to forward_varlen over the same keys,
for page sizes 8..64 with shuffled pages from a larger cache, as page lists and as block tables."""
from __future__ import annotations

import pytest
import torch
from _attn_testing import check_paged_equals_varlen, paged_case

from moonmath_attention_gfx950 import kernel

bf = torch.bfloat16

pytestmark = pytest.mark.skipif(kernel.ARCH not in kernel.KERNELS.archs_built(),
                                reason="this build has no gfx950 code objects")


@pytest.fixture(autouse=True)
def _emu_gfx950(emu_gfx950):
    """Every test here runs on the emulator as gfx950 (conftest.emu_gfx950)."""


@pytest.mark.parametrize("page_size", [8, 16, 32, 64])
def test_paged_equals_varlen_d128(page_size):
    c = paged_case([3, 20], [70, 45], page_size, hq=2, hk=1, dqk=128, dv=128, seed=page_size)
    check_paged_equals_varlen(c, causal=page_size in (16, 64))


@pytest.mark.parametrize("page_size,causal", [(16, False), (32, True)])
def test_paged_equals_varlen_d192(page_size, causal):
    c = paged_case([9, 1], [40, 77], page_size, hq=1, hk=1, dqk=192, dv=128, seed=7 + page_size)
    check_paged_equals_varlen(c, causal)


def test_paged_split_kv_equals_varlen_split():
    """With the planner forced to split KV, the paged run splits the same way and still matches bit for bit."""
    c = paged_case([4, 2], [150, 200], 16, hq=2, hk=2, dqk=128, dv=128, seed=3)
    with kernel.planner_options(min_part_blocks=1):
        assert kernel._C().plan_forward_paged(c["cu_q"].tolist(), c["lens"].tolist(), [0, 0], 2, 2, False, False,
                                              1.0, [0] * 14, **kernel._PLANNER)["n_merge"] > 0
        check_paged_equals_varlen(c, causal=False)


@pytest.mark.slow
@pytest.mark.parametrize("dims", [(128, 128), (192, 128)])
@pytest.mark.parametrize("page_size", [8, 16, 32, 64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_paged_sweep(dims, page_size, causal):
    """Slow sweep: lengths around the tile and page edges, GQA 4:1, both head dims, every page size."""
    if dims[0] == 192 and page_size < 16:
        pytest.skip("MLA pages are >= 16")
    q_lens, k_lens = [0, 1, 17, 129, 300], [0, 15, 16, 600, 127]
    c = paged_case(q_lens, k_lens, page_size, hq=4, hk=1, dqk=dims[0], dv=dims[1], seed=page_size + dims[0])
    check_paged_equals_varlen(c, causal)


def test_paged_planner_binding():
    """The paged plan is the shared planner's over paged sequences: items carry the first page-list entry in
    k_tok0 and the packed q offsets; bad sequences are rejected."""
    C = kernel._C()
    p = C.plan_forward_paged([0, 3, 300], [10, 70], [5, 9], 2, 1, True, False, 1.0, [0] * 14)
    items = sorted(p["items"], key=lambda it: (it[1], it[5]))   # (batch, q_tok0, q_len, k_tok0, k_len, q_row0, ..)
    assert [(it[1], it[2], it[3], it[4], it[5]) for it in items] == [(0, 3, 5, 10, 0), (3, 297, 9, 70, 0),
                                                                   (3, 297, 9, 70, 256)]
    for bad in (([0, 3, 2], [1, 1], [0, 0]), ([0, 3], [-1], [0]), ([0, 3], [1], [-2]), ([0, 3], [1, 2], [0])):
        with pytest.raises(ValueError):
            C.plan_forward_paged(*bad, 1, 1, False, False, 1.0, [0] * 14)


def test_single_page_cache_with_a_huge_page_stride():
    """The kernels hold page strides in 32 bits; a one-page cache's page stride is unbounded by its span (here 2^33
    elements). Page indices past the cache (1, 7; a device-resident table the host cannot check) must still read
    zeros, as with the contiguous cache: == bit for bit."""
    import moonmath_attention_gfx950 as att
    g = torch.Generator().manual_seed(3)
    q = torch.randn(40, 2, 128, generator=g).to(torch.bfloat16)
    kc = torch.randn(1, 16, 1, 128, generator=g).to(torch.bfloat16)
    vc = torch.randn(1, 16, 1, 128, generator=g).to(torch.bfloat16)
    cu_q = torch.tensor([0, 20, 40], dtype=torch.int32)
    lens = torch.tensor([16, 40], dtype=torch.int32)
    table = torch.tensor([[0, 0, 0], [0, 1, 7]], dtype=torch.int32)
    table = att.as_emu_device(table)
    ref = att.forward_paged(q, kc, vc, cu_q, lens, block_table=table)
    big = lambda t: t.as_strided(t.shape, (1 << 33,) + t.stride()[1:])  # noqa: E731
    o = att.forward_paged(q, big(kc), big(vc), cu_q, lens, block_table=table)
    assert torch.equal(o.view(torch.int16), ref.view(torch.int16))
