"""Emulator counts of the MLA decode KV-format kernels (a16w16, a8w8, mxfp4; a16w8's ws kernel beside them), gfx950.

For each format on the same inputs (B requests of S tokens, H 16, q_len 1; the a8w8 / a16w8 pools the fp8
quantisation of the bf16 one, mxfp4 its 32-block quantisation):
  * wave-instructions per 16-token KV tile (all launches of the op: for a8w8 the |q| maxima, the decode and
    the split merge) and per class (MFMA, VALU, SALU, DS, VMEM, waitcnt, barrier);
  * bytes the launches load per KV token (VMEM loads / (B * S)) beside the format's row bytes;
at the planner's split and with one KV part (nparts=1: the shape of AITER's single-split launch). No timing.
AITER's a8w8 kernel on the same kind of inputs: `python -m benchmarks.peers --family mla_gfx950`.

    python benchmarks/formats_mla_kernel_emu.py                   # B=2, S=1024
    python benchmarks/formats_mla_kernel_emu.py --shape 2:8192
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import torch

os.environ["MOONMATH_EMU_ARCH"] = "gfx950"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from _mla_formats import quantize_fp8, quantize_mxfp4  # noqa: E402

from moonmath_common import use_backend  # noqa: E402
from moonmath_mla_decode import formats  # noqa: E402
from moonmath_mla_decode import kernel as mk  # noqa: E402

KEYS = ["mfma", "valu", "salu", "ds", "vmem", "waitcnt", "barrier", "wave_instructions"]
ROW_BYTES = {"a16w8": 576, "a16w16": 1152, "a8w8": 576, "mxfp4": 288 + 18}
SCALE = 576 ** -0.5
LOG2E = 1.0 / math.log(2.0)


def inputs(B, S, H=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(B * S, 1, 576, generator=g).to(torch.bfloat16)
    fp8, kv_scale = quantize_fp8(kv)
    codes, scales = quantize_mxfp4(kv.float().view(-1, 576))
    return dict(q_lat=torch.randn(B, H, 512, generator=g).to(torch.bfloat16),
                q_pe=torch.randn(B, H, 64, generator=g).to(torch.bfloat16), bf16=kv, fp8=fp8, kv_scale=kv_scale,
                mxfp4=codes.view(-1, 1, 288), mxfp4_scales=scales, seq_lens=torch.full((B,), S, dtype=torch.int32),
                kv_indices=torch.randperm(B * S, generator=g).to(torch.int32),
                kv_indptr=torch.arange(B + 1, dtype=torch.int32) * S)


def run(fmt, x, nparts, kv_waves=None):
    o = torch.empty(x["q_lat"].shape, dtype=torch.bfloat16)
    tail = (x["seq_lens"], x["kv_indices"], x["kv_indptr"])
    with use_backend("emu"):
        if fmt == "a16w8":
            return mk.run(x["q_lat"], x["q_pe"], x["fp8"], o, *tail, SCALE, x["kv_scale"], nparts=nparts)  # ws
        pool, aux, c_qk, o_scale = {
            "a16w16": (x["bf16"], None, SCALE * LOG2E, 1.0),
            "a8w8": (x["fp8"], None, SCALE * x["kv_scale"] * LOG2E, x["kv_scale"]),
            "mxfp4": (x["mxfp4"], x["mxfp4_scales"], SCALE * LOG2E, 1.0)}[fmt]
        return formats.run(fmt, x["q_lat"], x["q_pe"], pool, aux, o, *tail, c_qk, o_scale, nparts=nparts,
                           kv_waves=kv_waves)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="2:1024", help="B:S (H 16, q_len 1)")
    a = ap.parse_args()
    B, S = (int(v) for v in a.shape.split(":"))
    x = inputs(B, S)
    tiles = B * -(-S // 16)
    print(f"gfx950, B={B} S={S} H=16 q_len=1: per 16-token tile (all launches), loads per token")
    head = " ".join(f"{k[:8]:>8s}" for k in KEYS)
    print(f"{'format':7s} {'split':>6s} {head} {'load B/tok':>10s} {'row B':>6s}")
    for fmt in ("a16w8", "a16w16", "a8w8", "mxfp4"):
        for nparts in (None, 1):
            cs = [c for c in run(fmt, x, nparts) if c]
            tot = {k: sum(c[k] for c in cs) for k in KEYS + ["vmem_load_bytes"]}
            split = "plan" if nparts is None else "1"
            print(f"{fmt:7s} {split:>6s} " + " ".join(f"{tot[k] / tiles:8.1f}" for k in KEYS)
                  + f" {tot['vmem_load_bytes'] / (B * S):10.1f} {ROW_BYTES[fmt]:6d}")


if __name__ == "__main__":
    main()
