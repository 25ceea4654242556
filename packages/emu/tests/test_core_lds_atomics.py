"""LDS atomics (32/64-bit integer ops, compare-and-swap loops) against a sequential model."""
import numpy as np
from _emu_build import kernel_source

import moonmath_emu as emu


def test_lds_atomics(build, arch):
    m = emu.Module(build(kernel_source("lds_atomics.hip"), arch))
    names = emu.opcodes_in(build(kernel_source("lds_atomics.hip"), arch))
    assert any(n.startswith("ds_cmpst") for n in names) and any("_u64" in n or "_b64" in n for n in names if n.startswith("ds_"))
    rng = np.random.default_rng(4)
    x = rng.integers(-1000, 1000, 64).astype(np.int32)
    out = np.zeros(67, np.int32)
    out64 = np.zeros(2, np.uint64)
    outf = np.zeros(1, np.float32)
    m.launch("lds_atomics", grid=1, block=64, args=[x, out, out64, outf])
    assert out[64] == x.sum() and out[65] == max(0, x.max()) and out[66] == min(0, x.min())
    # atomic min returns the value before each lane's update; the emulator applies lanes in lane order
    # (hardware leaves the order within a wave unspecified)
    prev, mins = 0, []
    for v in x:
        mins.append(prev)
        prev = min(prev, v)
    assert out[:64].tolist() == mins
    s = sum(int(np.uint32(v)) * 0x100000001 for v in x) & (2 ** 64 - 1)
    assert int(out64[0]) == s and int(out64[1]) == (2 ** 64 - 1)
    assert outf[0] == np.float32(x.max() * 0.5)
