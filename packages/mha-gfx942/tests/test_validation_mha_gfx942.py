"""gfx942 MHA forward: every argument's bad inputs are rejected with a message naming it."""
from __future__ import annotations

import pytest
import torch

import moonmath_mha_gfx942 as mha
from moonmath_common import use_backend


def qkv(B=1, H=2, Sq=4, Skv=5, D=128, layout="bhsd"):
    mk = (lambda S, d: torch.zeros(B, H, S, d, dtype=torch.bfloat16)) if layout == "bhsd" else \
         (lambda S, d: torch.zeros(B, S, H, d, dtype=torch.bfloat16))
    return mk(Sq, D), mk(Skv, D), mk(Skv, D)


CASES = [
    ("q not a tensor", lambda q, k, v: dict(q=[1.0]), TypeError, "q must be a torch.Tensor"),
    ("q dtype", lambda q, k, v: dict(q=q.float()), TypeError, "q must have dtype bfloat16"),
    ("q rank", lambda q, k, v: dict(q=q[0]), ValueError, "q must be 4-D"),
    ("q head dim", lambda q, k, v: dict(q=q[..., :80].contiguous()), ValueError, "q head dim"),
    ("q not contiguous", lambda q, k, v: dict(q=q.transpose(1, 2).contiguous().transpose(1, 2)), ValueError,
     "q must be contiguous"),
    ("q empty seq", lambda q, k, v: dict(q=q[:, :, :0]), ValueError, "q sequence length"),
    ("q zero batch", lambda q, k, v: dict(q=q[:0], k=k[:0], v=v[:0]), ValueError, "q batch and heads must be >= 1"),
    ("q zero heads", lambda q, k, v: dict(q=q[:, :0], k=k[:, :0], v=v[:, :0]), ValueError,
     "q batch and heads must be >= 1"),
    ("k dtype", lambda q, k, v: dict(k=k.half()), TypeError, "k must have dtype bfloat16"),
    ("k rank", lambda q, k, v: dict(k=k[0]), ValueError, "k must be 4-D"),
    ("k heads (GQA)", lambda q, k, v: dict(k=k[:, :1], v=v[:, :1]), ValueError, "k must have q's batch, heads"),
    ("k batch", lambda q, k, v: dict(k=torch.cat([k, k]), v=torch.cat([v, v])), ValueError, "k must have q's batch"),
    ("k head dim", lambda q, k, v: dict(k=k[..., :64]), ValueError, "k must have q's"),
    ("k empty seq", lambda q, k, v: dict(k=k[:, :, :0], v=v[:, :, :0]), ValueError, "k/v sequence length"),
    ("k not contiguous", lambda q, k, v: dict(k=k.transpose(1, 2).contiguous().transpose(1, 2)), ValueError,
     "k must be contiguous"),
    ("v dtype", lambda q, k, v: dict(v=v.float()), TypeError, "v must have dtype bfloat16"),
    ("v shape", lambda q, k, v: dict(v=v[:, :, :3]), ValueError, "v must have k's shape"),
    ("v not contiguous", lambda q, k, v: dict(v=v.transpose(1, 2).contiguous().transpose(1, 2)), ValueError,
     "v must be contiguous"),
    ("out dtype", lambda q, k, v: dict(out=q.float()), TypeError, "out must have dtype bfloat16"),
    ("out shape", lambda q, k, v: dict(out=q[:, :1]), ValueError, "out must have shape"),
    ("out not contiguous", lambda q, k, v: dict(out=q.transpose(1, 2).contiguous().transpose(1, 2)), ValueError,
     "out must be contiguous"),
    ("out device", lambda q, k, v: dict(out=torch.empty(q.shape, dtype=torch.bfloat16, device="meta")), ValueError,
     "device"),
    ("out not a tensor", lambda q, k, v: dict(out=3), TypeError, "out must be a torch.Tensor or None"),
    ("round_mode", lambda q, k, v: dict(round_mode="rne"), ValueError, "round_mode must be one of"),
    ("layout", lambda q, k, v: dict(layout="bsh"), ValueError, "layout must be one of"),
]


@pytest.mark.parametrize("name,change,exc,msg", CASES, ids=[c[0] for c in CASES])
def test_rejects(name, change, exc, msg):
    q, k, v = qkv()
    args = dict(q=q, k=k, v=v)
    args.update(change(q, k, v))
    with use_backend("reference"), pytest.raises(exc, match=msg):
        mha.forward(**args)


def test_bshd_checks_use_the_layout():
    q, k, v = qkv(layout="bshd")
    with use_backend("reference"):
        mha.forward(q, k, v, layout="bshd")
        with pytest.raises(ValueError, match="k must have q's batch, heads"):
            mha.forward(q, k[:, :, :1], v[:, :, :1], layout="bshd")
