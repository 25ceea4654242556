"""moonmath/lds.hpp on moonmath-emu, both archs: b64/b128 LDS access and the swizzle policies."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import moonmath_emu as emu

SRC = Path(__file__).parent / "device" / "lds.hip"
ARCHS = ["gfx942", "gfx950"]


@pytest.fixture(params=ARCHS)
def mod(request, compile_hip):
    return emu.Module(compile_hip(SRC, request.param))


def want_offset(kind, row, byte):
    if kind == "linear":
        return row * 128 + byte
    chunk, period = (16, 8) if kind == "xor" else (32, 4)
    return row * 128 + (((byte // chunk) ^ (row % period)) * chunk) + byte % chunk


@pytest.mark.parametrize("kind", ["linear", "xor", "xor32"])
def test_swizzled_writes_land_where_the_policy_says_and_read_back(mod, kind):
    data = torch.arange(16 * 128 // 4, dtype=torch.int32) * 7 + 3  # chunk c: dwords 4c..4c+3
    image, back = torch.zeros(512, dtype=torch.int32), torch.zeros(512, dtype=torch.int32)
    offs = torch.zeros(128, dtype=torch.int32)
    mod.launch(f"t_lds_{kind}", grid=(1, 1, 1), block=(64, 1, 1), args=[data, image, back, offs])
    for c in range(128):
        row, chunk = divmod(c, 8)
        off = want_offset(kind, row, 16 * chunk)
        assert offs[c] & 0xFFFF == off, c
        assert offs[c] >> 16 == 16 * chunk, "byte_of inverts offset within the row"
        assert torch.equal(image[off // 4: off // 4 + 4], data[4 * c: 4 * c + 4]), c
    assert torch.equal(back, data), "reads at logical offsets see the logical tile"
    if kind != "linear":
        assert not torch.equal(image, data)


def test_b128_read(mod):
    data = torch.arange(512, dtype=torch.int32) ^ 0x5A5A
    out = torch.zeros(256, dtype=torch.int32)
    mod.launch("t_lds_b128", grid=(1, 1, 1), block=(64, 1, 1), args=[data, out])
    chunk = (torch.arange(64) * 5) % 128
    want = data.view(128, 4)[chunk].flatten()
    assert torch.equal(out, want)
