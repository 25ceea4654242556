"""The composition rules of benchmarks/timing/ours.py (our kernels under the timing model): the dispatch
list-scheduler and the per-launch sum of the gfx942 forward, on synthetic cycle counts (no emulator run)."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks.timing

pytest.importorskip("moonmath_emu")
from benchmarks.timing import ours  # noqa: E402


def test_list_schedule_equal_items_is_rounds_times_cost():
    # 10 equal items on 4 CUs: 3 rounds, the tail round as long as a full one (run.py's rule)
    assert ours.list_schedule([5.0] * 10, 4) == 15.0
    assert ours.list_schedule([5.0] * 3, 4) == 5.0


def test_list_schedule_follows_dispatch_order():
    # heaviest first balances: 8, 7 | then 2 goes to the CU free at 7, 1 to the one free at 8
    assert ours.list_schedule([8.0, 7.0, 2.0, 1.0], 2) == 9.0
    # lightest first leaves the heavy item last on one CU
    assert ours.list_schedule([1.0, 2.0, 7.0, 8.0], 2) == 10.0


def test_mha_shape_sums_its_launches_and_follows_the_planner():
    _C = pytest.importorskip("moonmath_mha_gfx942._C")
    import moonmath_emu.timing as timing

    cfg = timing.config("gfx942")
    fits = {"dense": {"a": 1000.0, "b": 100.0}, "split": {"a": 500.0, "b": 100.0}}
    small = {("transpose", "rtne"): {"round_cycles": 4000.0, "slots": 4, "hbm_per_wg": 32768},
             ("merge", "rtne", 19): {"round_cycles": 20000.0, "slots": 8, "hbm_per_wg": 8 * (19 * 520 + 256)},
             ("merge", "rtne", 4): {"round_cycles": 5000.0, "slots": 8, "hbm_per_wg": 8 * (4 * 520 + 256)}}
    f = 1e9
    # (2, 24, 8192): 1536 q-block items on 304 CUs leave 16 in the tail; the planner splits them 19 ways
    p = _C.plan_tail(8192, 8192, 48, 304, True)
    assert (p.tail, p.parts) == (16, 19)
    r = ours.mha_shape((2, 24, 8192), "rtne", fits, small, cfg, f)
    assert set(r["launches"]) == {"v_transpose", "dense", "split", "merge"}
    assert r["seconds"] == pytest.approx(sum(r["launches"].values()))
    assert r["launches"]["dense"] == pytest.approx(5 * (1000 + 100 * 8192) / f)  # 1520 items: 5 full rounds
    assert r["launches"]["split"] == pytest.approx((500 + 100 * 7 * 64) / f)  # 304 parts of ceil(128/19) blocks
    # (1, 32, 16384): 2048 items, tail 224; the makespan-priced planner splits them 4 ways (896 parts: 3 rounds
    # of 64 blocks after the 6 dense rounds; docs/kernels/mha_gfx942.md "Tail split priced by makespan")
    r = ours.mha_shape((1, 32, 16384), "rtne", fits, small, cfg, f)
    assert r["plan"] == {"n_dense": 1824, "tail": 224, "parts": 4}
    assert r["launches"]["dense"] == pytest.approx(6 * (1000 + 100 * 16384) / f)
    assert r["launches"]["split"] == pytest.approx(3 * (500 + 100 * 64 * 64) / f)
    # a plan given replaces the planner's: no split, 7 dense rounds, no merge
    none = SimpleNamespace(n_dense=2048, tail=0, parts=1, slots=0)
    r = ours.mha_shape((1, 32, 16384), "rtne", fits, small, cfg, f, plan=none)
    assert set(r["launches"]) == {"v_transpose", "dense"}
    assert r["launches"]["dense"] == pytest.approx(7 * (1000 + 100 * 16384) / f)


def test_struct_arguments_are_copied_with_their_pointers():
    import torch

    from moonmath_common.codeobject import StructArg

    a = torch.arange(100, dtype=torch.int32)
    b = torch.arange(10, dtype=torch.float32)
    n = 0x1234_5678_9ABC_DEF0  # an integer field outside every buffer stays as it is
    data = b"".join(x.to_bytes(8, "little") for x in (a.data_ptr(), b.data_ptr() + 8, n))
    s = ours._copy_struct(StructArg(data, [a, None, b]))
    na, nb = s.buffers
    assert torch.equal(na, a) and torch.equal(nb, b)
    assert all(t.untyped_storage().data_ptr() == t.data_ptr() for t in (na, nb))  # offset 0 in own storage
    words = [int.from_bytes(s.data[i:i + 8], "little") for i in range(0, 24, 8)]
    assert words == [na.data_ptr(), nb.data_ptr() + 8, n]  # a pointer into a buffer keeps its offset


def test_simulated_arguments_start_their_own_storage():
    """The caches see a storage at a canonical address plus the tensor's offset in it, so a copy must sit at offset
    0 of a storage of its own: a copy placed at an aligned point of a larger buffer had an offset that moved with
    the host allocation (one merge launch modeled 3806 or 3830 cycles a workgroup, run to run)."""
    import torch

    from benchmarks.timing.fmha import _own_copy

    big = torch.arange(64, dtype=torch.float32)
    for t in (big, big[3:19], big.view(8, 8)[2:5]):
        c = _own_copy(t.contiguous())
        assert torch.equal(c, t) and c.data_ptr() != t.data_ptr()
        assert c.untyped_storage().data_ptr() == c.data_ptr() and c.untyped_storage().nbytes() == t.numel() * 4
