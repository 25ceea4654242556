"""benchmarks/timing/mla_gfx950.py at small sizes: AITER's fast-mode work list at the GPU MODE amd-mixed-mla
shapes and the reference's split cap (no emulator), the q_len-1 reduce charge, the real gfx950 a8w8 _ps object
honouring a cut work list (needs the AITER wheel), and our a8w8 op's modeled launches at a small shape."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks.timing

pytest.importorskip("moonmath_emu")
from benchmarks.peers import wheel  # noqa: E402
from benchmarks.timing import mla, mla_gfx950  # noqa: E402

CUS = 256  # gfx950


@pytest.mark.parametrize("B,S", mla_gfx950.SHAPES)
def test_gpumode_work_list_at_the_reference_cap(B, S):
    wgs = mla.aiter_metadata_v1_2([S] * B, CUS, max_split_per_batch=mla_gfx950.NUM_KV_SPLITS)
    pieces = mla.pieces_per_request(wgs)
    assert sorted(pieces) == list(range(B))
    assert max(pieces.values()) <= mla_gfx950.NUM_KV_SPLITS
    covered = {b: 0 for b in range(B)}
    for items in wgs:
        for b, s, e in items:
            assert s == covered[b]
            covered[b] = e
    assert all(v == S for v in covered.values())


def test_gpumode_work_list_by_hand():
    # B 256, KV 1024: 64 blocks + 16 per request, payload ceil(256 * 80 / 256) + 16 = 96: one request per CU
    wgs = mla.aiter_metadata_v1_2([1024] * 256, CUS, max_split_per_batch=32)
    assert all(items == [(g, 0, 1024)] for g, items in enumerate(wgs))
    # B 4, KV 8192: 128 parts (32 x 4), payload ceil((4 * 512 + 64) / 128) + 16 = 33: 17 blocks (272 rows) a part
    wgs = mla.aiter_metadata_v1_2([8192] * 4, CUS, max_split_per_batch=32)
    assert wgs[0] == [(0, 0, 272)] and wgs[1] == [(0, 272, 544)]
    assert mla.pieces_per_request(wgs)[0] == 31  # 30 x 17 blocks + the 2 left, which fit whole with their 16


def test_reduce_at_q_len_1():
    import moonmath_emu.timing as timing

    cfg = timing.config("gfx950")
    wgs = mla.aiter_metadata_v1_2([8192] * 4, CUS, max_split_per_batch=32)
    r = mla.aiter_reduce(wgs, 4, cfg, 1e9, q_len=1)
    # 64 workgroups (head, request) on 64 CUs, each reading 31 pieces' 512 fp32 + LSE, writing one bf16 row
    assert r["workgroups"] == 64 and r["cu_bytes"] == 31 * (512 * 4 + 4) + 512 * 2
    assert r["seconds"] == pytest.approx(max(r["cu_bytes"] / (cfg["vmem_bytes_per_clk"] * 1e9),
                                             r["bytes"] / cfg["hbm_bytes_per_s"]))


def test_aiter_q_quantisation_lower_bound():
    import moonmath_emu.timing as timing

    cfg = timing.config("gfx950")
    q = mla_gfx950.aiter_q_quant(4, cfg)
    n = 4 * 16 * 576  # q_len 1: [B, 16, 576] bf16
    # abs 4n, amax 2n, divide 4n, clamp 4n, cast to fp8 3n bytes; at the HBM bandwidth, no launch overhead
    assert q["bytes"] == 17 * n and q["launches"] == 5
    assert q["seconds"] == pytest.approx(17 * n / 8.0e12)
    assert mla_gfx950.aiter_q_quant(256, cfg)["seconds"] == pytest.approx(64 * q["seconds"])


@pytest.mark.skipif(wheel.available() is not None, reason=f"AITER wheel unavailable: {wheel.available()}")
def test_aiter_a8w8_ps_honours_a_cut_work_list():
    sem = mla_gfx950.check_split_semantics()
    assert sem["split"]["split_requests"] == 1 and sem["split"]["empty_parts"] == 1
    # the kernel's own fp8 error (~2.5e-2 vs float64), and the cut request merged to the uncut result
    assert sem["split"]["rel_err"] < 0.04
    assert abs(sem["split"]["rel_err"] - sem["whole"]["rel_err"]) < 2e-3


def test_ours_a8w8_launches_at_a_small_shape():
    import moonmath_emu.timing as timing

    cfg = timing.config("gfx950")
    o = mla_gfx950.ours_shape("a8w8", 2, 256, cfg, 1.19e9)
    names = list(o["launches_s"])
    assert names[:2] == ["mla_q_amax", "decode"]  # the decode quantises its own Q tile
    assert ("merge" in names) == (o["plan"]["nparts"] > 1)
    assert o["seconds"] == pytest.approx(sum(o["launches_s"].values()))
    assert all(v > 0 for v in o["launches_s"].values())
