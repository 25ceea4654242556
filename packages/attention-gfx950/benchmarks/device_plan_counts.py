"""Emulator counts of one launch of the device planning kernel (attn_fwd_plan_varlen) for serving-shaped length
sets, with the plan it wrote (items, merge items) beside the capacities of its buffer. Causal, 8 q heads, the
default split policy (256 CUs).

    MOONMATH_EMU_ARCH=gfx950 python packages/attention-gfx950/benchmarks/device_plan_counts.py
"""
from __future__ import annotations

import torch

from moonmath_attention_gfx950 import as_emu_device, kernel, serving
from moonmath_common import use_backend

CASES = {
    "decode B=64 x 4096 keys": ([1] * 64, [4096] * 64),
    "decode B=4 x 8192 keys": ([1] * 4, [8192] * 4),
    "prefill 8 x 2048": ([2048] * 8, [2048] * 8),
    "prefill 1 x 32768": ([32768], [32768]),
    "256 mixed sequences": ([i % 300 for i in range(256)], [(i * 37) % 9000 for i in range(256)]),
}


def main() -> None:
    heads = 8
    print(f"{'lengths':26s} {'cap tiles/items/merges':>23s} {'items':>6s} {'merges':>7s} {'wave instr':>11s} "
          f"{'VALU':>6s} {'SALU':>6s} {'DS':>5s} {'barriers':>9s}")
    with use_backend("emu"):
        for name, (lq, lk) in CASES.items():
            cq = torch.tensor([0] + torch.tensor(lq).cumsum(0).tolist(), dtype=torch.int32)
            ck = torch.tensor([0] + torch.tensor(lk).cumsum(0).tolist(), dtype=torch.int32)
            layout = serving.device_plan_layout(len(lq), max(lq), sum(lq), max(lk), heads)
            buf = torch.zeros(layout["bytes"], dtype=torch.uint8)
            serving.plan_on_device(buf, layout, as_emu_device(cq), as_emu_device(ck), sum(lq), sum(lk), max(lq),
                                   max(lk), True)
            c = kernel.KERNELS.last_counters
            plan = serving.read_device_plan(buf, layout)
            caps = f"{layout['tiles']}/{layout['items']}/{layout['merges']}"
            print(f"{name:26s} {caps:>23s} {len(plan['items']):6d} {len(plan['merges']):7d} "
                  f"{c['wave_instructions']:11d} {c['valu']:6d} {c['salu']:6d} {c['ds']:5d} {c['barrier']:9d}")


if __name__ == "__main__":
    main()
