"""VOP3 clamp on integer add/sub saturates (what clang emits for __builtin_elementwise_{add,sub}_sat)."""
import numpy as np
import pytest

import moonmath_emu as emu

SRC = r"""
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32;
typedef int i32;
#define T __builtin_amdgcn_workitem_id_x()
KERNEL void sat(const u32* a, const u32* b, u32* out) {
  u32 t = T;
  u32 x = a[t], y = b[t];
  out[4 * t + 0] = __builtin_elementwise_add_sat(x, y);
  out[4 * t + 1] = __builtin_elementwise_sub_sat(x, y);
  out[4 * t + 2] = (u32)__builtin_elementwise_add_sat((i32)x, (i32)y);
  out[4 * t + 3] = (u32)__builtin_elementwise_sub_sat((i32)x, (i32)y);
}
"""


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_saturating_integer_add_sub(build, arch):
    m = emu.Module(build(SRC, arch))
    names = emu.opcodes_in(build(SRC, arch))
    assert any(n.startswith(("v_add_u32", "v_sub_u32", "v_subrev_u32", "v_add_i32", "v_sub_i32")) for n in names)
    rng = np.random.default_rng(5)
    edge = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 5, 0x80000001], dtype=np.uint64)
    a = np.concatenate([edge, rng.integers(0, 2**32, 56, dtype=np.uint64)]).astype(np.uint32)
    b = np.concatenate([edge[::-1], rng.integers(0, 2**32, 56, dtype=np.uint64)]).astype(np.uint32)
    out = np.zeros(256, dtype=np.uint32)
    m.launch("sat", grid=(1, 1, 1), block=(64, 1, 1), args=[a, b, out])
    ua, ub = a.astype(np.int64), b.astype(np.int64)
    sa, sb = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    want = np.stack([np.clip(ua + ub, 0, 2**32 - 1), np.clip(ua - ub, 0, 2**32 - 1),
                     np.clip(sa + sb, -2**31, 2**31 - 1) & 0xFFFFFFFF, np.clip(sa - sb, -2**31, 2**31 - 1) & 0xFFFFFFFF],
                    axis=1).reshape(-1).astype(np.uint32)
    assert np.array_equal(out, want), [(i, hex(o), hex(w)) for i, (o, w) in enumerate(zip(out, want)) if o != w][:6]
