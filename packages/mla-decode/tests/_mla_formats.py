"""Test-side quantisers for the MLA KV formats (our own definitions, documented in docs/numerics.md).

quantize_mxfp4: per 32-element block, the rule AITER's dynamic_mxfp4_quant applies (which the GPU MODE
    problem's generator calls): amax rounded up to a power of two when its mantissa is >= 1.75 (add 2^21 to
    its fp32 bits, keep sign and exponent), X = floor(log2(that)) - 2 (E2M1's emax), clamped to [-127, 127];
    E8M0 byte X + 127; elements x / 2^X rounded to nearest E2M1 (ties to the even code), saturating at +-6.
    A zero block gets X = -127 and zero codes.
quantize_fp8: dynamic per-tensor: scale = max(amax, 1e-12) / fp8 max; x / scale clamped to +-max, rounded
    RTNE to the fp8 dtype (torch's cast); dequantise as fp8 * scale.
"""
from __future__ import annotations

import torch

E2M1_GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., K] (K % 32 == 0) -> (codes uint8 [..., K/2] (element 2b in the low nibble of byte b),
    scales uint8 [..., K/32] (E8M0))."""
    K = x.shape[-1]
    xb = x.double().reshape(*x.shape[:-1], K // 32, 32)
    amax32 = xb.abs().amax(dim=-1, keepdim=True).float()
    amax = ((amax32.view(torch.int32) + 0x200000) & 0x7F800000).view(torch.float32).double()
    X = torch.where(amax > 0, torch.floor(torch.log2(torch.where(amax > 0, amax, torch.ones_like(amax)))) - 2,
                    torch.full_like(amax, -127.0)).clamp(-127, 127)
    y = (xb.abs() / torch.exp2(X)).unsqueeze(-1)                             # [..., blocks, 32, 1]
    d = (y - E2M1_GRID).abs() + (torch.arange(8) % 2).double() * 1e-12       # ties -> even code
    mag = d.argmin(dim=-1)                                                   # saturates at 6 (code 7)
    code = (mag | ((xb < 0).long() << 3)).reshape(*x.shape[:-1], K).to(torch.uint8)
    packed = code[..., 0::2] | (code[..., 1::2] << 4)
    scales = (X.squeeze(-1) + 127).clamp(0, 254).to(torch.uint8)
    return packed, scales


def quantize_fp8(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn) -> tuple[torch.Tensor, float]:
    fmax = torch.finfo(dtype).max
    scale = max(float(x.float().abs().amax()), 1e-12) / fmax
    return (x.float() / scale).clamp(-fmax, fmax).to(dtype), scale


# ---- the GPU MODE amd-mixed-mla problem (problems/amd_202602/mixed-mla in gpu-mode/reference-kernels), from its
# published definition: q (total_q, 16, 576) bf16 and the bf16 KV (total_kv, 1, 576) both randn; the fp8 KV the
# per-tensor quantisation of the bf16 one (scale = amax / 448), the MXFP4 KV its 32-block quantisation;
# qo_indptr / kv_indptr uniform (q_len 1), pages of one token in order, sm_scale = 576^-0.5; a submission
# passes when every output element is within 0.1 + 0.1 |ref| of the reference (AITER's a8w8 kernel: fp8 Q
# quantised per tensor, fp8 KV).
GPUMODE_HEADS, GPUMODE_SCALE = 16, 576 ** -0.5
GPUMODE_ATOL = GPUMODE_RTOL = 0.1


def gpumode_inputs(batch: int, kv_len: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, GPUMODE_HEADS, 576, generator=g).to(torch.bfloat16)
    kv = torch.randn(batch * kv_len, 1, 576, generator=g).to(torch.bfloat16)
    kv_fp8, kv_scale = quantize_fp8(kv)
    codes, scales = quantize_mxfp4(kv.float().view(-1, 576))
    return dict(q_lat=q[..., :512].contiguous(), q_pe=q[..., 512:].contiguous(), kv_bf16=kv, kv_fp8=kv_fp8,
                kv_scale=kv_scale, kv_mxfp4=codes.view(-1, 1, 288), kv_mxfp4_scales=scales,
                seq_lens=torch.full((batch,), kv_len, dtype=torch.int32),
                kv_indices=torch.arange(batch * kv_len, dtype=torch.int32),
                kv_indptr=torch.arange(batch + 1, dtype=torch.int32) * kv_len)


def gpumode_check(out: torch.Tensor, ref: torch.Tensor) -> tuple[bool, float]:
    """The problem's check (every element within atol + rtol |ref|, NaN patterns equal) and the worst
    ratio |out - ref| / (atol + rtol |ref|) (< 1 passes)."""
    o, r = out.float(), ref.float()
    tol = GPUMODE_ATOL + GPUMODE_RTOL * r.abs()
    ratio = ((o - r).abs() / tol).nan_to_num(nan=float("inf"))
    same_nan = torch.equal(torch.isnan(o), torch.isnan(r))
    worst = float(ratio[~torch.isnan(r)].max()) if (~torch.isnan(r)).any() else 0.0
    return same_nan and worst <= 1.0, worst


def gpumode_run(fmt: str, x: dict, backend: str) -> torch.Tensor:
    """Our op for KV format fmt (a16w16: bf16 KV; a16w8 / a8w8: the fp8 KV; mxfp4) on the problem's inputs."""
    import moonmath_mla_decode as mld
    from moonmath_common import use_backend

    o = torch.empty(x["q_lat"].shape, dtype=torch.bfloat16)
    tail = (x["seq_lens"], x["kv_indices"], x["kv_indptr"], GPUMODE_SCALE)
    with use_backend(backend):
        if fmt == "a16w16":
            mld.mla_decode_a16w16(x["q_lat"], x["q_pe"], x["kv_bf16"], o, *tail)
        elif fmt == "a16w8":
            mld.mla_decode_a16w8(x["q_lat"], x["q_pe"], x["kv_fp8"], o, *tail, x["kv_scale"])
        elif fmt == "a8w8":
            mld.mla_decode_a8w8(x["q_lat"], x["q_pe"], x["kv_fp8"], o, *tail, x["kv_scale"])
        else:
            mld.mla_decode_mxfp4(x["q_lat"], x["q_pe"], x["kv_mxfp4"], x["kv_mxfp4_scales"], o, *tail)
    return o


def gpumode_exact(x: dict) -> torch.Tensor:
    """float64 attention over the bf16 KV (the problem's source of truth) with bf16 Q: [B, 16, 512]."""
    q = torch.cat([x["q_lat"], x["q_pe"]], -1).double()
    kv = x["kv_bf16"].view(-1, 576).double()
    out = torch.empty(q.shape[0], q.shape[1], 512, dtype=torch.float64)
    ip = x["kv_indptr"].tolist()
    for b in range(q.shape[0]):
        c = kv[ip[b]:ip[b + 1]]
        out[b] = torch.softmax(GPUMODE_SCALE * q[b] @ c.T, -1) @ c[:, :512]
    return out


def dcp_views(g: torch.Generator, pool: torch.Tensor, extra: dict, B: int, H: int, q_len: int, glens: list[int],
              cp_world: int):
    """Decode-context-parallel cases over one pool (drawn by the caller from g, then Q and the slot order from g):
    rank_case(r) is rank r's local view (positions r, r + W, ... of every request), full the unsplit case.
    ``extra`` (e.g. {"kv_scales": ...}) goes into every case."""
    total = int(sum(glens))
    perm = torch.randperm(pool.shape[0], generator=g)[:total].to(torch.int32)
    gstart = [0]
    for n in glens:
        gstart.append(gstart[-1] + n)
    q_lat = torch.randn(B * q_len, H, 512, generator=g).to(torch.bfloat16)
    q_pe = torch.randn(B * q_len, H, 64, generator=g).to(torch.bfloat16)
    glen_t = torch.tensor(glens, dtype=torch.int32)

    def rank_case(r):
        lens, idx = [], []
        for b in range(B):
            pos = list(range(r, glens[b], cp_world))
            lens.append(len(pos))
            idx += [int(perm[gstart[b] + p]) for p in pos]
        ip = torch.zeros(B + 1, dtype=torch.int32)
        ip[1:] = torch.cumsum(torch.tensor(lens, dtype=torch.int64), 0).to(torch.int32)
        return dict(q_lat=q_lat, q_pe=q_pe, kv_pool=pool, **extra, seq_lens=torch.tensor(lens, dtype=torch.int32),
                    kv_indices=torch.tensor(idx, dtype=torch.int32), kv_indptr=ip, glen=glen_t)

    full = dict(q_lat=q_lat, q_pe=q_pe, kv_pool=pool, **extra, seq_lens=glen_t, kv_indices=perm,
                kv_indptr=torch.tensor(gstart, dtype=torch.int32), glen=None)
    return rank_case, full


O_TOL, LSE_TOL = 0.02, 0.05  # the seed's MLA tolerance: max |o - ref|, max |lse - ref| (base 2)


def check_close(o, lse, ro, rlse):
    """o (bf16) and lse (or None) against the reference's: no NaN, within O_TOL / LSE_TOL, the same -inf rows."""
    assert not torch.isnan(o.float()).any()
    err = (o.float() - ro.float()).abs().max().item()
    assert err < O_TOL, f"max |o - ref| = {err}"
    if lse is not None:
        fin, rfin = torch.isfinite(lse), torch.isfinite(rlse)
        assert torch.equal(fin, rfin), "finite / -inf pattern of lse differs"
        assert torch.equal(lse[~fin], rlse[~rfin])
        if fin.any():
            lerr = (lse[fin] - rlse[fin]).abs().max().item()
            assert lerr < LSE_TOL, f"max |lse - ref| = {lerr}"
    return err


def a8w8_runs(plan, lens, q_len, glens=None, cp_rank=0, cp_world=1) -> list[list[int]]:
    """Per request, the first 32-token tiles of the runs a8w8's kernel decodes each with its own running max under
    `plan` (formats.make_plan): the request's units (plan.nparts, or the length-balanced count of
    mla_decode_common.hpp's locate, in fp32 as there), each ceil(tiles / units) tiles, and under the _kv4 kernel
    (plan.kv_waves 4) each unit's waves ceil(part / 4) tiles. reference.mla_decode_a8w8(..., runs=) is the kernel's
    definition at that split."""
    import numpy as np

    from moonmath_mla_decode import reference

    B = len(lens)
    ends = [min(lens[b], reference.window_ends(lens[b], q_len, None if glens is None else glens[b], cp_rank,
                                               cp_world)[-1]) for b in range(B)]
    if plan.balanced:
        U = B * plan.nparts
        t16 = [-(-e // 16) for e in ends]
        total = sum(t16)
        share = np.float32(U - B) / np.float32(total) if total > 0 else np.float32(0)
        count = [1 + int(np.float32(share * np.float32(t))) for t in t16]
        cum = [min(sum(count[:b + 1]), U - (B - 1 - b)) for b in range(B)]
        units = [cum[b] - (cum[b - 1] if b else 0) for b in range(B)]
    else:
        units = [plan.nparts] * B
    out = []
    for b in range(B):
        n32 = -(-ends[b] // 32)
        tpp = -(-n32 // units[b]) if units[b] else 0
        starts = []
        for p in range(units[b]):
            a, e = p * tpp, min((p + 1) * tpp, n32)
            if a >= n32:
                break
            tpw = -(-(e - a) // plan.kv_waves)
            starts += [s for s in range(a, e, tpw)]
        out.append(starts or [0])
    return out
