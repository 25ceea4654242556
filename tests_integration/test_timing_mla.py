"""The work-list rule of benchmarks/timing/mla.py (our approximation of AITER's balanced MLA metadata) and
its metadata layout, on synthetic lengths (no emulator run, no AITER wheel)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks.timing

pytest.importorskip("moonmath_emu")
from benchmarks.timing import mla  # noqa: E402


def _rows(items):
    return sum(e - s for _, s, e in items)


@pytest.mark.parametrize("lens,groups,item_rows", [
    ([150000], 304, 0), ([150000], 304, 135), ([150000] * 2, 304, 135), ([8192] * 8, 304, 135),
    ([8192] * 32, 304, 135), ([150000] * 16, 304, 135), ([200, 333], 5, 0), ([96, 80, 400], 7, 0),
])
def test_split_covers_every_row_once_in_order(lens, groups, item_rows):
    wgs = mla.aiter_work_split(lens, groups, item_rows=item_rows)
    assert len(wgs) <= groups
    seen = {b: 0 for b in range(len(lens))}
    for items in wgs:
        assert items
        for b, s, e in items:
            assert s == seen[b] and e > s  # contiguous, in order, non-empty
            seen[b] = e
    assert [seen[b] for b in range(len(lens))] == lens


def test_split_balances_cost_and_charges_extra_items():
    # 2 requests of 150000 rows on 304 workgroups: every workgroup's cost (rows + 135 per extra item)
    # within one 16-row granule plus one item of the quota, except the last (the remainder)
    wgs = mla.aiter_work_split([150000, 150000], 304, item_rows=135)
    quota = -(-(300000 + 135) // 304)
    costs = [_rows(it) + 135 * (len(it) - 1) for it in wgs]
    assert max(costs) <= quota + mla.GRAN
    assert min(costs[:-1]) >= quota - mla.GRAN - 135
    # the workgroup holding the request boundary has two items and fewer rows than a one-item share
    two = [it for it in wgs if len(it) == 2]
    assert len(two) == 1 and _rows(two[0]) < max(_rows(it) for it in wgs if len(it) == 1)


def test_metadata_layout():
    import torch

    lens = [200, 333]
    wgs = mla.aiter_work_split(lens, 5)
    meta, n_partial = mla._metadata(wgs, lens, 4)
    i32 = meta.view(torch.int32)
    n_ptr = -(-(len(wgs) + 1) // 2)
    indptr = i32[4:4 + len(wgs) + 1].tolist()
    assert indptr == [0, 1, 3, 4, 5, 6]
    info = i32[4 + 2 * n_ptr:].view(-1, 8)[:6].tolist()
    # every request is split here: partial_loc counts query rows (q_len 4 per item), kv ranges are in
    # kv_page_indices positions (request 1 starts at 200), kv_offset = request end - item end
    assert [r[1] for r in info] == [0, 4, 8, 12, 16, 20] and n_partial == 24
    assert info[1][:7] == [0, 4, 0, 4, 112, 200, 0]
    assert info[2][:7] == [1, 8, 4, 8, 200, 232, 301]  # a 32-row piece: shares round up to 16 rows
    assert meta[0] == meta.data_ptr() + 16 and meta[1] == meta.data_ptr() + 4 * (4 + 2 * n_ptr)
