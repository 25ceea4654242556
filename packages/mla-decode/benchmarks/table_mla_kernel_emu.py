"""The MLA decode tables of docs/kernels/mla_decode_gfx942.md / mla_decode_gfx950.md, measured on the emulator.

For B = 2, H = 16, q_len in {1, 2, 4} and S in {1024, 8192, 32768}, beside AITER's
`mla_a16w8_qh16_m16x4_n16x1_coex0_mask1_ps.co` of the same arch (--arch gfx942 / gfx950) run through
the peer harness (benchmarks/peers) on the same inputs: our planner's split (variant, parts), its decode
launch alone, and our unsplit kernel; AITER's object on one work item per request and (gfx942) on its own
split: the work list of its fast-mode metadata rule at 304 CUs (benchmarks/timing/mla.py,
`aiter_metadata_v1_2`), every workgroup run, the partials merged on the host in float64 and rounded to bf16
(as `mla_reduce_v1` writes) for the error; its stage 1 only is counted, since `mla_reduce_v1` is built
from source at run time and has no code object to run. Per 16-token KV tile of one query position:
wave-instructions of the decode launch plus its merge; bytes the VMEM loads request per KV token
(emulator byte counters, Q and indices included); rel. Frobenius error of o against a float64 reference;
perfmodel's issue-rate time. Writes a markdown table to stdout and, with --chart PATH, a PNG chart. No
timing claims. Nothing of AITER is stored: the harness fetches the pinned wheel into its cache.

    python benchmarks/table_mla_kernel_emu.py --chart docs/kernels/mla_decode_gfx942_emu.png
    python benchmarks/table_mla_kernel_emu.py --arch gfx950 --chart docs/kernels/mla_decode_gfx950_emu.png
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx942")

from moonmath_common import perfmodel, target_arch, use_backend  # noqa: E402
from moonmath_common.numerics import e4m3fn_to_f32, e4m3fnuz_to_f32  # noqa: E402
from moonmath_mla_decode import kernel as mk  # noqa: E402
from moonmath_mla_decode.decode import POOL_DTYPES  # noqa: E402

SCALE, KV_SCALE = 576 ** -0.5, 1 / 32
REPO = Path(__file__).resolve().parents[3]


def aiter_runner():
    """The peer harness's AITER a16w8 runner, or (None, reason)."""
    sys.path.insert(0, str(REPO))
    try:
        from benchmarks.peers.mla import run_aiter_mla_a16w8
        return run_aiter_mla_a16w8, ""
    except Exception as e:  # no harness in this checkout, or no wheel
        return None, f"{type(e).__name__}: {e}"


def run_aiter_split(B, S, H, q_len):
    """AITER's object on its own fast-mode split over the chip's CUs (the timing model's config: 304 on gfx942):
    (wave-instructions per tile of stage 1, rel. error of the host-merged output, load bytes per token, pieces
    per request)."""
    from benchmarks.peers import harness
    from benchmarks.peers import mla as peer
    from benchmarks.timing.mla import _metadata, aiter_metadata_v1_2, host_merge, pieces_per_request
    from moonmath_emu import timing

    args = make(B, S, H, q_len)
    lens = [int(x) for x in args[3]]
    wgs = aiter_metadata_v1_2(lens, timing.config(target_arch())["cus_per_chip"])
    meta, n_partial = _metadata(wgs, lens, q_len)
    values = peer.a16w8_values(*args, SCALE, KV_SCALE, arch=target_arch(), work=meta, n_partial=n_partial)
    c = harness.launch(target_arch(), peer.A16W8_PS, peer.MLA_ARGS, values, grid=(len(wgs), 1, 1), block=256)
    out, _ = host_merge(values, wgs, q_len)
    out = out.bfloat16().double()  # mla_reduce_v1 writes bf16, as the unsplit kernel does
    ref = reference64(*args, q_len)
    err = ((out - ref).norm() / ref.norm()).item()
    tiles = B * -(-S // 16) * q_len
    return (c["wave_instructions"] / tiles, err, c.get("vmem_load_bytes", float("nan")) / (B * S),
            max(pieces_per_request(wgs).values()))


def make(B, S, H, q_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    slots = B * S + 3
    pool = (torch.randn(slots, 1, 576, generator=g) * 8).clamp(-240, 240).to(POOL_DTYPES[target_arch()])
    idx = torch.randperm(slots, generator=g)[: B * S].to(torch.int32)
    ip = torch.arange(B + 1, dtype=torch.int32) * S
    lens = torch.full((B,), S, dtype=torch.int32)
    q_lat = torch.randn(B * q_len, H, 512, generator=g).to(torch.bfloat16)
    q_pe = torch.randn(B * q_len, H, 64, generator=g).to(torch.bfloat16)
    return q_lat, q_pe, pool, lens, idx, ip


def reference64(q_lat, q_pe, pool, lens, idx, ip, q_len):
    """o in float64 from the exactly decoded fp8 rows (end-aligned causal windows)."""
    B = lens.numel()
    T, H, _ = q_lat.shape
    out = torch.empty(T, H, 512, dtype=torch.float64)
    for b in range(B):
        S = int(lens[b])
        decode = e4m3fn_to_f32 if pool.dtype == torch.float8_e4m3fn else e4m3fnuz_to_f32
        c = decode(pool.view(pool.shape[0], 576)[idx[int(ip[b]):int(ip[b]) + S].long()]).double()
        q = torch.cat([q_lat[b * q_len:(b + 1) * q_len], q_pe[b * q_len:(b + 1) * q_len]], -1).double()
        s = torch.einsum("thd,nd->thn", q, c) * SCALE * KV_SCALE
        end = torch.arange(q_len) + S - q_len + 1
        s = s.masked_fill(torch.arange(S)[None, None, :] >= end[:, None, None], float("-inf"))
        out[b * q_len:(b + 1) * q_len] = torch.softmax(s, -1) @ c[:, :512] * KV_SCALE
    return out


def run(B, S, H, q_len, nparts=None, variant=None):
    args = make(B, S, H, q_len)
    q_lat, q_pe, pool, lens, idx, ip = args
    o = torch.empty_like(q_lat)
    lse = torch.empty(B * q_len, H)
    with use_backend("emu"):
        counters = mk.run(q_lat, q_pe, pool, o, lens, idx, ip, SCALE, KV_SCALE, lse=lse, nparts=nparts,
                          variant=variant)
    ref = reference64(*args, q_len)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    tiles = B * -(-S // 16) * q_len  # 16-token KV tiles x query positions
    instr = sum(c["wave_instructions"] for c in counters) / tiles
    hbm = B * S * (576 + 4)
    arch = target_arch()
    t = sum(perfmodel.model(c, arch, hbm_bytes=hbm if k == 0 else 0)["modeled_s"] for k, c in enumerate(counters))
    bpt = counters[0].get("vmem_load_bytes", float("nan")) / (B * S)
    decode_instr = counters[0]["wave_instructions"] / tiles  # the decode launch without its merge
    return instr, err, t, bpt, decode_instr


def run_aiter(runner, B, S, H, q_len):
    args = make(B, S, H, q_len)
    out, c = runner(*args, SCALE, KV_SCALE, arch=target_arch())
    ref = reference64(*args, q_len)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    return c["wave_instructions"] / (B * -(-S // 16) * q_len), err, c.get("vmem_load_bytes", float("nan")) / (B * S)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chart", help="write a PNG chart here")
    ap.add_argument("--lengths", default="1024,8192,32768")
    ap.add_argument("--arch", default=os.environ["MOONMATH_EMU_ARCH"], choices=mk.ARCHS)
    a = ap.parse_args()
    os.environ["MOONMATH_EMU_ARCH"] = a.arch
    B, H = 2, 16
    runner, why = aiter_runner()
    if runner is None:
        print(f"(AITER columns empty: {why})")
    own_split = runner is not None and a.arch == "gfx942"  # the metadata rule is checked on gfx942 only
    rows = []
    print("| q_len | S | ours: planner (variant, parts) | ours, planner's split (decode + merge) | "
          "ours, decode alone | ours, unsplit | AITER a16w8_ps, one item | AITER, own split stage 1 (pieces) | "
          "bytes / token ours, split | ours, unsplit | AITER, one item | AITER, own split | "
          "rel. error vs fp64 ours | AITER, one item | AITER, own split | perfmodel time ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    nan3 = (float("nan"),) * 3
    for S in (int(x) for x in a.lengths.split(",")):
        for q_len in (1, 2, 4):
            p = mk.plan(B, H, q_len, S)
            instr, err, t, bpt, dec = run(B, S, H, q_len)
            instr1, _, _, bpt1, _ = run(B, S, H, q_len, nparts=1, variant=p.variant)
            ai, aerr, abpt = run_aiter(runner, B, S, H, q_len) if runner else nan3
            si, serr, sbpt, pieces = run_aiter_split(B, S, H, q_len) if own_split else nan3 + (0,)
            rows.append((q_len, S, p.variant, p.nparts, instr, instr1, ai, dec, si))
            print(f"| {q_len} | {S} | {p.variant}, {p.nparts} | {instr:.0f} | {dec:.0f} | {instr1:.0f} | {ai:.0f} | "
                  f"{si:.0f} ({pieces}) | {bpt:.0f} | {bpt1:.0f} | {abpt:.0f} | {sbpt:.0f} | {err:.2e} | {aerr:.2e} | "
                  f"{serr:.2e} | {t * 1e6:.1f} us |", flush=True)
    if a.chart:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4))
        labels = [f"q{r[0]}\nS{r[1]}" for r in rows]
        xs = range(len(rows))
        bars = [(4, "ours, planner's split (decode + merge)"), (7, "ours, decode alone"), (5, "ours, unsplit"),
                (6, "AITER a16w8_ps, one item per request")]
        if own_split:
            bars.append((8, "AITER, its own split (stage 1 only)"))
        w = 0.8 / len(bars)
        for k, (col, label) in enumerate(bars):
            ax.bar([x + (k - (len(bars) - 1) / 2) * w for x in xs], [r[col] for r in rows], w, label=label)
        ax.set_xticks(list(xs), labels, fontsize=7)
        ax.set_ylabel("wave-instructions per 16-token tile-position")
        ax.set_title(f"{a.arch} MLA decode on moonmath-emu, B=2 H=16")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(a.chart, dpi=110)


if __name__ == "__main__":
    main()
