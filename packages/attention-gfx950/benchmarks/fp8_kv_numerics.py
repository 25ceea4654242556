"""fp8 K/V numerics (issue 17): the error of the two ways to use e4m3fn K/V with bf16 Q, on the same inputs.

1. dequantise in the load stage (what the kernels do): K/V widened exactly to bf16 in LDS, the bf16 MFMAs as
   without fp8, the descales folded into the logit factor and the output. Run on the emulator (gfx950 kernel).
2. the fp8 MFMAs (v_mfma_f32_16x16x128_f8f6f4 takes fp8 on both sides, not bf16): Q quantised to e4m3fn per row
   (scale amax / 448) for QK, and P quantised to e4m3fn for PV (P in [0, 1] after the max: scale 1 / 448 up).
   Emulated in float64 around the two quantisations (the MFMA products of fp8 values are exact, its fp32 sums
   round at ~2^-24, far below what the quantisations add), so the figure is a lower bound of that path's error.

Errors against float64 attention of the dequantised K/V: max|d| / max|ref| and rel. Frobenius.

    python packages/attention-gfx950/benchmarks/fp8_kv_numerics.py
"""
from __future__ import annotations

import math
import os

import torch

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx950")

import moonmath_attention_gfx950 as att  # noqa: E402
from moonmath_common import use_backend  # noqa: E402

F8 = torch.float8_e4m3fn


def q8(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """x quantised to e4m3fn with a per-row scale amax / 448, returned dequantised (float64)."""
    s = (x.abs().amax(dim, keepdim=True) / 448.0).clamp_min(1e-30)
    return (x / s).to(torch.float32).to(F8).double() * s


def attention64(q, k, v, causal, scale, quant_q=False, quant_p=False):
    """float64 attention [H, S, D] (GQA by repeat), optionally with Q and P quantised to e4m3fn."""
    g = q.shape[0] // k.shape[0]
    k, v = k.repeat_interleave(g, 0), v.repeat_interleave(g, 0)
    qq = q8(q) if quant_q else q
    s = torch.einsum("hid,hjd->hij", qq, k) * scale
    if causal:
        i = torch.arange(q.shape[1])[:, None] + (k.shape[1] - q.shape[1])
        s = s.masked_fill(torch.arange(k.shape[1])[None, :] > i, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    den = p.sum(-1, keepdim=True)
    if quant_p:
        p = (p * 448.0).to(torch.float32).to(F8).double() / 448.0
    return (p @ v) / den


def errors(o, ref):
    d = o.double() - ref
    return float(d.abs().max() / ref.abs().max()), float(d.norm() / ref.norm())


def main():
    print("| shape | path | max rel. | rel. Frobenius |")
    print("|---|---|---|---|")
    for (H, Hk, S, D, causal) in ((4, 2, 512, 128, False), (4, 2, 512, 128, True), (8, 2, 384, 64, True)):
        g = torch.Generator().manual_seed(S + D)
        q = torch.randn(1, H, S, D, generator=g).to(torch.bfloat16)
        k = (torch.randn(1, Hk, S, D, generator=g) * 100).clamp(-448, 448).to(F8)
        v = (torch.randn(1, Hk, S, D, generator=g) * 100).clamp(-448, 448).to(F8)
        kd, vd = torch.full((Hk,), 0.01), torch.full((Hk,), 0.01)
        kq, vq = k[0].double() * 0.01, v[0].double() * 0.01
        scale = 1 / math.sqrt(D)
        ref = attention64(q[0].double(), kq, vq, causal, scale)
        with use_backend("emu"):
            o = att.forward(q, k, v, causal=causal, k_descale=kd, v_descale=vd)[0]
        name = f"H{H}/{Hk} S{S} D{D}{' causal' if causal else ''}"
        rows = [("dequant to bf16 (kernel, emulator)", o),
                ("fp8 MFMA, Q in e4m3fn (emulated)", attention64(q[0].double(), kq, vq, causal, scale, quant_q=True)),
                ("fp8 MFMA, Q and P in e4m3fn (emulated)",
                 attention64(q[0].double(), kq, vq, causal, scale, quant_q=True, quant_p=True))]
        for path, out in rows:
            mx, fro = errors(out, ref)
            print(f"| {name} | {path} | {mx:.3e} | {fro:.3e} |")


if __name__ == "__main__":
    main()
