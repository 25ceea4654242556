"""The gfx950 attention forward planner: its C++ unit test (built with the host compiler) and the binding."""
from __future__ import annotations

from pathlib import Path

import pytest

from moonmath_common.testing import run_host_cpp_test

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent / "csrc"


def test_cpp_unit_test(tmp_path):
    run_host_cpp_test(HERE / "cpp" / "attention_planner_test.cpp", [CSRC / 'host', CSRC], tmp_path)


def test_binding():
    from moonmath_attention_gfx950 import _C

    assert _C.TILE_ROWS == 256 and _C.KV_BLOCK == 64
    from moonmath_attention_gfx950 import kernel, serving

    # one split policy: the Python planner inputs are the shared header's defaults (AttnSplitPolicy)
    assert kernel._PLANNER == _C.DEFAULT_SPLIT_POLICY
    assert (_C.ARGS_BYTES, _C.ITEM_BYTES, _C.MERGE_BYTES) == (serving.ARGS_BYTES, 48, 32)
    lay = _C.device_plan_layout(3, 40, 47, 64, 2)        # 64 keys: too short to split -> no merges, no slots
    assert (lay["tiles"], lay["items"], lay["merges"], lay["slots"]) == (3, 3, 0, 0)
    lay = _C.device_plan_layout(2, 300, 600, 4096, 2)    # 4 tiles, 256 CUs / 2 heads: 64 items, 64 slots
    assert (lay["tiles"], lay["items"], lay["merges"], lay["slots"]) == (4, 64, 4, 64)
    assert lay["bytes"] == 152 + 64 * 48 + 4 * 32 + 16 + 4 * (32 + 8)
    p = _C.plan_forward_batch(1, 300, 4096, 2, 1, False, True, 1.0, [0] * 14)
    assert p["n_merge"] == 2 and p["max_parts"] == 16 and p["n_items"] == 32 and p["n_slots"] == 32
    assert len(p["plan"]) == 152 + 32 * 48 + 2 * 32
    q = _C.plan_forward_batch(1, 300, 4096, 2, 1, False, True, 1.0, [0] * 14, num_cus=1)
    assert q["n_merge"] == 0 and q["n_items"] == 2
    v = _C.plan_forward_varlen([0, 10, 10, 300], [0, 64, 64, 500], 4, 4, True, False, 1.0, [0] * 14)
    assert [it[2] for it in v["items"]] == [290, 290, 10]  # heaviest first, empty sequence skipped
    with pytest.raises(ValueError, match="heads_q must be a positive multiple of heads_kv"):
        _C.plan_forward_batch(1, 1, 1, 3, 2, False, False, 1.0, [0] * 14)
    with pytest.raises(ValueError, match="non-decreasing"):
        _C.plan_forward_varlen([0, 5, 3], [0, 1, 2], 1, 1, False, False, 1.0, [0] * 14)
    with pytest.raises(ValueError, match="strides"):
        _C.plan_forward_batch(1, 1, 1, 1, 1, False, False, 1.0, [0] * 13)
