"""gfx942 MoE under the timing model: AITER's 1-stage int4 x fp8 and fp8 objects beside our a16w4 gate/up + down,
at the decode shapes of packages/mxfp4-moe/benchmarks/timing_moe.py (896 experts, top-16 uniform distinct,
dim 3584) with I = 512 (AITER's int4 weight layout needs I % 256 == 0; timing_moe.py's default is 384).

    python -m benchmarks.timing.moe_gfx942 [--tokens 8 16 32 128] [--inter 512]

Every number is MODELED (moonmath_emu.timing, docs/performance.md), never a hardware time. Per kernel: the
launch's workgroups spread over the 304 CUs in dispatch order, so the busiest CU runs ceil(W / 304) of them, each
of another m-block (another expert), its occupancy resident at a time; that CU is simulated on inputs of the real
routing (the first live m-blocks, experts renumbered so each has its own weights), simulated and its cycles taken
at the effective clock (benchmarks/timing/clock.py, as every timing script; before session 9 the peak clock); the
time is at least the hit experts' weight bytes over HBM bandwidth. Ours: timing_moe.py's own `run` for
each projection (the planners' variants), summed. AITER: grid (I / sub_GU, 32-row blocks), 256 threads.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("MOONMATH_EMU_HAZARDS", "0")

import moonmath_emu.timing as timing  # noqa: E402
from benchmarks.peers import harness, moe, moe_gfx942  # noqa: E402
from benchmarks.timing import clock  # noqa: E402

_BENCH = Path(__file__).resolve().parents[2] / "packages" / "mxfp4-moe" / "benchmarks"
sys.path.insert(0, str(_BENCH))
import timing_moe  # noqa: E402  (ours; it imports count_moe from its directory)
from count_moe import route  # noqa: E402

E, TOP_K, DIM = timing_moe.E, timing_moe.TOP_K, timing_moe.DIM


def _aiter_case(kind: str, T: int, inter: int, max_blocks: int):
    """The launch's values for the first `max_blocks` live 32-row blocks of the real routing (experts renumbered
    0..n-1), its grid x, the live block count, the hit experts and the object."""
    ids = route(T, E, TOP_K, seed=T)
    tw = torch.full((T, TOP_K), 1.0 / TOP_K)
    sid, sw, eid, num_valid = moe_gfx942._sorted(ids, tw, E)
    live = math.ceil(int(num_valid[0]) / moe.BLOCK_M)
    blocks = [b for b in range(live) if int(eid[b]) >= 0][:max_blocks]
    rows = torch.cat([sid[b * 32:(b + 1) * 32] for b in blocks])
    rw = torch.cat([sw[b * 32:(b + 1) * 32] for b in blocks])
    n = len(blocks)
    g = torch.Generator().manual_seed(T)
    x8 = (torch.randn(T, DIM, generator=g) * 20).to(moe_gfx942.FP8)
    xs = torch.full((T,), 0.01)
    s13, s2 = torch.full((n, 2 * inter), 0.01), torch.full((n, DIM), 0.01)
    if kind == "int4":
        sub_gu = moe_gfx942.heuristic_tile(inter, (512, 256, 128))
        gu = torch.randint(0, 256, (n, 2 * inter, DIM // 2), generator=g, dtype=torch.uint8)
        dn = torch.randint(0, 256, (n, DIM, inter // 2), generator=g, dtype=torch.uint8)
        x = x8.view(torch.uint8).unsqueeze(0).expand(TOP_K, T, DIM).reshape(TOP_K * T, DIM).contiguous()
        xs = xs.repeat(TOP_K)
        sms, bits, obj, fields = torch.ones(n, inter), 4, moe_gfx942.int4_object(sub_gu), moe_gfx942.INT4_ARGS
    else:
        sub_gu = moe_gfx942.heuristic_tile(inter, (128, 192, 256, 320, 384, 448, 512))
        gu = (torch.randn(n, 2 * inter, DIM, generator=g) * 20).to(moe_gfx942.FP8).view(torch.uint8)
        dn = (torch.randn(n, DIM, inter, generator=g) * 20).to(moe_gfx942.FP8).view(torch.uint8)
        x, sms, bits, obj, fields = x8.view(torch.uint8), None, 8, moe_gfx942.fp8_object(sub_gu), moe.FMOE_ARGS
    vals = moe_gfx942._values(out=torch.zeros(T, DIM, dtype=torch.bfloat16), x=x, gu=gu, dn=dn, xs=xs, gus=s13,
                              dns=s2, sms=sms, ids=rows, sw=rw, eid=torch.arange(n, dtype=torch.int32),
                              num_valid=torch.tensor([rows.numel(), T], dtype=torch.int32), T=T, E=n, dim=DIM,
                              inter=inter, top_k=TOP_K, bits=bits, sub_gu=sub_gu)
    if kind == "int4":
        del vals["total_tgs"], vals["ps_deno"]
    active = int(torch.unique(ids).numel())
    w_bytes = active * 3 * inter * DIM * (0.5 if bits == 4 else 1.0) + active * (2 * inter + DIM) * 4
    return dict(vals=vals, fields=fields, obj=obj, gx=inter // sub_gu, live=live, n=n, w_bytes=w_bytes)


def run_aiter(kind: str, T: int, inter: int, cfg: dict) -> dict:
    """AITER's `kind` object at T tokens, simulated and composed at cfg (the config at the effective clock)."""
    probe = _aiter_case(kind, T, inter, 1)
    total = probe["gx"] * probe["live"]
    per_cu = math.ceil(total / cfg["cus_per_chip"])
    c = _aiter_case(kind, T, inter, per_cu)
    mod, kernel = harness.load("gfx942", c["obj"])
    args = harness.pack_args(mod, kernel, c["fields"], c["vals"])
    info = mod.kernel_info(kernel)
    slots = timing.occupancy(info, 256, cfg)
    grid = (c["gx"], c["n"], 1)
    busy = timing.simulate(mod, kernel, grid, 256, args, cus=[[(i % c["gx"], i, 0) for i in range(per_cu)]],
                           slots=slots, config=cfg)
    t_cu = busy["cu_cycles"][0] / (cfg["clock_mhz"] * 1e6)
    t_hbm = c["w_bytes"] / cfg["hbm_bytes_per_s"]
    return dict(kernel=c["obj"].split("/")[-1], vgpr=info["vgpr"], slots=slots, total=total, per_cu=per_cu,
                cycles=busy["cu_cycles"][0], us=max(t_cu, t_hbm) * 1e6, bound="hbm" if t_hbm > t_cu else "cu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[8, 16, 32, 128])
    ap.add_argument("--inter", type=int, default=512)
    a = ap.parse_args()
    os.environ["MOONMATH_EMU_ARCH"] = "gfx942"
    timing_moe.INTER = a.inter
    cfg, f_hz, src = clock.effective_config("gfx942")
    print(f"MODELED (timing model), gfx942, E {E} top-{TOP_K} dim {DIM} I {a.inter}; effective clock "
          f"{f_hz / 1e6:.1f} MHz ({src})\n")
    print("| T | kernel | VGPR | WGs/CU | launch WGs (busiest CU) | busiest-CU cycles | modeled µs (bound) |")
    print("|---|---|---|---|---|---|---|")
    for T in a.tokens:
        tot = 0.0
        for proj in ("gateup", "down"):
            r = timing_moe.run(proj, T, "gfx942", 4 if T < 64 else 24, None, cfg=cfg)  # enough sampled blocks
            tot += r["us"]
            print(f"| {T} | ours {r['kernel']} | {r['vgpr']} | {r['slots']} | {r['total']} ({r['per_cu']}) | "
                  f"{r['one'] if r['per_cu'] == 1 else '-'} | {r['us']:.2f} ({r['bound']}) |", flush=True)
        print(f"| {T} | **ours, both launches** | | | | | **{tot:.2f}** |")
        for kind in ("int4", "fp8"):
            r = run_aiter(kind, T, a.inter, cfg)
            print(f"| {T} | AITER {r['kernel']} | {r['vgpr']} | {r['slots']} | {r['total']} ({r['per_cu']}) | "
                  f"{r['cycles']:.0f} | **{r['us']:.2f}** ({r['bound']}) |", flush=True)


if __name__ == "__main__":
    main()
