"""Hardware benchmark of the gfx942 MHA forward: ours vs AITER's flash_attn_func (v3 assembly forward) per
rounding mode, on identical BSHD inputs; median over timing passes; a markdown table.

Needs an MI300-class GPU (ROCm torch) and the `aiter` package for its column; without a GPU it prints why
and exits 0 (nothing is timed anywhere else: no speed claims come from the emulator).

    python packages/mha-gfx942/benchmarks/bench_mha_hw.py [--passes 5] [--iters 30] [--modes rtna rtne rtz]
                                                          [--shape B H S D ...]
"""
from __future__ import annotations

import argparse
import statistics
import sys

# The seed's table shapes (B, H, S, D); Skv = S.
SHAPES = [(2, 24, 8192, 128), (1, 24, 16384, 128), (4, 16, 16384, 128), (8, 16, 4096, 128), (1, 32, 32768, 128)]
AITER_CVT = {"rtne": 0, "rtna": 1, "rtz": 2}  # flash_attn_func's how_v3_bf16_cvt (aiter fmha_v3_fwd codegen)


def gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available() or getattr(torch.version, "hip", None) is None:
        return "no ROCm GPU visible to torch (torch.version.hip / torch.cuda.is_available())"
    name = torch.cuda.get_device_properties(0).gcnArchName
    if not name.startswith("gfx942"):
        return f"the GPU is {name}, not gfx942"
    return None


def time_ms(fn, passes: int, iters: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    meds = []
    for _ in range(passes):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        meds.append(start.elapsed_time(end) / iters)
    return statistics.median(meds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--modes", nargs="+", default=["rtne", "rtna", "rtz"], choices=list(AITER_CVT))
    ap.add_argument("--shape", type=int, nargs=4, action="append", metavar=("B", "H", "S", "D"))
    args = ap.parse_args()
    reason = gpu_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    import torch

    import moonmath_mha_gfx942 as mha
    from moonmath_common import use_backend

    try:
        from aiter import flash_attn_func
    except ImportError:
        flash_attn_func = None
        print("note: aiter is not installed; its column is empty", file=sys.stderr)
    print("| Shape (B, H, S, D) | Round | Ours (ms) | AITER v3 (ms) | Speedup vs AITER |")
    print("|---|---|---|---|---|")
    for B, H, S, D in [tuple(s) for s in args.shape] if args.shape else SHAPES:
        q, k, v = (torch.randn(B, S, H, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
        out = torch.empty_like(q)
        for mode in args.modes:
            def ours_fn(q=q, k=k, v=v, out=out, mode=mode):
                mha.forward(q, k, v, out=out, layout="bshd", round_mode=mode)

            def aiter_fn(q=q, k=k, v=v, mode=mode):
                flash_attn_func(q, k, v, how_v3_bf16_cvt=AITER_CVT[mode])

            with use_backend("hip"):
                ours = time_ms(ours_fn, args.passes, args.iters)
            theirs = time_ms(aiter_fn, args.passes, args.iters) if flash_attn_func is not None else None
            speed = f"{theirs / ours:.2f}x" if theirs else "-"
            print(f"| ({B}, {H}, {S}, {D}) | {mode.upper()} | {ours:.3f} | "
                  f"{f'{theirs:.3f}' if theirs else '-'} | {speed} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
