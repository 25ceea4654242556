"""gfx950 transposing LDS reads (ds_read_b64_tr_b16/_b8/_b4, ds_read_b96_tr_b6)."""
import numpy as np
import pytest

import moonmath_emu as emu

SRC = r"""
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32;
typedef unsigned long long u64;
#define T __builtin_amdgcn_workitem_id_x()
#define LA(x) ((__attribute__((address_space(3))) u32*)(x))
typedef u32 u32x3 __attribute__((ext_vector_type(3)));
// every lane stages 16 bytes of `in` into LDS, then reads `rowbytes` at LDS offset perm[lane] * 16
#define TR_KERNEL(NAME, INSN, TY, CONS)                                                     \
KERNEL void NAME(const u32* in, const u32* perm, u32* out) {                                \
  __attribute__((shared)) static u32 s[256];                                                \
  u32 t = T;                                                                                \
  for (int i = 0; i < 4; i++) s[t * 4 + i] = in[t * 4 + i];                                 \
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");                                    \
  __builtin_amdgcn_s_waitcnt(0xc07f);                                                       \
  TY v;                                                                                     \
  asm volatile(INSN " %0, %1\n\ts_waitcnt lgkmcnt(0)" : CONS(v) : "v"(LA(&s[perm[t] * 4])) : "memory"); \
  for (int i = 0; i < (int)(sizeof(TY) / 4); i++) out[t * 4 + i] = ((u32*)&v)[i];           \
}
#define OUT64(v) "=v"(v)
TR_KERNEL(tr16, "ds_read_b64_tr_b16", u64, OUT64)
TR_KERNEL(tr8, "ds_read_b64_tr_b8", u64, OUT64)
TR_KERNEL(tr4, "ds_read_b64_tr_b4", u64, OUT64)
TR_KERNEL(tr6, "ds_read_b96_tr_b6", u32x3, OUT64)
"""


@pytest.fixture
def tr(build):
    return emu.Module(build(SRC, "gfx950"))


def _run(tr, name, words):
    rng = np.random.default_rng(3)
    data = rng.integers(0, 2 ** 32, 256, dtype=np.uint64).astype(np.uint32)
    perm = rng.permutation(64).astype(np.uint32)
    out = np.zeros(256, dtype=np.uint32)
    tr.launch(name, grid=1, block=64, args=[data, perm, out])
    rows = data.reshape(64, 4)[perm]          # row of lane s = the bytes at the address lane s supplied
    return rows, out.reshape(64, 4)[:, :words]


def test_tr_b16_matches_hardware_layout(tr):
    rows, got = _run(tr, "tr16", 2)
    h = rows[:, :2].copy().view(np.uint16).reshape(64, 4)   # lane s: 4 halfwords
    want = np.zeros((64, 4), np.uint16)
    for lane in range(64):
        for n in range(4):
            src = ((lane & ~15) | ((lane >> 2) & 3)) + 4 * n
            want[lane, n] = h[src, lane & 3]
    assert np.array_equal(got.copy().view(np.uint16).reshape(64, 4), want)


@pytest.mark.parametrize("name,eb,rowbytes", [("tr8", 8, 8), ("tr4", 4, 8), ("tr6", 6, 12)])
def test_tr_narrow_is_the_same_transpose_rule(tr, name, eb, rowbytes):
    rows, got = _run(tr, name, rowbytes // 4)
    E = rowbytes * 8 // eb
    R = max(1, 16 // E)

    def elems(words):
        bits = int.from_bytes(np.asarray(words, np.uint32).tobytes(), "little")
        return [(bits >> (eb * i)) & ((1 << eb) - 1) for i in range(E)]

    src_el = [elems(rows[s, :rowbytes // 4]) for s in range(64)]
    for lane in range(64):
        want = [src_el[(lane & ~15) + (R * n + ((lane & 15) // E) % R) % 16][(lane & 15) % E] for n in range(E)]
        assert elems(got[lane]) == want, (name, lane)
    # a permutation of the group's elements: nothing invented, nothing lost
    for g in range(4):
        a = sorted(x for s in range(16 * g, 16 * g + 16) for x in src_el[s])
        b = sorted(x for l in range(16 * g, 16 * g + 16) for x in elems(got[l]))
        assert a == b


def _tr_b8_readings(rows):
    """Per-lane bytes of ds_read_b64_tr_b8 under the emulator's rule and under the readings it rejects."""
    b = rows[:, :2].copy().view(np.uint8).reshape(64, 8)  # lane s supplies 8 bytes: row s of its group
    out = {k: np.zeros((64, 8), np.uint8) for k in ("emulated", "even_odd_lanes", "blocked_rows")}
    for lane in range(64):
        g, l = lane & ~15, lane & 15
        for n in range(8):
            # lanes 0-7 of a group transpose its even rows, lanes 8-15 its odd rows: byte n of lane l is
            # byte l % 8 of row 2n + l // 8 (AITER's mla_a8w8_qh16_qseqlen4 object is right only with this)
            out["emulated"][lane, n] = b[g + 2 * n + l // 8, l % 8]
            out["even_odd_lanes"][lane, n] = b[g + 2 * n + l % 2, l // 2]   # the other "two interleaved 8x8"
            out["blocked_rows"][lane, n] = b[g + n + 8 * (l // 8), l % 8]   # rows 0-7 -> lanes 0-7
    return out


def test_tr_b8_is_two_8x8_transposes_of_even_and_odd_rows(tr):
    rows, got = _run(tr, "tr8", 2)
    readings = _tr_b8_readings(rows)
    got = got.copy().view(np.uint8).reshape(64, 8)
    assert np.array_equal(got, readings["emulated"])
    for name in ("even_odd_lanes", "blocked_rows"):  # the data tells the readings apart
        assert not np.array_equal(readings[name], readings["emulated"]), name


def test_tr_is_gfx950_only(build):
    # the assembler refuses the mnemonic for gfx942, so nothing to run there; the emulator lists it for gfx950 only
    assert "ds_read_b64_tr_b16" in emu.supported_opcodes("gfx950")
    assert "ds_read_b64_tr_b16" not in emu.supported_opcodes("gfx942")
