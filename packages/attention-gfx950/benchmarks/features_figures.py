"""Issue 17 figures on the emulator: static instruction counts of the plain and feature kernels, the error of
the soft-capped kernels against float64 on the test shapes, and the executed instructions of a sliding window
on a long Skv (one 256-row causal tile, 4096 keys, unsplit). Run: MOONMATH_EMU_ARCH=gfx950 python
packages/attention-gfx950/benchmarks/features_figures.py (from a checkout, with the package and moonmath-emu
installed)."""
from __future__ import annotations

import collections
import math
import pathlib
import sys

import torch

import moonmath_attention_gfx950 as att
import moonmath_emu as emu
from moonmath_attention_gfx950 import kernel
from moonmath_common import use_backend

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from test_attention_gfx950_features import ref64, rnd  # noqa: E402  (the tests' float64 formulation)


def static_counts() -> None:
    for co in (kernel.FWD_CODE_OBJECT, "attention_fwd_paged"):
        d = emu.disassemble(kernel.KERNELS.path("isa", kernel.ARCH, co).read_bytes())
        total = collections.Counter(x[0] for x in d)
        rcp = collections.Counter(x[0] for x in d if x[2].startswith("v_rcp_f32"))
        for name in sorted(total):
            print(f"{co:20s} {name:34s} {total[name]:5d} instructions, {rcp[name]:3d} v_rcp_f32")


def softcap_errors() -> None:
    shapes = [(1, 4, 1, 129, 600, 128, False, 5.0), (1, 2, 2, 300, 127, 128, True, 20.0),
              (1, 2, 1, 130, 200, 192, True, 3.0), (1, 2, 1, 130, 200, 128, True, 30.0)]
    for B, Hq, Hkv, Sq, Skv, D, causal, cap in shapes:
        q, k = rnd(B, Hq, Sq, D, seed=4, scale=3), rnd(B, Hkv, Skv, D, seed=5, scale=3)
        v = rnd(B, Hkv, Skv, 128, seed=6)
        with use_backend("emu"):
            o, lse = att.forward(q, k, v, causal=causal, softcap=cap, return_lse=True)
        ro, rl = ref64(q[0], k[0], v[0], causal, 1 / math.sqrt(D), cap)
        ro0, _ = ref64(q[0], k[0], v[0], causal, 1 / math.sqrt(D), 0.0)
        fin = ~torch.isneginf(rl)
        print(f"softcap {cap:4.1f} Hq/Hkv {Hq}/{Hkv} Sq {Sq} Skv {Skv} D {D} causal {causal}: rel err "
              f"{float((o[0].double() - ro).abs().max() / ro.abs().max()):.2e}, lse err "
              f"{float((lse[0].double() - rl)[fin].abs().max()):.1e}; uncapped differs by "
              f"{float((ro0 - ro).abs().max() / ro.abs().max()):.2f}")


def sinks_errors() -> None:
    sinks = torch.tensor([0.5, -1.0, 3.0, -float("inf")])
    for Sq, Skv, D, causal, cus in [(300, 127, 128, True, 1), (129, 600, 128, False, 256), (130, 200, 192, True, 1)]:
        q, k, v = rnd(1, 4, Sq, D, seed=43), rnd(1, 2, Skv, D, seed=44), rnd(1, 2, Skv, 128, seed=45)
        with use_backend("emu"), kernel.planner_options(num_cus=cus):
            o, lse = att.forward(q, k, v, causal=causal, sinks=sinks, return_lse=True)
        ro, rl = ref64(q[0], k[0], v[0], causal, 1 / math.sqrt(D), 0.0, (-1, -1), sinks)
        fin = ~torch.isneginf(rl)
        print(f"sinks Sq {Sq} Skv {Skv} D {D} causal {causal} {'split' if cus > 1 else 'unsplit'}: rel err "
              f"{float((o[0].double() - ro).abs().max() / ro.abs().max()):.2e}, lse err "
              f"{float((lse[0].double() - rl)[fin].abs().max()):.1e}")


# MFMAs of one 64-key block of d128 over the workgroup's 8 waves: QK 2 key tiles x 8 k-steps, PV 4 steps x 4
# output tiles, 4 row-sum MFMAs (the ping-pong pipeline, attention_fwd.hpp)
MFMA_PER_BLOCK_D128 = 8 * (2 * 8 + 4 * 4 + 4)


def window_work() -> None:
    q, k = rnd(1, 1, 256, 128, seed=26), rnd(1, 1, 4096, 128, seed=27)
    with use_backend("emu"), kernel.planner_options(num_cus=1):
        for left in (-1, 128, 512, 1024, 2048):
            att.forward(q, k, k, causal=True, window_size=(left, -1))
            c = kernel.KERNELS.last_counters
            print(f"Sq 256 Skv 4096 causal window_size=({left}, -1): {c['mfma'] // MFMA_PER_BLOCK_D128:2d} KV blocks, "
                  f"{c['wave_instructions']:7d} wave instructions, {c['mfma']:6d} MFMAs")


if __name__ == "__main__":
    static_counts()
    softcap_errors()
    sinks_errors()
    window_work()
