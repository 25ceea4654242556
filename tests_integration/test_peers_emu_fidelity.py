"""Emulator fidelity of gfx950 instructions no document pins down, checked end to end on AITER's shipped code
objects (which are correct on hardware): if the emulator's reading of an instruction were wrong, these kernels
would give wrong numbers.

`ds_read_b64_tr_b8`: the only AITER gfx950 object that uses it is `mla/mla_a8w8_qh16_qseqlen4_gqaratio16.co`
(fp8 MLA decode, q_len 4; its V operand for the fp8 PV `v_mfma_f32_32x32x64_f8f6f4` comes from tr_b8 reads).
Run on the emulator, its output equals a float64 model of its arithmetic to ~1e-7 (relative); with the
transpose rule replaced by the alternatives (even/odd-lane interleave, blocked rows, reversed bytes) the same
run is off by 1.0-1.4 (docs/emulator.md, "Evidence"). The MXFP4 `v_mfma_scale_f32_16x16x128_f8f6f4` is checked
the same way by tests_integration/test_peers_moe.py. Skips, saying why, when the AITER wheel is unavailable."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks.peers

from benchmarks.peers import metrics, mla, wheel  # noqa: E402
from benchmarks.peers.harness import launch  # noqa: E402

_why = wheel.available()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"AITER wheel unavailable: {_why}")

QLEN4 = "mla/mla_a8w8_qh16_qseqlen4_gqaratio16.co"
Q_LEN = 4
TILE = 64  # KV rows per softmax step of the kernel (the model matches with 64, not 16 / 32 / 128)


def _run_qlen4(q8, q_scale, kv_pool, kv_indices, kv_indptr, scale, kv_scale):
    """The q_len-4 object, one KV split: it writes fp32 [T, 1, 16, 512] into `split_out` (not the bf16 `out`)."""
    T, B = q8.shape[0], kv_indptr.numel() - 1
    split_out = torch.full((T, 1, mla.HEADS, mla.LAT), float("nan"), dtype=torch.float32)
    values = {
        "split_out": split_out, "split_lse": torch.full((T, 1, mla.HEADS, 1), float("-inf")), "q": q8,
        "kv": kv_pool, "kv_indptr": kv_indptr, "kv_page_indices": kv_indices,
        "kv_last_page_lens": torch.ones(B, dtype=torch.int32), "scale": float(scale),
        "heads_x_qlen": mla.HEADS * Q_LEN, "kv_splits": 1, "q_request_stride": q8.stride(0) * Q_LEN,
        "page_stride": kv_pool.stride(0), "log2_page_size": 0,
        "qo_indptr": torch.arange(B + 1, dtype=torch.int32) * Q_LEN, "work": torch.arange(B + 1, dtype=torch.int32),
        "out": torch.zeros(T, mla.HEADS, mla.LAT, dtype=torch.bfloat16),
        "q_scale": torch.tensor([q_scale]), "kv_scale": torch.tensor([kv_scale]),
    }
    counters = launch("gfx950", QLEN4, mla.MLA_ARGS, values, grid=(1, B, 1), block=256)
    return split_out[:, 0], counters


def _fp8_p_model(qd, kv_pool, kv_indices, kv_indptr, scale, kv_scale):
    """float64 causal MLA (token t of a request sees rows [0, L - 4 + t]) with the kernel's fp8 P: online
    softmax over 64-row tiles, exp(s - running max) rounded to e4m3fn before P.V, normaliser unrounded."""
    B = kv_indptr.numel() - 1
    out = torch.zeros(qd.shape[0], mla.HEADS, mla.LAT, dtype=torch.float64)
    for b in range(B):
        kv = kv_pool[kv_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long(), 0].double() * kv_scale
        for t in range(Q_LEN):
            n = kv.shape[0] - Q_LEN + t + 1
            s = qd[b * Q_LEN + t] @ kv[:n].T * scale
            m = s.amax(-1, keepdim=True)
            run = torch.full_like(m, float("-inf"))
            p = torch.zeros_like(s)
            for t0 in range(0, n, TILE):
                st = s[:, t0:t0 + TILE]
                run = torch.maximum(run, st.amax(-1, keepdim=True))
                p[:, t0:t0 + TILE] = torch.exp(st - run).float().to(torch.float8_e4m3fn).double() * torch.exp(run - m)
            out[b * Q_LEN + t] = (p @ kv[:n, :mla.LAT]) / torch.exp(s - m).sum(-1, keepdim=True)
    return out


def test_tr_b8_in_aiter_mla_qlen4_matches_its_fp64_model():
    emu = pytest.importorskip("moonmath_emu")
    assert "ds_read_b64_tr_b8" in emu.opcodes_in(wheel.code_object("gfx950", QLEN4))
    B, S = 2, 300  # 300 = four full 64-row tiles and a partial one; the causal tail differs per token
    q_lat, q_pe, kv_pool, _, kv_indices, kv_indptr, scale, kv_scale = mla.make_inputs(B, S, Q_LEN, arch="gfx950")
    q8, q_scale = mla.quantize_q_fp8(q_lat, q_pe)
    out, counters = _run_qlen4(q8, q_scale, kv_pool, kv_indices, kv_indptr, scale, kv_scale)
    model = _fp8_p_model(q8.double() * q_scale, kv_pool, kv_indices, kv_indptr, scale, kv_scale)
    # measured 7.9e-8 (fp32 output, f32 accumulation); a wrong transpose rule gives >= 1.0
    assert metrics.rel_err(out, model) < 1e-5
    assert counters["mfma_by_opcode"].get("v_mfma_f32_32x32x64_f8f6f4", 0) > 0  # the PV fed by tr_b8
