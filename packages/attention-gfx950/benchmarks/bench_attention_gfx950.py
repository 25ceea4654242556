"""MI355X (gfx950) hardware benchmark of ma.forward against every AITER bf16 forward kernel, per shape.

The seed's table (shared/seeds/moonmath-amd-README.txt, "Results — attention forward, MI355X"): for each
shape, our forward and each AITER bf16 forward entry point that accepts it (flash-attention v3 asm
`aiter.flash_attn_func`, v4/OPUS through `aiter.mha_fwd` where the installed AITER has them), timed as
CUDA-graph replays, median of 7 interleaved passes, RTNE output on both sides; rel. error
max|out - ref| / max|ref| (last 1024 query rows) against fp32 SDPA beside each.

Needs a gfx950 GPU, a ROCm PyTorch and (for the AITER columns) an importable `aiter`. On any other
machine it prints why and exits 0: nothing here is ever run on the emulator (see
bench_attention_gfx950_emu.py for the instruction-level comparison that runs without a GPU).

    python packages/attention-gfx950/benchmarks/bench_attention_gfx950.py --markdown
    python packages/attention-gfx950/benchmarks/bench_attention_gfx950.py --shape 2:24:24:4096:4096:128:0
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys

import torch

# (B, Hq, Hkv, Sq, Skv, Dqk, causal): the seed's MI355X table
SHAPES = [
    (1, 24, 24, 4608, 4608, 128, 0), (2, 24, 24, 4096, 4096, 128, 0), (1, 32, 32, 16384, 16384, 128, 0),
    (4, 16, 16, 16384, 16384, 128, 0), (2, 16, 16, 65536, 65536, 128, 0), (2, 24, 24, 16384, 16384, 128, 0),
    (1, 64, 64, 16384, 16384, 128, 0), (2, 24, 24, 32768, 32768, 128, 0), (2, 8, 8, 86016, 86016, 128, 0),
    (1, 16, 16, 131072, 131072, 128, 0), (1, 40, 40, 32760, 32760, 128, 0), (1, 40, 40, 75600, 75600, 128, 0),
    (1, 24, 24, 119056, 119056, 128, 0), (1, 24, 24, 4097, 4097, 128, 0), (1, 64, 8, 8192, 8192, 128, 0),
    (4, 32, 8, 4096, 4096, 128, 0), (2, 24, 24, 8192, 512, 128, 0), (1, 32, 32, 8192, 8192, 128, 1),
    (1, 64, 8, 16384, 16384, 128, 1), (4, 32, 32, 4096, 4096, 128, 1), (2, 16, 16, 8192, 8192, 192, 0),
    (1, 128, 128, 8192, 8192, 192, 1), (4, 16, 16, 4096, 4096, 192, 1),
]


def gpu_reason() -> str | None:
    if not torch.cuda.is_available() or getattr(torch.version, "hip", None) is None:
        return "no ROCm GPU visible to PyTorch"
    name = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
    if name != "gfx950":
        return f"the GPU is {name}, not gfx950 (MI355X)"
    return None


def graph_time_ms(fn, passes=7, reps=20) -> float:
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    times = []
    for _ in range(passes):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return statistics.median(times)


def aiter_candidates(q, k, v, causal):
    """AITER bf16 forward entry points that take these inputs: name -> callable (bshd tensors)."""
    try:
        import aiter
    except ImportError:
        return {}
    out = {}
    if hasattr(aiter, "flash_attn_func"):
        out["aiter.flash_attn_func"] = lambda: aiter.flash_attn_func(q, k, v, causal=causal)
    return out


def bench_shape(ma, B, Hq, Hkv, Sq, Skv, D, causal) -> str:
    """One row of the table: our forward and the fastest AITER candidate on the same inputs."""
    q = torch.randn(B, Sq, Hq, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(B, Skv, Hkv, D, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(B, Skv, Hkv, 128, dtype=torch.bfloat16, device="cuda")
    rows = min(Sq, 1024)  # the error is measured on the last `rows` query rows (fp32 SDPA, bounded memory)
    qr = q[:, Sq - rows:].transpose(1, 2).float()
    kr = k.transpose(1, 2).float().repeat_interleave(Hq // Hkv, 1)
    vr = v.transpose(1, 2).float().repeat_interleave(Hq // Hkv, 1)
    mask = None
    if causal:  # bottom-right aligned: query row i sees keys j <= i + Skv - Sq
        i = torch.arange(Sq - rows, Sq, device="cuda")[:, None]
        mask = torch.arange(Skv, device="cuda")[None, :] <= i + Skv - Sq
    ref = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, attn_mask=mask, scale=1 / math.sqrt(D))

    def err(o):
        o = o[:, Sq - rows:].transpose(1, 2).float()
        return float((o - ref).abs().max() / ref.abs().max())

    def ours():
        return ma.forward(q, k, v, layout="bshd", causal=bool(causal))

    e_ours = err(ours())
    t_ours = graph_time_ms(ours)
    best, best_t, best_e = "-", float("inf"), float("nan")
    for name, fn in aiter_candidates(q, k, v, bool(causal)).items():
        try:
            o = fn()
            o = o[0] if isinstance(o, tuple) else o
            e = err(o)
            t = graph_time_ms(fn)
        except Exception as ex:  # noqa: BLE001 - a kernel that rejects the shape is not a candidate
            print(f"  {name}: rejected ({ex})", file=sys.stderr)
            continue
        if t < best_t:
            best, best_t, best_e = name, t, e
    sp = best_t / t_ours if best_t < float("inf") else float("nan")
    return (f"| {B}, {Hq}/{Hkv}, {Sq}/{Skv}, {D}{'/128' if D == 192 else ''} | {'yes' if causal else 'no'} | "
            f"{t_ours:.4f} | {best_t:.4f} ({best}) | {sp:.2f}x | {e_ours:.1e} / {best_e:.1e} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", help="B:Hq:Hkv:Sq:Skv:Dqk:causal")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    why = gpu_reason()
    if why:
        print(f"bench_attention_gfx950: skipped ({why}); nothing timed.")
        return 0
    import moonmath_amd as ma

    shapes = [tuple(int(x) for x in s.split(":")) for s in args.shape] if args.shape else SHAPES
    print("| B, Hq/Hkv, Sq/Skv, Dqk | causal | ours (ms) | fastest AITER (ms) | speedup | rel. error ours / AITER |")
    print("|---|---|---|---|---|---|")
    for shape in shapes:
        print(bench_shape(ma, *shape))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
