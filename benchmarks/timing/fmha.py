"""AITER's FMHA v3 forward under the timing model: one shape's modeled time.

The kernel's launch (argument struct, grid) comes from benchmarks.peers.fmha_v3.run_aiter_fmha; we
capture it instead of running it, then run only the workgroups of a few CUs of XCD 0 under the
timing model. A workgroup's work depends on Skv (and, causal, on its q tiles), not on B or H, so the
sample launch is B = 1, H = 1 with enough q tiles that the sampled workgroup ids exist, and the
whole grid is composed from dispatch rounds (timing.kernel_time).
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import torch

import moonmath_emu.timing as timing
from benchmarks.peers import fmha_v3, harness


@contextmanager
def _captured_launch():
    """Make run_aiter_fmha record its launch instead of emulating it."""
    seen = {}

    def fake(arch, rel, fields, values, grid, block, check_hazards=False):
        seen.update(arch=arch, rel=rel, fields=fields, values=dict(values), grid=grid, block=block)
        return {}

    real = fmha_v3.launch
    fmha_v3.launch = fake
    try:
        yield seen
    finally:
        fmha_v3.launch = real


def _own_copy(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of `t` in a storage of its own that starts at its first element.

    The timing model's caches see each argument's storage at a canonical address (emu timing.hpp,
    Tracer::set_buffers), so where the host allocator put it no longer matters; what matters is the tensor's
    offset in its storage. A copy placed at a 2 MiB boundary inside a larger buffer (this helper before) had an
    offset that moved with the allocation: 64-byte-aligned CPU storages gave the same launch two cycle counts
    (a merge launch 3806 / 3830 cycles a workgroup, run to run in one process)."""
    if not t.is_contiguous():
        raise ValueError("expected a contiguous tensor")
    out = torch.empty(t.shape, dtype=t.dtype)
    out.copy_(t)
    return out


def model_wg(arch: str, skv: int, *, causal: bool = False, round_mode: str | None = None, dqk: int = 128,
             dv: int = 128, sq_tiles: int | None = None, ncu: int = 2, cfg: dict | None = None, seed: int = 0) -> dict:
    """Simulate `ncu` CUs of XCD 0, each running one workgroup of a (1, 1, Sq, skv) launch.

    On the chip, workgroup i goes to XCD i % 8, so the CUs of XCD 0 run workgroups 0, 8, 16, ...
    (q tiles of the same head: they share K/V in that XCD's L2). Returns the simulator's report plus
    'wg_cycles' (the mean over the simulated CUs) and the launch it sampled.
    """
    cfg = cfg if cfg is not None else timing.config(arch)
    rows = fmha_v3.kernel_for(arch, dqk, dv, causal, round_mode or fmha_v3.ROUND_MODES[arch][0])[2]
    xcds = cfg["xcds"]
    tiles = sq_tiles if sq_tiles is not None else (ncu - 1) * xcds + 1
    if causal:
        tiles = 2 * tiles  # each causal workgroup does two q tiles
    sq = tiles * rows
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, sq, dqk, generator=g).bfloat16()
    k = torch.randn(1, 1, skv, dqk, generator=g).bfloat16()
    v = torch.randn(1, 1, skv, dv, generator=g).bfloat16()
    with _captured_launch() as L:
        fmha_v3.run_aiter_fmha(q, k, v, causal=causal, round_mode=round_mode, arch=arch)
    # every tensor in a storage of its own (the caches see storages at canonical addresses)
    values = {n: (_own_copy(t) if isinstance(t, torch.Tensor) else t) for n, t in L["values"].items()}
    mod, kernel = harness.load(L["arch"], L["rel"])
    args = harness.pack_args(mod, kernel, L["fields"], values)
    gx = L["grid"][0]
    cus = [[(min(c * xcds, gx - 1), 0, 0)] for c in range(ncu)]
    rep = timing.simulate(mod, kernel, L["grid"], (L["block"], 1, 1), args, cus=cus, config=cfg)
    rep["wg_cycles"] = sum(rep["cu_cycles"]) / len(rep["cu_cycles"])
    rep["kernel"] = L["rel"]
    rep["sample"] = {"sq": sq, "skv": skv, "grid": L["grid"], "cus": cus}
    return rep


def grid_workgroups(arch: str, B: int, Hq: int, Sq: int, *, causal: bool = False, dqk: int = 128, dv: int = 128) -> int:
    rows = fmha_v3.kernel_for(arch, dqk, dv, causal, fmha_v3.ROUND_MODES[arch][0])[2]
    tiles = math.ceil(Sq / rows)
    return (math.ceil(tiles / 2) if causal else tiles) * Hq * B
