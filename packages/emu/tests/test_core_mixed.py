"""Ordinary compiled code through the emulator: integer division, f16/bf16, float/double math,
global atomics, ds_bpermute, bit counting — against a Python/numpy model of the same source."""
import numpy as np
import torch
from _emu_build import kernel_source

import moonmath_emu as emu


def test_mixed_kernel(build, arch):
    m = emu.Module(build(kernel_source("mixed.hip"), arch))
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(64) * 5).astype(np.float32)
    y = np.zeros(192, np.float32)
    u = np.zeros(128, np.uint32)
    u[:64] = rng.integers(0, 2 ** 32, 64, dtype=np.uint64).astype(np.uint32)
    q = rng.integers(0, 2 ** 63, 64, dtype=np.uint64)
    g = torch.Generator().manual_seed(2)
    h = torch.randn(64, generator=g).to(torch.float16)
    b = torch.randn(64, generator=g).to(torch.bfloat16)
    acc = np.zeros(4, np.float32)
    mx = np.zeros(1, np.uint32)
    d, dd = 12345, 98765432109
    u0, q0, h0, b0 = u.copy(), q.copy(), h.clone(), b.clone()
    cnt = m.launch("mixed", grid=1, block=64, args=[x, y, u, q, h, b, acc, mx, d, dd])

    torch.testing.assert_close(torch.from_numpy(y[:64]), torch.from_numpy(np.sqrt(x * x + 1) + x))
    uu = u0[:64] // d + u0[:64] % 7
    assert np.array_equal(u[:64], uu)
    assert np.array_equal(q, q0 // dd + q0 % 1000003)
    hv = (torch.from_numpy(x * 2).to(torch.float16) + h0)
    hh0 = hv * hv + hv
    hh1 = torch.tensor(1.5, dtype=torch.float16) ** 2 + 1.5
    # the kernel may fuse hh*hh+hh (one rounding) where torch rounds twice: a few f16 ulp apart
    torch.testing.assert_close(h.float(), (hh0.float() - hh1.float()), rtol=4e-3, atol=2e-2)
    assert torch.equal(b, (torch.from_numpy(x) + b0.float()).to(torch.bfloat16))
    want_acc = np.array([x[j::4].astype(np.float64).sum() for j in range(4)])
    np.testing.assert_allclose(acc, want_acc, rtol=1e-5, atol=1e-5)
    assert mx[0] == max(t * 37 % 64 for t in range(64))
    xf = x.astype(np.float32)
    want64 = (np.maximum(xf, 0.5) + np.floor(xf) + np.trunc(xf) + np.trunc(xf)
              + np.where(xf * xf >= 0, np.trunc(xf * xf), 0)).astype(np.float32)
    torch.testing.assert_close(torch.from_numpy(y[64:128]), torch.from_numpy(want64))
    sh = (np.arange(64) + 1) & 63
    bits = np.array([bin(int(v)).count("1") for v in uu]) + np.array([32 - int(v | 1).bit_length() for v in uu])
    assert np.array_equal(u[64:], (sh + bits).astype(np.uint32))
    dv = x.astype(np.float64)
    torch.testing.assert_close(torch.from_numpy(y[128:]), torch.from_numpy((dv * dv / 3 + np.abs(dv)).astype(np.float32)))
    assert cnt["vmem"] > 0 and cnt["trans"] > 0
