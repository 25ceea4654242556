"""By-value struct kernel arguments: the caller lays out the struct's bytes ("bytes" launch argument, an
object with __kernarg__), the emulator copies them into the kernarg segment at the argument's offset and
maps the buffers its pointer fields address (memory sanitizer)."""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _emu_build import compile_hip  # noqa: E402

import moonmath_emu as emu  # noqa: E402

SRC = r"""
#define KERNEL extern "C" __attribute__((global))
struct Args {
  unsigned long long out;   // float*
  unsigned long long in;    // const float*
  unsigned int n;
  float scale;
};
KERNEL void scale_copy(const Args a, unsigned int tail) {
  float* out = reinterpret_cast<float*>(a.out);
  const float* in = reinterpret_cast<const float*>(a.in);
  unsigned int i = __builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x();
  if (i < a.n) out[i] = in[i] * a.scale + (float)tail;
}
"""


class Blob:
    def __init__(self, data, buffers):
        self.data, self.buffers = data, buffers

    def __kernarg__(self):
        return self.data, self.buffers


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_struct_argument(arch):
    mod = emu.Module(compile_hip(SRC, arch))
    info = mod.kernel_info("scale_copy")
    args = [a for a in info["args"] if not a["value_kind"].startswith("hidden")]
    assert [(a["size"], a["value_kind"]) for a in args] == [(24, "by_value"), (4, "by_value")]
    n = 100
    x = torch.arange(n, dtype=torch.float32)
    y = torch.zeros(n)
    blob = struct.pack("<QQIf", y.data_ptr(), x.data_ptr(), n, 0.5)
    mod.launch("scale_copy", grid=2, block=64, args=[Blob(blob, [y, x]), 3])
    assert torch.equal(y, x * 0.5 + 3)
    with pytest.raises(emu.EmuError, match="24 bytes"):  # the struct must be the argument's size
        mod.launch("scale_copy", grid=2, block=64, args=[Blob(blob[:20], [y, x]), 3])
    # a pointer field whose buffer is not passed is not mapped: the sanitizer refuses the access
    with pytest.raises(emu.MemoryViolation):
        mod.launch("scale_copy", grid=2, block=64, args=[Blob(blob, [y]), 3])
