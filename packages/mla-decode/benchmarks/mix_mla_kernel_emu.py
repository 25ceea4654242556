"""Per-16-token-tile instruction mix of our MLA decode beside AITER's a16w8_ps kernel, on the emulator.

B = 2, H = 16, one part per request (unsplit: AITER's column is one work item per request), the inputs of
table_mla_kernel_emu.py. Every count is the decode launch's emulator counter divided by the 16-token KV
tiles x query positions it served (B * ceil(S / 16) * q_len). No timing claims.

    python benchmarks/mix_mla_kernel_emu.py --arch gfx950
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import table_mla_kernel_emu as table  # noqa: E402

from moonmath_common import target_arch, use_backend  # noqa: E402

KEYS = ("wave_instructions", "mfma", "valu", "trans", "vmem", "ds", "salu", "waitcnt", "branch")


def ours(B, S, H, q_len):
    args = table.make(B, S, H, q_len)
    q_lat, q_pe, pool, lens, idx, ip = args
    o = torch.empty_like(q_lat)
    variant = table.mk.plan(B, H, q_len, S).variant
    with use_backend("emu"):
        c = table.mk.run(q_lat, q_pe, pool, o, lens, idx, ip, table.SCALE, table.KV_SCALE, nparts=1, variant=variant)
    return variant, c[0]


def aiter(runner, B, S, H, q_len):
    _, c = runner(*table.make(B, S, H, q_len), table.SCALE, table.KV_SCALE, arch=target_arch())
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default=os.environ.get("MOONMATH_EMU_ARCH", "gfx942"), choices=table.mk.ARCHS)
    ap.add_argument("--lengths", default="1024,8192")
    a = ap.parse_args()
    os.environ["MOONMATH_EMU_ARCH"] = a.arch
    B, H = 2, 16
    runner, why = table.aiter_runner()
    if runner is None:
        print(f"(AITER rows empty: {why})")
    print("| q_len | S | kernel | " + " | ".join(KEYS) + " | bytes / token |")
    print("|---|---|---|" + "---|" * (len(KEYS) + 1))
    for S in (int(x) for x in a.lengths.split(",")):
        for q_len in (1, 2, 4):
            tiles = B * -(-S // 16) * q_len
            variant, c = ours(B, S, H, q_len)
            rows = [(f"ours ({variant})", c)]
            if runner is not None:
                rows.append(("AITER a16w8_ps", aiter(runner, B, S, H, q_len)))
            for name, c in rows:
                cells = " | ".join(f"{c.get(k, 0) / tiles:.0f}" for k in KEYS)
                print(f"| {q_len} | {S} | {name} | {cells} | {c.get('vmem_load_bytes', 0) / (B * S):.0f} |", flush=True)


if __name__ == "__main__":
    main()
