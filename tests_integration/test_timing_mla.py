"""The AITER side of benchmarks/timing/mla.py on synthetic lengths (no emulator run, no AITER wheel): the
work list of AITER's fast-mode get_mla_metadata_v1 as restated there, the metadata tensor the kernel
reads, and the reduce launch's cost."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks.timing

pytest.importorskip("moonmath_emu")
from benchmarks.timing import mla  # noqa: E402


def _blocks(items):
    return sum(-(-(e - s) // mla.GRAN) for _, s, e in items)


@pytest.mark.parametrize("lens,cus,m", [
    ([150000], 304, -1), ([150000] * 2, 304, -1), ([8192] * 8, 304, -1), ([8192] * 32, 304, -1),
    ([150000] * 16, 304, -1), ([150000] * 16, 304, 4), ([200, 333, 40], 5, -1), ([96, 80, 400], 7, 2),
])
def test_work_list_covers_every_row_once_within_the_payload(lens, cus, m):
    wgs = mla.aiter_metadata_v1_2(lens, cus, max_split_per_batch=m)
    assert len(wgs) == cus
    seen = {b: 0 for b in range(len(lens))}
    splits = cus if m < 0 else min(cus, m * len(lens))
    fixed = mla.AITER_FIXED_BLOCKS
    payload = -(-(sum(-(-n // mla.GRAN) for n in lens) + fixed * len(lens)) // splits) + fixed
    for items in wgs:
        # a part's blocks plus the fixed cost of each item never exceed the payload
        assert _blocks(items) + fixed * len(items) <= payload
        for b, s, e in items:
            assert s == seen[b] and e > s and s % mla.GRAN == 0  # contiguous, in order, granule-aligned
            seen[b] = e
    assert [seen[b] for b in range(len(lens))] == lens


def test_work_list_by_hand():
    # blocks 13, 21, 3; payload = ceil((37 + 48) / 5) + 16 = 33: request 0 whole (13 + 16), request 1 does not
    # fit the 4 blocks left, the next part takes 33 - 16 = 17 blocks of it, the third its last 4, the fourth
    # request 2 whole; the fifth part gets nothing
    assert mla.aiter_metadata_v1_2([200, 333, 40], 5) == [
        [(0, 0, 200)], [(1, 0, 272)], [(1, 272, 333)], [(2, 0, 40)], []]


def test_max_split_per_batch_caps_the_split():
    # one split per request: 8 requests over 8 of the 304 parts, none cut
    wgs = mla.aiter_metadata_v1_2([8192] * 8, 304, max_split_per_batch=1)
    assert sum(bool(w) for w in wgs) == 8 and max(mla.pieces_per_request(wgs).values()) == 1
    # the default splits one long request over (nearly) every CU
    wgs = mla.aiter_metadata_v1_2([150000], 304)
    assert mla.pieces_per_request(wgs)[0] == sum(bool(w) for w in wgs) >= 300


def test_metadata_layout():
    import torch

    lens = [200, 333, 40]
    wgs = mla.aiter_metadata_v1_2(lens, 5)
    meta, n_partial = mla._metadata(wgs, lens, 4)
    i32 = meta.view(torch.int32)
    n_ptr = -(-(len(wgs) + 1) // 2)
    assert i32[4:4 + len(wgs) + 1].tolist() == [0, 1, 2, 3, 4, 4]  # the empty fifth part
    info = i32[4 + 2 * n_ptr:].view(-1, 8)[:4].tolist()
    # only request 1 is cut: its two pieces write partials (q_len 4 rows each); kv ranges are positions in
    # kv_page_indices (request 1 starts at 200), kv_offset = request end - item end
    assert [r[1] for r in info] == [-1, 0, 4, -1] and n_partial == 8
    assert info[1][:7] == [1, 0, 4, 8, 200, 472, 61]
    assert info[3][:7] == [2, -1, 8, 12, 533, 573, 0]
    assert meta[0] == meta.data_ptr() + 16 and meta[1] == meta.data_ptr() + 4 * (4 + 2 * n_ptr)


def test_reduce_cost_from_its_launch_shape():
    import moonmath_emu.timing as timing

    cfg = timing.config("gfx942")
    f = 1e9
    # no request cut: no reduce
    assert mla.aiter_reduce(mla.aiter_metadata_v1_2([8192] * 8, 304, max_split_per_batch=1), 8, cfg, f)["seconds"] == 0
    # one request cut into k pieces: 16 workgroups (one per head), each reading q_len x k x (512 fp32 + LSE)
    # and writing q_len bf16 rows; each on its own CU at 64 B/clk
    wgs = mla.aiter_metadata_v1_2([150000], 304)
    k = mla.pieces_per_request(wgs)[0]
    r = mla.aiter_reduce(wgs, 1, cfg, f)
    wg = 4 * (k * (512 * 4 + 4) + 512 * 2)
    assert r["workgroups"] == 16 and r["cu_bytes"] == wg and r["bound"] == "cu"
    assert r["seconds"] == pytest.approx(wg / (cfg["vmem_bytes_per_clk"] * f))
    # 32 requests: 512 workgroups over 304 CUs, so the busiest CU runs two
    wgs = mla.aiter_metadata_v1_2([8192] * 32, 304)
    r = mla.aiter_reduce(wgs, 32, cfg, f)
    assert r["cu_bytes"] >= 2 * 4 * (2 * (512 * 4 + 4) + 512 * 2)


def test_decode_samples_follow_one_pool_rule():
    import moonmath_emu.timing as timing

    cfg = timing.config("gfx942")
    # the parts up to the last simulated workgroup: CU c of XCD 0 runs parts (c * per + j) * 8, j < per
    assert mla.sample_parts(1, cfg) == 9  # AITER's persistent object (one workgroup per CU) and ours at one
    assert mla.sample_parts(2, cfg) == 25
    for per in (1, 2, 3, 4):
        n = mla.sample_parts(per, cfg)
        last = (mla.SAMPLE_CUS * per - 1) * cfg["xcds"]
        assert n == last + 1
        assert (n - 1) // (cfg["xcds"] * mla.SAMPLE_CUS) + 1 == per  # _ours_round's cap keeps `per` on that grid


def test_planner_merge_cost_follows_the_timing_models_merge():
    """The planner's merge_cost (less its launch cost) within 15 % of the timing model's merge, sampled live as
    benchmarks.timing.mla samples it (benchmarks/timing/mla_merge_cost.py), at three cheap gfx942 launches: one
    workgroup per CU (128 parts, a cross-wave fold), two per CU, and four per CU (the round the large batches
    repeat), and a one-wave-per-CU merge of 4 iterations (B 8, 16 parts), whose HBM round trip per iteration
    merge_cost's iteration latency prices (23 % low without it)."""
    pytest.importorskip("moonmath_mla_decode._C")
    from benchmarks.timing import mla_merge_cost

    rows = mla_merge_cost.measure([("gfx942", "a16w8", 2, 128), ("gfx942", "a16w8", 32, 9),
                                   ("gfx942", "a16w8", 64, 4), ("gfx942", "a16w8", 8, 16)], Path("build/timing"))
    assert [r["per_cu"] for r in rows] == [1, 2, 4, 1]
    for r in rows:
        assert abs(r["planner_us"] / r["model_us"] - 1) <= 0.15, r
