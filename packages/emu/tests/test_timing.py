"""The trace-driven timing model (moonmath_emu.timing): mechanisms and one pinned regression value.

The pinned cycle counts are a regression guard for the model's output (a change to the model or its
constants must update them deliberately), not a claim about hardware.
"""
import pytest
import torch
from _emu_build import kernel_source

import moonmath_emu as emu
from moonmath_emu import timing


@pytest.fixture
def tk(build, arch):
    return emu.Module(build(kernel_source("timing.hip"), arch))


def _sim(mod, name, grid, block, args, **kw):
    return timing.simulate(mod, name, grid, block, args, cus=[[(0, 0, 0)]], **kw)


def test_lds_bank_conflicts_from_real_addresses(tk):
    out = torch.zeros(64, dtype=torch.int32)
    flat = _sim(tk, "lds_stride", 1, 64, [out, 1])
    same_bank = _sim(tk, "lds_stride", 1, 64, [out, 32])
    # stride 1: a lane group hits distinct banks (1 cycle per group: 32 lanes on gfx942's 32 banks,
    # 64 on gfx950's 64); stride 32 dwords puts a group's lanes in 1 (gfx942) or 2 (gfx950) banks:
    # 32 cycles per group either way
    assert flat["mem"]["lds_cycles"] == flat["mem"]["lds_ideal_cycles"]
    expect = 32 * flat["mem"]["lds_cycles"]
    assert same_bank["mem"]["lds_cycles"] == expect
    assert same_bank["cu_cycles"][0] > flat["cu_cycles"][0]


# gfx942's ds_read_b128 phases (docs/performance.md): lanes 0-3 + 20-23, 4-7 + 16-19, 8-11 + 28-31,
# 12-15 + 24-27, and the same + 32
_B128_PHASES = [[*range(a, a + 4), *range(b, b + 4)] for h in (0, 32)
                for a, b in ((h, h + 20), (h + 4, h + 16), (h + 8, h + 28), (h + 12, h + 24))]


def _b128_reads(tk, slot, **cfg):
    out = torch.zeros(64, dtype=torch.int32)
    rep = _sim(tk, "lds_read_b128", 1, 64, [out, slot.int()], config=timing.config(tk.arch, **cfg))
    assert torch.equal(out, slot.int() + 6)  # the slot each lane read
    return rep["mem"]


# CDNA 4 (64 banks, 256 B/clk): 4 phases of 16 lanes (HipKittens' rocprofv3 measurement, docs/performance.md)
_B128_PHASES_950 = [[0, 1, 2, 3, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25, 26, 27],
                    [4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 28, 29, 30, 31]]
_B128_PHASES_950 += [[lane + 32 for lane in p] for p in _B128_PHASES_950]


def test_lds_read_b128_conflicts_within_its_phases(tk):
    # slots chosen so each phase's lanes read distinct bank quads (slot = width * phase + position): free
    # of conflicts in the phases, 2-way within consecutive groups of as many lanes (lanes 0-3 and 4-7 share quads)
    phases = _B128_PHASES if tk.arch == "gfx942" else _B128_PHASES_950
    width = len(phases[0])
    slot = torch.zeros(64, dtype=torch.int64)
    for g, lanes in enumerate(phases):
        for j, lane in enumerate(lanes):
            slot[lane] = width * g + j
    phased = _b128_reads(tk, slot)
    consecutive = _b128_reads(tk, slot, lds_b128_read_phases=0)
    reads = 8 if tk.arch == "gfx942" else 4  # ideal LDS cycles of one 1 KiB read at 128 / 256 B/clk
    assert phased["lds_cycles"] - phased["lds_ideal_cycles"] == 0
    assert consecutive["lds_cycles"] - consecutive["lds_ideal_cycles"] == reads
    # consecutive slots are conflict-free either way
    ident = torch.arange(64)
    assert _b128_reads(tk, ident)["lds_cycles"] == _b128_reads(tk, ident, lds_b128_read_phases=0)["lds_cycles"]
    assert _b128_reads(tk, ident)["lds_cycles"] == phased["lds_cycles"]


def test_mfma_pipe_and_dependent_chain(tk):
    out = torch.zeros(256 * 16, dtype=torch.float32)
    n = 40
    rep = _sim(tk, "mfma_chain", 1, 256, [out, n])
    # 4 waves, one per SIMD, n MFMAs of 8 passes (32 cycles) each
    assert rep["pipe_busy"]["mfma"] == 4 * n * 32
    # a dependent chain issues back to back on the MFMA pipe: at least n * 32 cycles per SIMD
    assert rep["cu_cycles"][0] >= n * 32
    assert rep["cu_cycles"][0] < n * 32 + 3000


def test_stalls_by_instruction_and_dependency_writer(tk):
    out = torch.zeros(256 * 16, dtype=torch.float32)
    n = 40
    rep = _sim(tk, "mfma_chain", 1, 256, [out, n])
    by_pc = rep["stall_by_pc"]
    # per (wave, pc) counts add up to the totals by cause, for the 4 waves of the workgroup
    assert {w for w, _ in by_pc} == {0, 1, 2, 3}
    for cause, total in rep["stall"].items():
        assert sum(m.get(cause, 0) for m in by_pc.values()) == pytest.approx(total)
    # the chain's dependency waits are on MFMAs, and each waits for the register an MFMA wrote (SrcC)
    names = {pc: text for k, pc, text in tk.disassemble() if k == "mfma_chain"}
    dep = rep["dep_by_pair"]
    assert sum(dep.values()) == pytest.approx(rep["stall"]["dependency"])
    mfma_waits = sum(v for (a, b), v in dep.items() if names[a].startswith("v_mfma") and names[b].startswith("v_mfma"))
    assert mfma_waits >= 0.9 * rep["stall"]["dependency"] > 0


@pytest.mark.parametrize("fmt, passes", [(0, 8), (1, 8), (2, 4)])
def test_gfx950_f8f6f4_passes_follow_the_operand_formats(build, fmt, passes):
    # LLVM's gfx950 model: 16x16x128 f8f6f4 is 8 passes when A or B is fp8, 4 when both are fp4/fp6
    tk = emu.Module(build(kernel_source("timing.hip"), "gfx950"))
    out = torch.zeros(256 * 4, dtype=torch.float32)
    n = 24
    rep = _sim(tk, "mfma_f8f6f4_chain", 1, 256, [out, n, fmt])
    assert rep["pipe_busy"]["mfma"] == 4 * n * 4 * passes


def test_one_wave_workgroups_spread_over_the_simds(tk):
    """Co-resident one-wave workgroups go to different SIMDs (as occupancy() counts them): four on one CU
    run their MFMA chains in parallel, so the CU takes about one chain's time, not four back to back on
    SIMD 0. Five: the fifth shares a SIMD and waits for a slot (slots 4)."""
    n = 40
    out = torch.zeros(8 * 256 * 16, dtype=torch.float32)
    one = timing.simulate(tk, "mfma_chain", 1, 64, [out, n], cus=[[(0, 0, 0)]], slots=1)
    four = timing.simulate(tk, "mfma_chain", 4, 64, [out, n], cus=[[(w, 0, 0) for w in range(4)]], slots=4)
    assert four["pipe_busy"]["mfma"] == 4 * n * 32
    assert four["cu_cycles"][0] < one["cu_cycles"][0] + 500  # on one SIMD: at least 4 * n * 32
    five = timing.simulate(tk, "mfma_chain", 5, 64, [out, n], cus=[[(w, 0, 0) for w in range(5)]], slots=4)
    assert five["cu_cycles"][0] >= 2 * n * 32


def test_waitcnt_stalls_on_modeled_memory_latency(tk):
    src = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    short = _sim(tk, "chase", 1, 64, [src, out, 1])
    long = _sim(tk, "chase", 1, 64, [src, out, 9])
    cfg = timing.config(tk.arch)
    # 8 more dependent loads, each at least an L1 hit away
    assert long["cu_cycles"][0] - short["cu_cycles"][0] >= 8 * cfg["l1_latency"]
    assert long["stall"]["waitcnt_vm"] > short["stall"]["waitcnt_vm"]
    assert long["mem"]["l1_hits"] >= 8


def test_snop_wait_states_are_issue_slots(tk):
    out = torch.zeros(64, dtype=torch.int32)
    one = _sim(tk, "nops", 1, 64, [out, 1])
    nine = _sim(tk, "nops", 1, 64, [out, 9])
    cfg = timing.config(tk.arch)
    # 8 more s_nop 15: 16 wait states each, one issue slot (4 cycles) per wait state
    per = 16 * cfg["nop_cycles_per_wait_state"]
    assert cfg["nop_cycles_per_wait_state"] == cfg["issue_period"] == 4
    delta = nine["cu_cycles"][0] - one["cu_cycles"][0]
    assert 8 * per <= delta < 8 * (per + 40)
    assert nine["stall"]["nop"] - one["stall"]["nop"] >= 8 * (per - cfg["issue_period"])


def test_results_unchanged_and_untraced_skipped(tk):
    src = torch.randperm(256, generator=torch.Generator().manual_seed(1)).int()
    ref = torch.zeros(256, dtype=torch.int32)
    tk.launch("chase", grid=4, block=64, args=[src, ref, 3])
    got = torch.zeros(256, dtype=torch.int32)
    rep = timing.simulate(tk, "chase", 4, 64, [src, got, 3], cus=[[(1, 0, 0)]], run_untraced=True)
    assert torch.equal(got, ref) and rep["traced_workgroups"] == 1
    part = torch.zeros(256, dtype=torch.int32)
    rep = timing.simulate(tk, "chase", 4, 64, [src, part, 3], cus=[[(1, 0, 0)]])
    assert rep["traced_workgroups"] == 1
    assert torch.equal(part[64:128], ref[64:128]) and not part[:64].any()


def test_bad_arguments(tk):
    out = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(ValueError, match="outside the grid"):
        timing.simulate(tk, "lds_stride", 1, 64, [out, 1], cus=[[(1, 0, 0)]])
    with pytest.raises(ValueError, match="cus"):
        timing.simulate(tk, "lds_stride", 1, 64, [out, 1], cus=[])
    with pytest.raises(ValueError, match="unknown timing constants"):
        timing.config(tk.arch, no_such_constant=1)
    with pytest.raises(ValueError, match="arch"):
        timing.config("gfx90a")
    with pytest.raises(TypeError, match="mod"):
        timing.simulate(object(), "k", 1, 64, [], cus=[[(0, 0, 0)]])


def test_kernel_time_rounds():
    cfg = timing.config("gfx942")
    t = timing.kernel_time(305, 1000.0, 1, cfg)
    assert t["rounds"] == 2 and abs(t["seconds"] - 2000 / 2.1e9) < 1e-15
    assert timing.kernel_time(304, 1000.0, 1, cfg)["rounds"] == 1
    assert timing.kernel_time(10, 1.0, 1, cfg, hbm_bytes=5.3e12)["bound"] == "hbm"


# Regression guard: the model's output for two tiny launches (update deliberately with the model): a
# load chain (memory latency) and an MFMA chain whose result the stores read after the compiler's s_nop.
PINNED = {"gfx942": (2808, 80), "gfx950": (2800, 80)}
PINNED_MFMA = {"gfx942": (711, 312), "gfx950": (715, 312)}


def test_pinned_tiny_launch(tk):
    src = torch.arange(128, dtype=torch.int32)
    out = torch.zeros(128, dtype=torch.int32)
    rep = timing.simulate(tk, "chase", 2, 64, [src, out, 4], cus=[[(0, 0, 0), (1, 0, 0)]], slots=1)
    cyc = (rep["cu_cycles"][0], rep["instructions"])
    assert cyc == PINNED[tk.arch]


def test_modeled_cycles_do_not_depend_on_host_addresses(tk):
    """The caches see each buffer at a canonical address (timing.hpp, Tracer::set_buffers): the same launch on
    buffers the host allocator placed at different addresses (storages starting 0, 64 and 2112 bytes apart) models
    the same cycles and lines. (Before, a launch's cycles moved with the process's allocation history: a8w8 (256,
    8192) decode 175.1 / 182.6 / 183.0 us in three runs of one build.)"""
    n = 8
    words = n * 8 * 4 * 256 * 4
    host = bytearray(4 * words + 4096)
    reps, where = [], set()
    for skew in (0, 64, 2112):
        src = torch.frombuffer(host, dtype=torch.int32, offset=skew, count=words)  # a storage of its own at +skew
        where.add(src.data_ptr() % 4096)
        out = torch.zeros(4 * 256, dtype=torch.int32)
        reps.append(timing.simulate(tk, "stream", 4, 256, [src, out, n], cus=[[(0, 0, 0), (1, 0, 0)]]))
    assert len(where) == 3
    assert all(r["cu_cycles"] == reps[0]["cu_cycles"] and r["mem"] == reps[0]["mem"] for r in reps)


def test_out_of_range_buffer_loads_touch_no_memory(tk):
    """A raw-buffer load past num_records reads zeros and fetches nothing (exec.cpp's range check), so the trace
    records no line for it: 4 loads of 1 KiB a wave, all in range (4096 bytes) or only the first (1024)."""
    src = torch.arange(1024, dtype=torch.int32)
    reps = {}
    for nbytes in (4096, 1024):
        out = torch.zeros(64, dtype=torch.int32)
        reps[nbytes] = timing.simulate(tk, "buffer_range", 1, 64, [src, out, nbytes], cus=[[(0, 0, 0)]])
        assert torch.equal(out, src.view(4, 64, 4)[:, :, 0].sum(0) if nbytes == 4096 else src[:256].view(64, 4)[:, 0])
    loads = {k: r["mem"]["l2_misses"] - 2 for k, r in reps.items()}  # less the two lines of `out`'s stores
    assert loads == {4096: 32, 1024: 8}


def test_pinned_tiny_mfma_launch(tk):
    out = torch.zeros(256 * 16, dtype=torch.float32)
    rep = timing.simulate(tk, "mfma_chain", 1, 256, [out, 8], cus=[[(0, 0, 0)]])
    assert (rep["cu_cycles"][0], rep["instructions"]) == PINNED_MFMA[tk.arch]


def test_hbm_share_is_of_the_busy_cus(tk):
    """busy_cus: a launch that keeps fewer CUs busy leaves the others' HBM and L2 shares to them. A streaming
    read on one simulated CU: its share of the whole chip (the default) bounds it by bandwidth; as one of 8
    busy CUs it runs at its own vector-memory rate; busy_cus = every CU is the default to the cycle."""
    n = 8
    src = torch.zeros(n * 8 * 4 * 256 * 4, dtype=torch.int32)
    out = torch.zeros(4 * 256, dtype=torch.int32)
    cfg = timing.config(tk.arch)
    cus = [[(0, 0, 0)]]
    full = timing.simulate(tk, "stream", 4, 256, [src, out, n], cus=cus)
    same = timing.simulate(tk, "stream", 4, 256, [src, out, n], cus=cus,
                           config=dict(cfg, busy_cus=cfg["cus_per_chip"]))
    few = timing.simulate(tk, "stream", 4, 256, [src, out, n], cus=cus, config=dict(cfg, busy_cus=8))
    assert same["cu_cycles"] == full["cu_cycles"]
    assert few["mem"]["hbm_bytes"] == full["mem"]["hbm_bytes"] >= n * 8 * 4096
    share = cfg["hbm_bytes_per_s"] / (cfg["clock_mhz"] * 1e6) / cfg["cus_per_chip"]  # bytes per cycle at full
    assert full["cu_cycles"][0] >= full["mem"]["hbm_bytes"] / share
    assert few["cu_cycles"][0] < 0.5 * full["cu_cycles"][0]
    assert few["cu_cycles"][0] >= n * 8 * 4096 / cfg["vmem_bytes_per_clk"]
