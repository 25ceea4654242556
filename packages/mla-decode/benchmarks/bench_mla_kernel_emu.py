"""Emulator measurements of the gfx942 MLA decode kernel (no timing claims).

For each shape: run mla_decode_a16w8 (planner's split) on the emu backend and report
  * dynamic instruction counts per 16-token KV tile and per wave-tile (one wave, one 16-row tile,
    one 16-token tile): MFMA, VALU, transcendental, SALU, DS, VMEM, SMEM, waitcnt, barrier;
  * bytes the kernel requests per token (from its VMEM mix) against the 576-byte fp8 row, and the
    share of requested KV bytes that are unique (each KV byte fetched once per request: 576 / requested);
  * the merge kernel's counts, the planner's split and modelled time;
  * registers / LDS / scratch / occupancy from the code object.
A shape too large for the emulator can be run by model: `--model` scales the counts of a smaller
run with the same per-tile code path (q_len, H) to the requested length.

    python benchmarks/bench_mla_kernel_emu.py                     # the issue's two shapes (both run whole)
    python benchmarks/bench_mla_kernel_emu.py --shape 8:8192:16:4 --variant wave   # the other variant
    python benchmarks/bench_mla_kernel_emu.py --shape 8:8192:16:4 --shape 2:150000:16:1
    python benchmarks/bench_mla_kernel_emu.py --model 2:150000:16:1=2:16384   # scale a smaller run
"""
from __future__ import annotations

import argparse
import os
import time

import torch

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx942")

from moonmath_common import use_backend  # noqa: E402
from moonmath_mla_decode import kernel as mk  # noqa: E402

KEYS = ["mfma", "valu", "trans", "salu", "ds", "vmem", "smem", "waitcnt", "barrier", "wave_instructions"]


def make(B, S, H, q_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    slots = B * S + 3
    pool = (torch.randn(slots, 1, 576, generator=g) * 8).clamp(-240, 240).to(torch.float8_e4m3fnuz)
    idx = torch.randperm(slots, generator=g)[: B * S].to(torch.int32)
    ip = (torch.arange(B + 1, dtype=torch.int32) * S)
    lens = torch.full((B,), S, dtype=torch.int32)
    q_lat = torch.randn(B * q_len, H, 512, generator=g).to(torch.bfloat16)
    q_pe = torch.randn(B * q_len, H, 64, generator=g).to(torch.bfloat16)
    return q_lat, q_pe, pool, lens, idx, ip


def measure(B, S, H, q_len, variant=None):
    q_lat, q_pe, pool, lens, idx, ip = make(B, S, H, q_len)
    o = torch.empty_like(q_lat)
    lse = torch.empty(B * q_len, H)
    p = mk.plan(B, H, q_len, S)
    t0 = time.time()
    with use_backend("emu"):
        counters = mk.run(q_lat, q_pe, pool, o, lens, idx, ip, 576 ** -0.5, 1 / 32, lse=lse, variant=variant)
    wall = time.time() - t0
    kv_tiles = B * -(-S // 16)  # 16-token KV tiles of all requests
    wave_tiles = kv_tiles * p.n_rt
    return p, counters, kv_tiles, wave_tiles, wall, variant or p.variant


def report(shape, p, counters, kv_tiles, wave_tiles, wall, variant, scale=1.0):
    B, S, H, q_len = shape
    fwd = counters[0]
    print(f"\n== B={B} S={S} H={H} q_len={q_len}: {variant} variant, n_rt={p.n_rt} nparts={p.nparts} waves={p.waves} "
          f"grid={p.grid} modelled {p.cost_ns / 1000:.1f} us" + (f"   (emulated in {wall:.1f} s)" if wall else ""))
    print(f"{'per':>22} " + " ".join(f"{k:>8}" for k in KEYS[:-1]))
    for label, div in (("16-token KV tile", kv_tiles), ("wave-tile (16x16 rows)", wave_tiles)):
        print(f"{label:>22} " + " ".join(f"{fwd[k] * scale / div:8.1f}" for k in KEYS[:-1]))
    if len(counters) > 1:
        m = counters[1]
        print(f"{'merge (whole launch)':>22} " + " ".join(f"{m[k]:8d}" for k in KEYS[:-1]))
    # Requested bytes from the VMEM mix of the tile loop. wave: per wave-tile nine 16-byte K loads, eight
    # 16-byte V loads and one 4-byte index per lane. shared: per workgroup and tile 576 16-byte K chunks,
    # 128 x 4 16-byte V loads and one 4-byte index per lane of 4 waves.
    if variant == "shared":
        kv_req = (576 * 16 + 128 * 4 * 16) * -(-p.n_rt // 4) / 16
        req_per_token = kv_req + 4 * 64 * 4 * -(-p.n_rt // 4) / 16
        loop_vmem = "per workgroup-tile 2.25 K + 2 V + 1 index per thread"
    else:
        kv_req = 64 * (9 * 16 + 8 * 16) * p.n_rt / 16
        req_per_token = kv_req + 64 * 4 * p.n_rt / 16
        loop_vmem = "tile loop issues 18 per wave-tile"
    print(f"bytes requested per token: {req_per_token:.0f} (576 minimum: x{req_per_token / 576:.2f}); "
          f"unique share of requested KV bytes: {576 / kv_req:.1%}; "
          f"vmem per wave-tile {fwd['vmem'] * scale / wave_tiles:.2f} ({loop_vmem})")
    ws = (p.ws_o_floats + p.ws_ml_floats) * 4
    print(f"HBM model per token: 576 KV + 4 index + {2 * ws / (B * S):.1f} partial (written + read) bytes")


def code_object_report():
    for co, k in ((mk.FWD_CODE_OBJECT, mk.FWD_KERNEL), (mk.SHARED_CODE_OBJECT, mk.SHARED_KERNEL),
                  (mk.MERGE_CODE_OBJECT, mk.MERGE_KERNEL)):
        m = mk.KERNELS.kernel_meta("bench", mk.ARCH, co, k)
        waves_per_simd = max(1, min(8, 512 // max(8, -(-m.vgpr // 8) * 8)))
        if m.lds:
            waves_per_simd = min(waves_per_simd, (65536 // m.lds) * 4 // 4)
        print(f"{k}: VGPR+AGPR {m.vgpr} (AGPR {m.agpr}), SGPR {m.sgpr}, LDS {m.lds} B, scratch {m.scratch} B, "
              f"occupancy {waves_per_simd} wave(s)/SIMD")


def parse(s):
    return tuple(int(x) for x in s.split(":"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", help="B:S:H:q_len")
    ap.add_argument("--model", action="append", help="B:S:H:q_len=Bsmall:Ssmall (scale a smaller run)")
    ap.add_argument("--variant", choices=["wave", "shared"], help="override the planner's kernel variant")
    a = ap.parse_args()
    if not a.shape and not a.model:
        a.shape = ["8:8192:16:4", "2:150000:16:1"]
    code_object_report()
    for s in a.shape or []:
        shape = parse(s)
        report(shape, *measure(*shape, variant=a.variant))
    for s in a.model or []:
        big, small = s.split("=")
        B, S, H, q = parse(big)
        b2, s2 = parse(small)
        p_s, c_s, kv_s, wt_s, wall, var = measure(b2, s2, H, q, variant=a.variant)
        p_b = mk.plan(B, H, q, S)
        kv_b = B * -(-S // 16)
        print(f"\n(by model: counts of B={b2} S={s2} scaled per tile to B={B} S={S}; nparts {p_b.nparts} "
              f"instead of {p_s.nparts})")
        report((B, S, H, q), p_b, c_s, kv_b, kv_b * p_b.n_rt, 0.0, var, scale=kv_b / kv_s)


if __name__ == "__main__":
    main()
