"""MLA decode under the frozen timing model: AITER's a16w8 persistent kernel and ours at the seed's MLA table.

    python -m benchmarks.timing.mla [--out build/timing] [--shapes 0,2]

Writes mla.md and mla.json to --out. Every number is MODELED (moonmath_emu.timing, constants of
docs/performance.md, the effective clock of run.py's RTNE calibration, every launch simulated at it:
clock.py; nothing fitted here). The
published column is the seed's AITER a16w8 time on MI300X (B, S; H = 16, q_len 4, CUDA-graph replay,
stage 1 and its reduce).

AITER (gfx942 `mla/mla_a16w8_qh16_m16x4_n16x1_coex0_mask1_ps.co`): persistent; it walks the work list
of AITER's get_mla_metadata_v1. `aiter_metadata_v1_2` restates that function's default (fast-mode) rule
from the wheel's source, so the work list is AITER's own, not an approximation; the bench's num_kv_splits
sweep is modeled as the fastest of SPLIT_SWEEP. `check_split_semantics` runs the real kernel on such a
work list and merges its partials on the host against the float64 reference. A workgroup's cycles =
a + b * rows + c * (items - 1), a and b from 2 CUs of XCD 0 at two chunk lengths (one item each), c from
the same chunk cut into two items of different requests, fitted at the work list's busy CUs (`AiterFits`: the
timing model shares HBM and L2 among them); stage 1 ends with its slowest workgroup. The
reduce (mla_reduce_v1) is built from source by AITER, so there is no code object to simulate: it is
charged from its launch shape (`aiter_reduce`: one workgroup per head and request, the busiest CU's bytes
at the CU's vector-memory rate, at least the HBM time), a lower bound.

Ours (`moonmath_mla_decode.mla_decode_a16w8`): its planner's plan at each shape; the decode launch's
workgroups are equal (each busy part has whole tiles of the kernel: `busy_part_rows`), so one CU round of `slots`
workgroups is simulated at the real part length on 2 CUs of XCD 0, sharing HBM with the real grid's busy CUs, and
the grid composed in rounds over 304 CUs; the
merge launch (when the plan splits) likewise, simulated at the plan's nparts and the real batch (so its grid and
workgroups per CU are the real launch's).

Both sides' decode samples follow one rule (`sample_parts`): a launch of just the parts up to the last simulated
workgroup, over a shuffled KV pool of exactly those parts' rows, so the pool (which sets how often a traced row
shares a 128-byte line with another traced part's row) has the same size for AITER's object and ours. One
exception: a plan of ours that balances its split by request length (1 < B <= 64) is sampled from its real launch
(B requests of nparts busy parts each), since only a launch of several requests runs the balanced locate (every
workgroup's scan of the requests' lengths, after their own HBM round trip); its pool is then the real launch's,
larger than AITER's sample pool, which if anything favours AITER.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import torch

import moonmath_emu.timing as timing
from benchmarks.peers import harness, mla

from . import clock, plots
from .fmha import _own_copy

# Seed README, "Results — MLA decode, MI300X, bf16 Q / fp8 KV, H = 16, q_len = 4": (B, S), AITER a16w8 µs,
# and the original moonmath kernel's µs (its published measurement; not the kernel modeled here).
SEED_MLA = [
    ((1, 150000), 133.4, 76.8),
    ((2, 150000), 157.0, 112.4),
    ((8, 8192), 57.7, 51.8),
    ((8, 32768), 133.9, 101.8),
    ((8, 65536), 247.8, 180.4),
    ((8, 150000), 531.6, 394.2),
    ((16, 150000), 1045.4, 811.1),
    ((32, 8192), 139.2, 104.1),
]
Q_LEN = 4
GRAN = 16          # KV rows per kernel tile (n16): the split granularity
FIT_ROWS = (1024, 4096)
CHECK_ROWS = 8192


# ---------------------------------------------------------------- AITER: work list and its launch

# AITER's get_mla_metadata_v1 in its default fast mode (`fast_mode=True`: the `v1_2` device kernel of the
# wheel's csrc/kernels/mla/metadata/v1_2_device.cuh). Its rule, restated: every request costs
# ceil(len / kv_granularity) KV blocks plus a fixed 16 blocks; the batch's total over num_splits CU parts
# is each part's payload (plus the 16 again); CU parts are filled in order, a request going whole into the
# current part when its remaining blocks + 16 fit, else the part takes (payload left - 16) blocks of it
# and the request continues in the next part. num_splits = the CU count, or with max_split_per_batch = m
# >= 1, min(CUs, m * batch). A request cut into more than one piece writes fp32 partials that
# mla_reduce_v1 merges.
AITER_FIXED_BLOCKS = 16
# The seed's bench swept num_kv_splits per shape and kept the fastest validated configuration, without
# listing the values: we model AITER's default (-1) and max_split_per_batch = 1 .. 64, and keep the fastest
# modeled one, as the bench kept the fastest measured one.
SPLIT_SWEEP = (-1,) + tuple(range(1, 65))


def aiter_metadata_v1_2(lens: list[int], num_cu: int, *, max_split_per_batch: int = -1,
                        gran: int = GRAN) -> list[list[tuple[int, int, int]]]:
    """Per CU part (workgroup), its items (request, kv_start, kv_end) in request-local rows, by the rule of
    AITER's fast-mode metadata (above). Parts left without work are empty lists."""
    if num_cu < 1 or not lens or min(lens) < 1:
        raise ValueError(f"num_cu must be >= 1 and every length >= 1; got {num_cu}, {lens}")
    blocks = [math.ceil(n / gran) for n in lens]
    fixed = AITER_FIXED_BLOCKS
    splits = num_cu if max_split_per_batch < 0 else min(num_cu, max_split_per_batch * len(lens))
    payload = math.ceil((sum(blocks) + fixed * len(lens)) / splits) + fixed
    wgs: list[list[tuple[int, int, int]]] = []
    b, done = 0, 0                      # current request, its blocks already given to earlier parts
    for _ in range(num_cu):
        room, items = payload, []
        while b < len(lens):
            left = blocks[b] - done
            if room >= left + fixed:    # the rest of the request fits this part
                items.append((b, done * gran, lens[b]))
                room -= left + fixed
                b, done = b + 1, 0
                continue
            if room > fixed:            # cut: this part takes what its payload has left
                take = room - fixed
                items.append((b, done * gran, (done + take) * gran))
                done += take
            break
        wgs.append(items)
    if b < len(lens):
        raise AssertionError("the payload rule left requests unassigned")
    return wgs


def pieces_per_request(wgs: list[list[tuple[int, int, int]]]) -> dict[int, int]:
    n: dict[int, int] = {}
    for items in wgs:
        for b, _, _ in items:
            n[b] = n.get(b, 0) + 1
    return n


def _metadata(wgs: list[list[tuple[int, int, int]]], lens: list[int], q_len: int) -> tuple[torch.Tensor, int]:
    """Persistent metadata tensor (pointer pair, work_indptr, work_info) and the partial-row count.
    An item of a request that has more than one item writes a partial at partial_loc (query rows)."""
    n_items = pieces_per_request(wgs)
    indptr = [0]
    for b_len in lens:
        indptr.append(indptr[-1] + b_len)
    G = len(wgs)
    W = sum(len(x) for x in wgs)
    n_ptr = math.ceil((G + 1) / 2)
    meta = torch.zeros(2 + n_ptr + 4 * W, dtype=torch.int64)
    i32 = meta.view(torch.int32)
    wi_off = 4 + 2 * n_ptr
    info = i32[wi_off:wi_off + 8 * W].view(W, 8)
    w, loc = 0, 0
    for g, items in enumerate(wgs):
        i32[4 + g] = w
        for b, s, e in items:
            part = n_items[b] > 1
            info[w] = torch.tensor([b, loc if part else -1, b * q_len, (b + 1) * q_len, indptr[b] + s, indptr[b] + e,
                                    lens[b] - e, 0], dtype=torch.int32)
            loc += q_len if part else 0
            w += 1
    i32[4 + G] = w
    meta[0] = meta.data_ptr() + 16
    meta[1] = meta.data_ptr() + 4 * wi_off
    return meta, loc


def aiter_values(lens: list[int], wgs, *, seed: int = 0, pool: torch.Tensor | None = None) -> tuple[dict, dict]:
    """The a16w8 kernel's argument values for requests of `lens` rows and work list `wgs` (page size 1)."""
    g = torch.Generator().manual_seed(seed)
    B, H = len(lens), mla.HEADS
    T = B * Q_LEN
    q = (torch.randn(T, H, mla.LAT + mla.ROPE, generator=g) * 0.5).bfloat16()
    slots = sum(lens)
    if pool is None:
        pool = torch.randn(slots, 1, mla.LAT + mla.ROPE, generator=g).to(torch.float8_e4m3fnuz)
    kv_indices = torch.randperm(slots, generator=g).to(torch.int32)
    kv_indptr = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)
    meta, n_partial = _metadata(wgs, lens, Q_LEN)
    values = {
        "split_out": torch.zeros(max(n_partial, 1), 1, H, mla.LAT, dtype=torch.float32),
        "split_lse": torch.full((max(n_partial, 1), 1, H, 1), float("-inf"), dtype=torch.float32),
        "q": q, "kv": pool, "kv_indptr": kv_indptr, "kv_page_indices": kv_indices,
        "kv_last_page_lens": torch.ones(B, dtype=torch.int32), "scale": (mla.LAT + mla.ROPE) ** -0.5,
        "heads_x_qlen": H * Q_LEN, "kv_splits": 1, "q_request_stride": q.stride(0) * 2 * Q_LEN,
        "page_stride": pool.stride(0), "log2_page_size": 0,
        "qo_indptr": torch.arange(B + 1, dtype=torch.int32) * Q_LEN, "work": meta,
        "out": torch.zeros(T, H, mla.LAT, dtype=torch.bfloat16), "q_scale": None,
        "kv_scale": torch.tensor([0.7], dtype=torch.float32),
    }
    return values, {"n_partial_rows": n_partial, "kv_indices": kv_indices, "kv_indptr": kv_indptr}


def check_split_semantics(lens=(200, 333, 40), groups: int = 5) -> dict:
    """Run the real kernel on AITER's fast-mode work list (one request whole, one cut in two, a part left
    empty), merge its partials on the host (natural-log LSE) and compare with the float64 reference: the
    error says the work list is one the kernel honours."""
    wgs = aiter_metadata_v1_2(list(lens), groups)
    values, extra = aiter_values(list(lens), wgs, seed=3)
    harness.launch("gfx942", mla.A16W8_PS, mla.MLA_ARGS, values, grid=(len(wgs), 1, 1), block=256)
    q = values["q"]
    ref, _ = mla.reference_mla(q[..., :mla.LAT].contiguous(), q[..., mla.LAT:].contiguous(), values["kv"],
                               torch.tensor(list(lens), dtype=torch.int32), extra["kv_indices"], extra["kv_indptr"],
                               values["scale"], 0.7)
    out, n_split = host_merge(values, wgs, Q_LEN)
    rel = float((out - ref).norm() / ref.norm())
    return {"lens": list(lens), "groups": groups, "items": sum(len(x) for x in wgs),
            "empty_parts": sum(not x for x in wgs), "split_requests": n_split, "rel_err": rel}


def host_merge(values: dict, wgs: list[list[tuple[int, int, int]]], q_len: int) -> tuple[torch.Tensor, int]:
    """The persistent kernel's output with its split requests' partials merged on the host in float64
    (natural-log LSE, as mla_reduce_v1): (out [T, H, 512] float64, the number of split requests)."""
    out = values["out"].double().clone()
    so, sl = values["split_out"][:, 0].double(), values["split_lse"][:, 0, :, 0].double()
    loc = 0
    n_items = pieces_per_request(wgs)
    locs: dict[int, list[int]] = {}
    for items in wgs:
        for b, _, _ in items:
            if n_items[b] > 1:
                locs.setdefault(b, []).append(loc)
                loc += q_len
    for b, ls in locs.items():
        for t in range(q_len):
            rows = [x + t for x in ls]
            lse = sl[rows]                       # [parts, H]
            w = torch.softmax(lse, dim=0)
            out[b * q_len + t] = (w[..., None] * so[rows]).sum(0)
    return out, len(locs)


SAMPLE_CUS = 2  # CUs of XCD 0 simulated per launch


def busy_part_rows(kernel: str, arch: str, S: int, nparts: int) -> int:
    """KV rows of a busy part of a launch of our `kernel` (its planner cost row) cut into `nparts` parts at
    length S: whole tiles of the kernel (a part holds ceil(ceil(S / tile) / nparts) of them), so a decode sample's
    parts are the real launch's busy ones. (As ceil(S / nparts), gfx950 a8w8 (4, 1024) at 64 parts -- a 32-token
    tile for half the parts, none for the others -- sampled a busy and an empty workgroup, and their mean, 6958
    cycles, stood for a round whose busy parts take 9132.)"""
    from moonmath_mla_decode import _C
    tile = int(_C.mla_kernel_tile_tokens(kernel, arch))
    return min(S, math.ceil(math.ceil(S / tile) / nparts) * tile)


def sample_parts(per_cu: int, cfg: dict, ncu: int = SAMPLE_CUS) -> int:
    """The decode sample's parts, one rule for AITER's object and ours: the parts up to the last simulated
    workgroup, (ncu * per_cu - 1) * xcds + 1 (CU c of XCD 0 runs parts (c * per_cu + j) * xcds, j < per_cu), over
    a shuffled pool of exactly their rows. (Before session 9 AITER's sample had 9 parts and ours 64; the smaller
    pool puts more traced rows on lines another traced part has loaded: a session-8 probe measured 636.0 against
    644.1 HBM bytes per row at gfx950 (256, 8192).)"""
    return (ncu * per_cu - 1) * cfg["xcds"] + 1


def _aiter_sample(rows: int, two_items: bool, cfg: dict, ncu: int = SAMPLE_CUS, *, arch: str = "gfx942",
                  obj: str = mla.A16W8_PS, make_values=aiter_values) -> dict:
    """Simulate workgroups 0 and 8 (XCD 0) of a sample_parts(1)-workgroup launch (the persistent object runs one
    workgroup per CU) whose every workgroup walks `rows` KV rows: one item of one long request, or (two_items)
    halves of two requests. `obj` is the persistent code object of `arch`, `make_values(lens, wgs)` its argument
    values."""
    xcds = cfg["xcds"]
    G = sample_parts(1, cfg, ncu)
    if two_items:
        half = rows // 2
        lens = [half] * (2 * G)
        wgs = [[(2 * g, 0, half), (2 * g + 1, 0, half)] for g in range(G)]
    else:
        lens = [rows * G]
        wgs = [[(0, g * rows, (g + 1) * rows)] for g in range(G)]
    values, _ = make_values(lens, wgs)
    # every tensor in a storage of its own (the caches see storages at canonical addresses; not the metadata,
    # which holds its own address)
    values = {n: (_own_copy(t.contiguous()) if isinstance(t, torch.Tensor) and n != "work" else t)
              for n, t in values.items()}
    mod, kernel = harness.load(arch, obj)
    args = harness.pack_args(mod, kernel, mla.MLA_ARGS, values)
    cus = [[(c * xcds, 0, 0)] for c in range(ncu)]
    rep = timing.simulate(mod, kernel, (G, 1, 1), (256, 1, 1), args, cus=cus, config=cfg, slots=1)
    rep["wg_cycles"] = sum(rep["cu_cycles"]) / len(rep["cu_cycles"])
    total = sum(rep["stall"].values())
    rep["where"] = {k: v / total for k, v in sorted(rep["stall"].items())}
    span = max(rep["cu_cycles"]) * cfg["simds_per_cu"] * ncu
    rep["pipe_util"] = {k: v / span for k, v in sorted(rep["pipe_busy"].items())}
    return rep


def aiter_fit(cfg: dict, check: bool = True, **sample) -> dict:
    """a, b, c of the workgroup cycles (module docstring); `sample`: _aiter_sample's arch / obj / make_values;
    `check`: also simulate CHECK_ROWS to check the extrapolation."""
    r1, r2 = (_aiter_sample(n, False, cfg, **sample) for n in FIT_ROWS)
    b = (r2["wg_cycles"] - r1["wg_cycles"]) / (FIT_ROWS[1] - FIT_ROWS[0])
    a = r1["wg_cycles"] - b * FIT_ROWS[0]
    two = _aiter_sample(FIT_ROWS[1], True, cfg, **sample)
    c = two["wg_cycles"] - r2["wg_cycles"]
    chk = _aiter_sample(CHECK_ROWS, False, cfg, **sample)["wg_cycles"] if check else float("nan")
    return {"a": a, "b": b, "c": c, "cycles": {FIT_ROWS[0]: r1["wg_cycles"], FIT_ROWS[1]: r2["wg_cycles"]},
            "two_items": two["wg_cycles"],
            "check": {"rows": CHECK_ROWS, "simulated": chk, "extrapolated": a + b * CHECK_ROWS},
            "where": r2["where"], "pipe_util": r2["pipe_util"], "mem": r2["mem"]}


class AiterFits:
    """aiter_fit by the busy CUs of AITER's launch. The timing model shares HBM and L2 among a launch's busy CUs
    (moonmath_emu.timing's busy_cus), so a work list that leaves CUs without work runs its workgroups on larger
    shares: gfx950 a8w8 a = 7313 cycles on every CU's share, 6340 on 88 busy CUs' (b unchanged). Fitted lazily at
    the busy count rounded down to a power of two -- in AITER's favour: a larger share than its launch has; at
    most log2(CUs) + 1 fits -- and the full chip's at its own count (`full`)."""

    def __init__(self, cfg: dict, check: bool = True, **sample):
        self.cfg, self.sample = cfg, sample
        self.full = aiter_fit(cfg, check, **sample)
        self._by_busy: dict[int, dict] = {}

    def at(self, busy: int) -> dict:
        if busy >= self.cfg["cus_per_chip"]:
            return self.full
        k = 1 << (max(1, busy).bit_length() - 1)
        if k not in self._by_busy:
            self._by_busy[k] = aiter_fit(dict(self.cfg, busy_cus=k), False, **self.sample)
        return self._by_busy[k]


def aiter_reduce(wgs: list[list[tuple[int, int, int]]], B: int, cfg: dict, f_hz: float, q_len: int = Q_LEN) -> dict:
    """mla_reduce_v1's modeled time (AITER builds it from source: no code object to simulate). Its launch,
    from the wheel's csrc/kernels/mla/reduce.cu: one 128-thread workgroup per (head, request) -- grid
    (16, B) while 16 B <= CUs x 16 -- each walking its request's pieces for each of the q_len rows: the
    piece's LSE and its 512 fp32 outputs for that head, then the bf16 row. Charged the larger of the chip's
    HBM time for all its bytes and the busiest CU's bytes at the CU's vector-memory rate
    (vmem_bytes_per_clk): a lower bound (no latency)."""
    n = pieces_per_request(wgs)
    split = {b: k for b, k in n.items() if k > 1}
    if not split:
        return {"seconds": 0.0, "workgroups": 0, "cu_bytes": 0.0, "bytes": 0.0}
    H, cus = mla.HEADS, cfg["cus_per_chip"]
    if H * B > cus * 16:
        raise NotImplementedError("the persistent reduce launch (16 x B > CUs x 16) is not modeled")
    per_cu = [0.0] * cus
    total = 0.0
    for t in range(B):                       # workgroup (h, t) is the (h + 16 t)-th dispatched
        k = split.get(t, 0)
        wg_bytes = q_len * (k * (mla.LAT * 4 + 4) + mla.LAT * 2) if k else 0
        for h in range(H):
            per_cu[(h + H * t) % cus] += wg_bytes
            total += wg_bytes
    t_cu = max(per_cu) / (cfg["vmem_bytes_per_clk"] * f_hz)
    t_hbm = total / cfg["hbm_bytes_per_s"]
    return {"seconds": max(t_cu, t_hbm), "workgroups": H * B, "cu_bytes": max(per_cu), "bytes": total,
            "bound": "cu" if t_cu >= t_hbm else "hbm"}


def aiter_config(B: int, S: int, fits: AiterFits, cfg: dict, f_hz: float, max_split_per_batch: int,
                 q_len: int = Q_LEN) -> dict:
    """Modeled time of stage 1 (the slowest CU part) + the reduce on AITER's fast-mode work list (its workgroup
    cycles fitted at the list's busy CUs)."""
    wgs = aiter_metadata_v1_2([S] * B, cfg["cus_per_chip"], max_split_per_batch=max_split_per_batch)
    fit = fits.at(sum(1 for items in wgs if items))
    costs = [fit["a"] + fit["b"] * sum(e - s for _, s, e in items) + fit["c"] * (len(items) - 1)
             for items in wgs if items]
    t1 = max(costs) / f_hz
    red = aiter_reduce(wgs, B, cfg, f_hz, q_len)
    return {"seconds": t1 + red["seconds"], "stage1_s": t1, "reduce_s": red["seconds"], "reduce": red,
            "max_split_per_batch": max_split_per_batch, "workgroups": len(costs),
            "max_items": max(map(len, wgs)), "max_pieces": max(pieces_per_request(wgs).values()),
            "balance": sum(costs) / (len(costs) * max(costs)), "kv_bytes": B * S * (mla.LAT + mla.ROPE)}


def aiter_shape(B: int, S: int, fits: AiterFits, cfg: dict, f_hz: float) -> dict:
    """The fastest modeled configuration over SPLIT_SWEEP (the bench's num_kv_splits sweep)."""
    runs = [aiter_config(B, S, fits, cfg, f_hz, m) for m in SPLIT_SWEEP]
    best = dict(min(runs, key=lambda r: r["seconds"]))
    best["default"] = {k: runs[0][k] for k in ("seconds", "stage1_s", "reduce_s")}
    return best


# ---------------------------------------------------------------- ours: moonmath_mla_decode

def _ours_capture(B: int, S: int, nparts: int | None = None, variant: str | None = None,
                  seed: int = 0, run: bool = False) -> tuple[list, object]:
    """The op's launches at (B, S), recorded; `run`: also run them, so a merge's recorded workspace holds the
    decode's partials (not run, it holds whatever torch.empty returned: the merge's (m, l, ln) were garbage and
    its modeled time varied run to run, 13.7-15.1 us at (8, 8192), with the parts read as empty or live)."""
    from moonmath_common import use_arch, use_backend
    from moonmath_mla_decode import kernel as K

    from .ours import captured

    q_lat, q_pe, pool, seq_lens, kv_indices, kv_indptr, scale, kv_scale = mla.make_inputs(B, S, Q_LEN, seed=seed)
    o = torch.empty_like(q_lat)
    with use_backend("emu"), use_arch("gfx942"):
        plan = K.make_plan(B, mla.HEADS, Q_LEN, S, nparts=nparts, variant=variant, arch="gfx942")
        with captured(K.KERNELS, run_first=(K.WS_KERNEL, *K.MERGE_KERNELS) if run else ()) as seen:
            K.run(q_lat, q_pe, pool, o, seq_lens, kv_indices, kv_indptr, scale, kv_scale, plan=plan)
    return seen, plan


def per_cu(L: dict, real_grid: int, cfg: dict) -> tuple[int, int]:
    """(occupancy of L's kernel, the workgroups a CU runs at once in the real grid of `real_grid` workgroups)."""
    from .ours import _module

    slots = timing.occupancy(_module(L["path"]).kernel_info(L["kernel"]), L["block"][0], cfg)
    return slots, min(slots, math.ceil(real_grid / cfg["cus_per_chip"]))


def _ours_round(L: dict, real_grid: int, cfg: dict, ncu: int = SAMPLE_CUS) -> dict:
    """One CU round of launch L: as many co-resident workgroups per CU as the real grid puts there."""
    from .ours import simulate

    slots, per = per_cu(L, real_grid, cfg)
    cfg = dict(cfg, busy_cus=min(cfg["cus_per_chip"], real_grid))  # the real launch's CUs share HBM and L2
    xcds, gx = cfg["xcds"], L["grid"][0]
    per = min(per, max(1, (gx - 1) // (xcds * ncu) + 1))
    cus = [[((c * per + j) * xcds, 0, 0) for j in range(per)] for c in range(ncu)]
    if max(max(w[0] for w in c) for c in cus) >= gx:
        cus = [[(0, 0, 0)]]
    rep = simulate(L, cus, cfg)
    rep["slots"], rep["per_cu"] = slots, len(cus[0])
    return rep


def ours_shape(B: int, S: int, cfg: dict, f_hz: float) -> dict:
    """Modeled seconds of mla_decode_a16w8 at (B, S): the decode launch (+ the merge when the plan splits)."""
    from moonmath_common import use_arch
    from moonmath_mla_decode import kernel as K

    with use_arch("gfx942"):
        real = K.make_plan(B, mla.HEADS, Q_LEN, S, arch="gfx942")
    part = busy_part_rows("ws", "gfx942", S, real.nparts)
    if real.balanced:
        # the balanced split's locate is only in a launch of the real batch, which a one-request sample never is:
        # B requests of nparts busy parts each, the real plan, its workgroups 0, 8, ... (the pool is the real
        # launch's size too: (8, 8192) 39786 cycles a workgroup sampled from one request, 41726 so)
        seen, _ = _ours_capture(B, part * real.nparts, nparts=real.nparts, variant=real.variant)
    else:
        # one request cut into sample_parts parts of the real part length (workgroups 0, 8, 16, ...)
        n_sample = sample_parts(1, cfg)
        seen, _ = _ours_capture(1, part * n_sample, nparts=n_sample, variant=real.variant)
        per = per_cu(seen[0], real.grid, cfg)[1]
        if per > 1:
            n_sample = sample_parts(per, cfg)
            seen, _ = _ours_capture(1, part * n_sample, nparts=n_sample, variant=real.variant)
    dec = _ours_round(seen[0], real.grid, cfg)
    ccfg = clock.at_clock(cfg, f_hz)
    parts = {"decode": timing.kernel_time(real.grid, dec["wg_cycles"], dec["per_cu"], ccfg)}
    out = {"plan": {"nparts": real.nparts, "variant": real.variant, "grid": real.grid, "merge_grid": real.merge_grid,
                    "part_rows": part}, "decode_where": dec["where"], "decode_pipe_util": dec["pipe_util"]}
    if real.nparts > 1:
        # the merge sampled at the real batch (parts of 4 tiles): its grid, workgroups per CU and the balanced
        # split's locate are the real launch's (a one-request sample put one workgroup per CU where the real
        # grid puts two, and skipped the balanced locate)
        mseen, _ = _ours_capture(B, real.nparts * GRAN * 4, nparts=real.nparts, variant=real.variant, run=True)
        mer = _ours_round(mseen[1], real.merge_grid, cfg)
        parts["merge"] = timing.kernel_time(real.merge_grid, mer["wg_cycles"], mer["per_cu"], ccfg)
    out["seconds"] = sum(p["seconds"] for p in parts.values())
    out["launches_s"] = {k: v["seconds"] for k, v in parts.items()}
    return out


# ---------------------------------------------------------------- report

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/timing")
    ap.add_argument("--shapes", default="all", help="'all' or comma-separated row indices of the seed's MLA table")
    ap.add_argument("--no-ours", action="store_true", help="model AITER only")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    cfg, f_hz, f_src = clock.effective_config("gfx942", out)  # ours and AITER's simulated at the effective clock
    print(f"effective clock {f_hz / 1e6:.1f} MHz from {f_src}")
    sem = check_split_semantics()
    print(f"split work list check: {sem}")
    fits = AiterFits(cfg)
    fit = fits.full
    chk = fit["check"]
    print(f"AITER a16w8 fit: a {fit['a']:.0f} + b {fit['b']:.2f}/row + c {fit['c']:.0f}/extra item; check at "
          f"{chk['rows']} rows: simulated {chk['simulated']:.0f}, extrapolated {chk['extrapolated']:.0f}")
    rows = SEED_MLA if args.shapes == "all" else [SEED_MLA[int(i)] for i in args.shapes.split(",")]
    table = []
    for (B, S), pub_us, orig_us in rows:
        a = aiter_shape(B, S, fits, cfg, f_hz)
        r = {"shape": (B, S), "pub_aiter_us": pub_us, "orig_moonmath_us": orig_us, "aiter_model_us": a["seconds"] * 1e6,
             "aiter": a, "err": (a["seconds"] * 1e6 - pub_us) / pub_us}
        if not args.no_ours:
            o = ours_shape(B, S, cfg, f_hz)
            r.update(ours_model_us=o["seconds"] * 1e6, ours=o, speedup=a["seconds"] / o["seconds"])
        table.append(r)
        msg = f"{(B, S)}: AITER published {pub_us} us, modeled {r['aiter_model_us']:.1f} us ({r['err']:+.1%})"
        if "speedup" in r:
            msg += f"; ours modeled {r['ours_model_us']:.1f} us, modeled speedup {r['speedup']:.3f}"
        print(msg, flush=True)
    errs = [abs(r["err"]) for r in table]
    worst = max(table, key=lambda r: abs(r["err"]))
    pub, mod = [r["pub_aiter_us"] for r in table], [r["aiter_model_us"] for r in table]
    pairs = [(i, j) for i in range(len(pub)) for j in range(i + 1, len(pub)) if pub[i] != pub[j]]
    right = sum((mod[i] - mod[j]) * (pub[i] - pub[j]) > 0 for i, j in pairs)
    summary = {"rows": len(table), "median_abs_err": statistics.median(errs), "worst": worst["shape"],
               "worst_err": worst["err"], "order_pairs_right": right, "order_pairs": len(pairs)}
    md = ["# MLA decode a16w8 under the timing model (MODELED, not measured on hardware)", "",
          f"`python -m benchmarks.timing.mla`. Effective clock {f_hz / 1e6:.0f} MHz ({f_src}); constants frozen. "
          "AITER: `mla_a16w8_qh16_m16x4_n16x1_coex0_mask1_ps.co` on AITER's own fast-mode work list "
          "(get_mla_metadata_v1 restated), the fastest modeled max_split_per_batch of -1 and 1..64; mla_reduce_v1 "
          "charged from its launch shape (busiest CU's bytes at the vector-memory rate, at least the HBM time). "
          "H = 16, q_len 4.", "",
          f"Split work list check (real kernel, host merge vs float64 reference): {sem['items']} items over "
          f"{sem['groups']} workgroups ({sem['empty_parts']} empty), {sem['split_requests']} split requests, "
          f"rel. error {sem['rel_err']:.2e}.", "",
          f"AITER workgroup cycles = {fit['a']:.0f} + {fit['b']:.2f} x rows + {fit['c']:.0f} x (items - 1) "
          f"(fit at {FIT_ROWS[0]} and {FIT_ROWS[1]} rows; at {chk['rows']}: simulated {chk['simulated']:.0f}, "
          f"extrapolated {chk['extrapolated']:.0f}).", "",
          "| (B, S) | KV MB | published AITER µs | modeled AITER µs (stage 1 + reduce) | error | max_split_per_batch "
          "(pieces per request) | default -1 µs | modeled TB/s |"
          + ("" if args.no_ours else
             " ours plan (nparts, variant) | ours modeled µs | modeled speedup (AITER / ours) |"),
          "|---|---|---|---|---|---|---|---|" + ("---|---|---|" if not args.no_ours else "")]
    for r in table:
        a = r["aiter"]
        line = (f"| {r['shape']} | {a['kv_bytes'] / 1e6:.0f} | {r['pub_aiter_us']} | {r['aiter_model_us']:.1f} "
                f"({a['stage1_s'] * 1e6:.1f} + {a['reduce_s'] * 1e6:.1f}) | {r['err']:+.1%} | "
                f"{a['max_split_per_batch']} ({a['max_pieces']}) | {a['default']['seconds'] * 1e6:.1f} | "
                f"{a['kv_bytes'] / a['seconds'] / 1e12:.2f} |")
        if "speedup" in r:
            p = r["ours"]["plan"]
            line += f" {p['nparts']}, {p['variant']} | {r['ours_model_us']:.1f} | {r['speedup']:.3f} |"
        md.append(line)
    md += ["", f"AITER rows: median |error| {summary['median_abs_err']:.1%}; worst {summary['worst']} "
           f"({summary['worst_err']:+.1%}); ordering {right}/{len(pairs)} pairs right.", ""]
    # AITER's object simulated and composed at AMD's measured sustained MFMA clock (run.py's no-fit check)
    from .run import MI300X_SUSTAINED_MHZ
    at = {}
    for f_mhz in MI300X_SUSTAINED_MHZ:
        c_s = clock.at_clock(timing.config("gfx942"), f_mhz * 1e6)
        fits_s = AiterFits(c_s, check=False)
        es = [aiter_shape(*r["shape"], fits_s, c_s, f_mhz * 1e6)["seconds"] * 1e6 / r["pub_aiter_us"] - 1
              for r in table]
        at[f_mhz] = {"errors": es, "median_abs_err": statistics.median(abs(e) for e in es)}
    summary["at_sustained_clock"] = at
    md += ["At AMD's measured sustained MFMA clock instead (no fitted constant): " + "; ".join(
        f"{f:.0f} MHz: median |error| {v['median_abs_err']:.1%} (rows "
        + ", ".join(f"{e:+.0%}" for e in v["errors"]) + ")" for f, v in at.items()), ""]
    if not args.no_ours:
        gm = math.exp(sum(math.log(r["speedup"]) for r in table) / len(table))
        summary["geomean_speedup"] = gm
        md += [f"Geomean modeled speedup of ours over AITER a16w8: {gm:.3f} (> 1: ours modeled faster).", ""]
    md += ["Where AITER's cycles went (one CU, chunk of "
           f"{FIT_ROWS[1]} rows): " + ", ".join(f"{k} {v:.1%}" for k, v in fit["where"].items()) + "; pipes busy: "
           + ", ".join(f"{k} {v:.0%}" for k, v in fit["pipe_util"].items() if v >= 0.005), "",
           f"CPU time of this run: {time.time() - t0:.0f} s.", ""]
    (out / "mla.md").write_text("\n".join(md))
    (out / "mla.json").write_text(json.dumps({"f_eff_hz": f_hz, "split_check": sem, "fit": fit, "table": table,
                                              "summary": summary}, indent=1, default=str))
    figure(out, table)
    print((out / "mla.md").read_text())


def figure(out: Path, table: list[dict]) -> None:
    """timing_all.png: modeled vs published, one point a row, every set of run.py (timing.json) plus MLA."""
    p = out / "timing.json"
    series = plots.fmha_series(json.loads(p.read_text())["tables"]) if p.exists() else []
    series.append(("MI300X MLA a16w8 (predicted)", [r["pub_aiter_us"] / 1e3 for r in table],
                   [r["aiter_model_us"] / 1e3 for r in table], "P", "tab:purple", 40))
    plots.modeled_vs_published(out / "timing_all.png", series,
                               "moonmath-emu timing model vs AITER's published times\n"
                               "(one clock calibrated on MI300X RTNE only; dotted: ±15%)", 0.03, 400)


if __name__ == "__main__":
    main()
