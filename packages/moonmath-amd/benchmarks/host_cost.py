"""Host (Python) cost per call of the public ops on the hip path, with the kernel launch replaced by a no-op.

No GPU is needed: the hip backend is selected with a pretended gfx942 device, KernelSet.launch does nothing,
and the tensors stay on the CPU. Two columns per op:
  device-resident  value checks skipped, as for GPU tensors (what a serving engine pays per call)
  host tensors     CPU index tensors, so the value checks run (vectorised: flat in B)
next to a bare torch custom op with the same arguments (the dispatch floor). Median of --reps calls.

    python packages/moonmath-amd/benchmarks/host_cost.py [--reps 2000]
"""
from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

import torch

import moonmath_amd as ma
from moonmath_common import backend, checks, kernels


@torch.library.custom_op("moonmath_bench::noop13", mutates_args=("o",))
def _noop(q: torch.Tensor, p: torch.Tensor, kv: torch.Tensor, o: torch.Tensor, s: torch.Tensor, i: torch.Tensor,
          ip: torch.Tensor, a: float, b: float, lse: torch.Tensor | None, g: torch.Tensor | None, r: int,
          w: int) -> None:
    return None


@torch.library.custom_op("moonmath_bench::noop15", mutates_args=("C",))
def _noop_down(A: torch.Tensor, B: torch.Tensor, Bs: torch.Tensor, C: torch.Tensor, w: torch.Tensor | None,
               s: torch.Tensor, e: torch.Tensor, n: torch.Tensor, m: int, bm: int, st: int, nt: int, v: int, k: int,
               r: bool) -> None:
    return None


def _median_us(fn, reps: int) -> float:
    for _ in range(min(50, reps)):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts) / 1e3


def mla_args(B: int, H: int = 16, q_len: int = 1, S: int = 64):
    T = B * q_len
    pool = torch.zeros(B * S, 1, 576).to(torch.float8_e4m3fnuz)
    return (torch.zeros(T, H, 512, dtype=torch.bfloat16), torch.zeros(T, H, 64, dtype=torch.bfloat16), pool,
            torch.empty(T, H, 512, dtype=torch.bfloat16), torch.full((B,), S, dtype=torch.int32),
            torch.arange(B * S, dtype=torch.int32), torch.arange(B + 1, dtype=torch.int32) * S, 576 ** -0.5, 1.0)


def moe_down_args(T: int = 4, top_k: int = 8, E: int = 64, K: int = 384, N: int = 7168):
    rows = T * top_k
    ids = torch.stack([torch.randperm(E)[:top_k] for _ in range(T)]).to(torch.int32)
    bm = ma.mxfp4_moe_down_block_m(rows, E, K)
    s, e, n, nblk = ma.moe_align_block_size(ids, bm, E)
    return (torch.zeros(rows, K, dtype=torch.bfloat16), torch.zeros(E, K // 32, N, 16, dtype=torch.uint8),
            torch.zeros(E, K // 32, N, dtype=torch.uint8), torch.empty(rows, N, dtype=torch.bfloat16), None, s, e,
            n, nblk, bm, 1, 2, rows, 1)


def _varlen_rows(B: int, reps: int, as_emu_device) -> None:
    cu = torch.arange(B + 1, dtype=torch.int32) * 100
    T = 100 * B
    q, k = torch.zeros(T, 32, 128, dtype=torch.bfloat16), torch.zeros(T, 8, 128, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    kw = dict(heads=32, kv_heads=8, causal=True)
    dplan = ma.VarlenPlan().plan(as_emu_device(cu), as_emu_device(cu), 100, 100, T, T, **kw)
    hplan = ma.VarlenPlan().plan(cu, cu, 100, 100, T, T, **kw)
    dev = _median_us(lambda: dplan.run(q, k, k, out=out), reps)
    host = _median_us(lambda: hplan.run(q, k, k, out=out), reps)
    fv = _median_us(lambda: ma.forward_varlen(q, k, k, cu, cu, 100, 100, causal=True, out=out), reps)
    print(f"{'VarlenPlan.run':28s} {f'B={B} x 100 H32/8':18s} {dev:13.1f} us {host:10.1f} us {fv:12.1f} us")
    dp = _median_us(lambda: dplan.plan(as_emu_device(cu), as_emu_device(cu), 100, 100, T, T, **kw), reps)
    hp = _median_us(lambda: hplan.plan(cu, cu, 100, 100, T, T, **kw), reps)
    print(f"{'VarlenPlan.plan':28s} {f'B={B} x 100 H32/8':18s} {dp:13.1f} us {hp:10.1f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    a = ap.parse_args()
    with mock.patch.object(backend, "live_arch", lambda: "gfx942"), \
            mock.patch.object(kernels.KernelSet, "launch", lambda self, *args, **kw: None), \
            mock.patch("moonmath_common.hip.device_cu_count", lambda i: 304), \
            ma.use_backend("hip"):
        print(f"{'op':28s} {'shape':18s} {'device-resident':>16s} {'host tensors':>13s} {'bare custom op':>15s}")
        for B in (1, 8, 64):
            args = mla_args(B)
            floor = _median_us(lambda args=args: _noop(*args, None, None, 0, 1), a.reps)
            host = _median_us(lambda args=args: ma.mla_decode_a16w8(*args), a.reps)
            with mock.patch.object(checks, "on_host", lambda *t: False):
                dev = _median_us(lambda args=args: ma.mla_decode_a16w8(*args), a.reps)
            print(f"{'mla_decode_a16w8':28s} {f'B={B} H=16 S=64':18s} {dev:13.1f} us {host:10.1f} us "
                  f"{floor:12.1f} us")
        for T in (4, 64):
            args = moe_down_args(T)
            floor = _median_us(lambda args=args: _noop_down(*args, False), a.reps)
            host = _median_us(lambda args=args: ma.mxfp4_moe_down(*args), a.reps)
            with mock.patch.object(checks, "on_host", lambda *t: False):
                dev = _median_us(lambda args=args: ma.mxfp4_moe_down(*args), a.reps)
            print(f"{'mxfp4_moe_down':28s} {f'T={T} top8 E64 N7168':18s} {dev:13.1f} us {host:10.1f} us "
                  f"{floor:12.1f} us")
        plan = _median_us(lambda: ma.mxfp4_moe_down_plan(32, 30, 7168, 384, 40, 304), a.reps)
        print(f"{'mxfp4_moe_down_plan':28s} {'(cached by shape)':18s} {plan:13.1f} us")
    # gfx950 varlen attention, per layer: VarlenPlan.run over a device-written plan (device-resident cu_seqlens:
    # EmuDeviceTensors, which the ops treat as GPU memory) and over a host plan, beside forward_varlen (which
    # checks the lengths and plans on every call). plan() is per forward pass.
    from moonmath_attention_gfx950 import as_emu_device
    with mock.patch.object(backend, "live_arch", lambda: "gfx950"), \
            mock.patch.object(kernels.KernelSet, "launch", lambda self, *args, **kw: None), \
            mock.patch("moonmath_common.hip.device_cu_count", lambda i: 256), \
            ma.use_backend("hip"):
        print(f"{'op':28s} {'shape':18s} {'device-planned':>16s} {'host-planned':>13s} {'forward_varlen':>15s}")
        for B in (1, 8, 64):
            _varlen_rows(B, a.reps, as_emu_device)


if __name__ == "__main__":
    main()
