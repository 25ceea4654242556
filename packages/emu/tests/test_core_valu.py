"""Per-instruction semantics through inline asm: each case is one instruction applied to 64 lanes of
operands loaded from memory, compared with a reference computed here from the ISA definition
(integer/float edge cases: NaN, Inf, -0, denormals, saturation, carries, lane patterns)."""
from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import moonmath_emu as emu

F32 = lambda x: struct.unpack("<I", struct.pack("<f", x))[0]  # noqa: E731
U2F = lambda u: struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]  # noqa: E731
NAN, QNAN, SNAN, INF = 0x7FC00000, 0x7FC00000, 0x7F800001, 0x7F800000
NINF, NZERO, DEN, NDEN = 0xFF800000, 0x80000000, 0x00000001, 0x80400000

FVALS = [F32(1.5), F32(-2.25), 0, NZERO, INF, NINF, QNAN, DEN, NDEN, F32(3e38), F32(-1e-30), F32(0.1),
         F32(7.0), F32(-0.5), F32(2.0 ** -126), F32(65504.0), F32(1e10), F32(-3e9), F32(255.5), F32(-1.0)]
IVALS = [0, 1, 2, 31, 32, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x12345678, 0xDEADBEEF, 5, 17, 0x80, 0xFF00FF00,
         0x0F0F0F0F, 3, 0xFFFF, 0x10000, 100, 0xFFFFFFFE]

HEADER = """
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32;
typedef unsigned long long u64;
#define T __builtin_amdgcn_workitem_id_x()
"""


def lanes(vals, n=64, seed=0):
    rng = np.random.default_rng(seed)
    v = np.array([vals[i % len(vals)] for i in range(n)], dtype=np.uint64)
    return v, rng


def arr(vals, seed):
    v = np.array([vals[(i * 7 + seed * 3) % len(vals)] & 0xFFFFFFFF for i in range(64)], dtype=np.uint32)
    return v


# ---------------------------------------------------------------- references (ISA semantics)
def _dot(a, b, c, eb, sgn):
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        acc = (z - (1 << 32) if sgn and z >> 31 else z)
        for i in range(32 // eb):
            p, q = (x >> (eb * i)) & ((1 << eb) - 1), (y >> (eb * i)) & ((1 << eb) - 1)
            if sgn:
                p -= (p >> (eb - 1)) << eb
                q -= (q >> (eb - 1)) << eb
            acc += p * q
        out.append(acc & 0xFFFFFFFF)
    return np.array(out, dtype=np.uint32)


def _s16(v):
    return v - 0x10000 if v & 0x8000 else v


def f(u):
    return np.frombuffer(np.asarray(u, dtype=np.uint32).tobytes(), dtype=np.float32)


def u(x):
    return np.frombuffer(np.asarray(x, dtype=np.float32).tobytes(), dtype=np.uint32)


def isnan(a):
    return ((a & 0x7F800000) == 0x7F800000) & ((a & 0x7FFFFF) != 0)


def ieee_max(a, b):
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        if isnan(np.uint32(x)) and (x & 0x400000) == 0:
            out.append(x | 0x400000)
        elif isnan(np.uint32(y)) and (y & 0x400000) == 0:
            out.append(y | 0x400000)
        elif isnan(np.uint32(x)):
            out.append(y)
        elif isnan(np.uint32(y)):
            out.append(x)
        else:
            fx, fy = U2F(x), U2F(y)
            if fx == 0 and fy == 0:
                out.append(y if x & 0x80000000 else x)
            else:
                out.append(x if fx >= fy else y)
    return np.array(out, dtype=np.uint32)


def ieee_min(a, b):
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        if isnan(np.uint32(x)) and (x & 0x400000) == 0:
            out.append(x | 0x400000)
        elif isnan(np.uint32(y)) and (y & 0x400000) == 0:
            out.append(y | 0x400000)
        elif isnan(np.uint32(x)):
            out.append(y)
        elif isnan(np.uint32(y)):
            out.append(x)
        else:
            fx, fy = U2F(x), U2F(y)
            if fx == 0 and fy == 0:
                out.append(x if x & 0x80000000 else y)
            else:
                out.append(x if fx <= fy else y)
    return np.array(out, dtype=np.uint32)


def cvt_i32(a):
    out = []
    for x in f(a).tolist():
        if math.isnan(x):
            out.append(0)
        elif math.isinf(x):
            out.append((2 ** 31 - 1) if x > 0 else 0x80000000)
        else:
            out.append(int(max(-2 ** 31, min(2 ** 31 - 1, math.trunc(x)))) & 0xFFFFFFFF)
    return np.array(out, dtype=np.uint32)


def cvt_u32(a):
    out = []
    for x in f(a).tolist():
        out.append(0 if math.isnan(x) else (2 ** 32 - 1 if x == math.inf else 0 if x == -math.inf else int(max(0, min(2 ** 32 - 1, math.trunc(x))))))
    return np.array(out, dtype=np.uint32)


def f2h(a):
    return np.frombuffer(f(a).astype(np.float16).tobytes(), dtype=np.uint16).astype(np.uint32)


def bfe_u(a, o, w):
    o, w = o & 31, w & 31
    return np.where(w == 0, 0, (a >> o) & ((np.uint64(1) << w.astype(np.uint64)) - 1).astype(np.uint32)).astype(np.uint32)


def bfe_i(a, o, w):
    out = []
    for x, oo, ww in zip(a.tolist(), (o & 31).tolist(), (w & 31).tolist()):
        if ww == 0:
            out.append(0)
            continue
        t = (x >> oo) & ((1 << ww) - 1)
        if t >> (ww - 1):
            t -= 1 << ww
        out.append(t & 0xFFFFFFFF)
    return np.array(out, dtype=np.uint32)


def perm(a, b, s):
    out = []
    for x, y, sel in zip(a.tolist(), b.tolist(), s.tolist()):
        data = (x << 32) | y
        r = 0
        for k in range(4):
            sb = (sel >> (8 * k)) & 0xFF
            if sb >= 13:
                v = 0xFF
            elif sb == 12:
                v = 0
            elif sb >= 8:
                v = 0xFF if (data >> (((sb - 8) * 2 + 1) * 8 + 7)) & 1 else 0
            else:
                v = (data >> (8 * sb)) & 0xFF
            r |= v << (8 * k)
        out.append(r)
    return np.array(out, dtype=np.uint32)


def cls(a, m):
    out = []
    for x, mm in zip(a.tolist(), m.tolist()):
        s = x >> 31
        e = (x >> 23) & 0xFF
        man = x & 0x7FFFFF
        if e == 255 and man and not (man & 0x400000):
            bit = 0
        elif e == 255 and man:
            bit = 1
        elif e == 255:
            bit = 2 if s else 9
        elif e:
            bit = 3 if s else 8
        elif man:
            bit = 4 if s else 7
        else:
            bit = 5 if s else 6
        out.append((mm >> bit) & 1)
    return sum(b << i for i, b in enumerate(out))


# (name, asm, operand values per source, reference, kind)  kind: "v" vector result, "mask" SGPR pair
CASES = [
    ("add_f32", "v_add_f32 %0, %1, %2", [FVALS, FVALS], lambda a, b: u(f(a) + f(b))),
    ("mul_f32", "v_mul_f32 %0, %1, %2", [FVALS, FVALS], lambda a, b: u(f(a) * f(b))),
    ("sub_f32_e64_neg_abs", "v_sub_f32_e64 %0, -%1, |%2|", [FVALS, FVALS], lambda a, b: u(-f(a) - np.abs(f(b)))),
    ("max_f32", "v_max_f32 %0, %1, %2", [FVALS + [SNAN], FVALS], ieee_max),
    ("min_f32", "v_min_f32 %0, %1, %2", [FVALS, FVALS + [SNAN]], ieee_min),
    ("cvt_i32_f32", "v_cvt_i32_f32 %0, %1", [FVALS], cvt_i32),
    ("cvt_u32_f32", "v_cvt_u32_f32 %0, %1", [FVALS], cvt_u32),
    ("cvt_f32_i32", "v_cvt_f32_i32 %0, %1", [IVALS], lambda a: u(a.view(np.int32).astype(np.float32))),
    # the ISA's table: the signed low nibble in sixteenths, the upper 28 bits ignored (0x8 -> -0.5, 0x7 -> 0.4375)
    ("cvt_off_f32_i4", "v_cvt_off_f32_i4 %0, %1", [IVALS + list(range(16))],
     lambda a: u((((a.astype(np.int64) & 0xF) ^ 8) - 8).astype(np.float32) / np.float32(16))),
    ("cvt_f16_f32", "v_cvt_f16_f32 %0, %1", [FVALS], f2h),
    ("cvt_f32_f16", "v_cvt_f32_f16 %0, %1", [[0x3C00, 0x7BFF, 0xFC00, 0x0001, 0x8000, 0x7E00, 0x3555, 0xC900]],
     lambda a: u(np.frombuffer((a & 0xFFFF).astype(np.uint16).tobytes(), dtype=np.float16).astype(np.float32))),
    ("trunc_f32", "v_trunc_f32 %0, %1", [FVALS], lambda a: u(np.trunc(f(a)))),
    ("floor_f32", "v_floor_f32 %0, %1", [FVALS], lambda a: u(np.floor(f(a)))),
    ("rndne_f32", "v_rndne_f32 %0, %1", [FVALS + [F32(2.5), F32(3.5), F32(-2.5)]], lambda a: u(np.rint(f(a)))),
    ("bfe_u32", "v_bfe_u32 %0, %1, %2, %3", [IVALS, [0, 4, 8, 31, 33], [0, 1, 8, 16, 31, 32]], bfe_u),
    ("bfe_i32", "v_bfe_i32 %0, %1, %2, %3", [IVALS, [0, 4, 8, 31, 33], [0, 1, 8, 16, 31, 32]], bfe_i),
    ("alignbit", "v_alignbit_b32 %0, %1, %2, %3", [IVALS, IVALS[::-1], [0, 1, 7, 31, 32, 45]],
     lambda a, b, c: ((((a.astype(np.uint64) << 32) | b) >> (c & 31).astype(np.uint64)) & 0xFFFFFFFF).astype(np.uint32)),
    ("perm", "v_perm_b32 %0, %1, %2, %3", [IVALS, IVALS[::-1], [0x00010203, 0x07060504, 0x0C0D0E0F, 0x08090A0B, 0x05040100]], perm),
    ("lshl_add", "v_lshl_add_u32 %0, %1, %2, %3", [IVALS, [0, 1, 4, 31], IVALS], lambda a, b, c: ((a << (b & 31)) + c).astype(np.uint32)),
    ("add3", "v_add3_u32 %0, %1, %2, %3", [IVALS, IVALS[3:], IVALS[5:]], lambda a, b, c: (a + b + c).astype(np.uint32)),
    ("mul_hi_u32", "v_mul_hi_u32 %0, %1, %2", [IVALS, IVALS[::-1]], lambda a, b: ((a.astype(np.uint64) * b) >> 32).astype(np.uint32)),
    ("mul_lo_u32", "v_mul_lo_u32 %0, %1, %2", [IVALS, IVALS[::-1]], lambda a, b: (a.astype(np.uint64) * b & 0xFFFFFFFF).astype(np.uint32)),
    ("med3_i32", "v_med3_i32 %0, %1, %2, %3", [IVALS, IVALS[4:], IVALS[9:]],
     lambda a, b, c: np.median(np.stack([a.view(np.int32), b.view(np.int32), c.view(np.int32)]), axis=0).astype(np.int32).view(np.uint32)),
    ("med3_f32_finite", "v_med3_f32 %0, %1, %2, %3", [[F32(x) for x in (1, -2, 3, 0.5, 7, -9)], [F32(x) for x in (4, 5, -6, 2)], [F32(x) for x in (0, 10, -1)]],
     lambda a, b, c: u(np.median(np.stack([f(a), f(b), f(c)]), axis=0).astype(np.float32))),
    ("ffbh_u32", "v_ffbh_u32 %0, %1", [IVALS], lambda a: np.array([31 - x.bit_length() + 1 if x else 0xFFFFFFFF for x in a.tolist()], dtype=np.uint32)),
    ("ffbl_b32", "v_ffbl_b32 %0, %1", [IVALS], lambda a: np.array([(x & -x).bit_length() - 1 if x else 0xFFFFFFFF for x in a.tolist()], dtype=np.uint32)),
    ("bfrev", "v_bfrev_b32 %0, %1", [IVALS], lambda a: np.array([int(f"{x:032b}"[::-1], 2) for x in a.tolist()], dtype=np.uint32)),
    ("ldexp_f32", "v_ldexp_f32 %0, %1, %2", [FVALS, [0, 1, 0xFFFFFFFF, 10, (-140) & 0xFFFFFFFF, 200]], lambda a, b: u(np.ldexp(f(a).astype(np.float64), b.view(np.int32)).astype(np.float32))),
    ("cvt_pkrtz", "v_cvt_pkrtz_f16_f32 %0, %1, %2", [[F32(x) for x in (1.0, 1.0009765625 + 2 ** -12, -65520.0, 0.1)], [F32(x) for x in (2.0, -3.0001)]], None),
    ("xad", "v_xad_u32 %0, %1, %2, %3", [IVALS, IVALS[::-1], IVALS[2:]], lambda a, b, c: ((a ^ b) + c).astype(np.uint32)),
    ("med3_i16", "v_med3_i16 %0, %1, %2, %3", [IVALS, IVALS[4:], IVALS[9:]],
     lambda a, b, c: (np.median(np.stack([(a & 0xFFFF).astype(np.uint16).view(np.int16), (b & 0xFFFF).astype(np.uint16).view(np.int16),
                                          (c & 0xFFFF).astype(np.uint16).view(np.int16)]), axis=0).astype(np.int16).view(np.uint16)).astype(np.uint32)),
    ("max3_u16", "v_max3_u16 %0, %1, %2, %3", [IVALS, IVALS[4:], IVALS[9:]], lambda a, b, c: np.maximum(np.maximum(a & 0xFFFF, b & 0xFFFF), c & 0xFFFF).astype(np.uint32)),
    ("mad_u16", "v_mad_u16 %0, %1, %2, %3", [IVALS, IVALS[4:], IVALS[9:]], lambda a, b, c: (((a & 0xFFFF) * (b & 0xFFFF) + (c & 0xFFFF)) & 0xFFFF).astype(np.uint32)),
    ("dot4_i32_i8", "v_dot4_i32_i8 %0, %1, %2, %3", [IVALS, IVALS[::-1], IVALS[3:]], lambda a, b, c: _dot(a, b, c, 8, True)),
    ("dot4_u32_u8", "v_dot4_u32_u8 %0, %1, %2, %3", [IVALS, IVALS[::-1], IVALS[3:]], lambda a, b, c: _dot(a, b, c, 8, False)),
    ("dot2_i32_i16", "v_dot2_i32_i16 %0, %1, %2, %3", [IVALS, IVALS[::-1], IVALS[3:]], lambda a, b, c: _dot(a, b, c, 16, True)),
    ("dot8_u32_u4", "v_dot8_u32_u4 %0, %1, %2, %3", [IVALS, IVALS[::-1], IVALS[3:]], lambda a, b, c: _dot(a, b, c, 4, False)),
    ("sat_pk_u8_i16", "v_sat_pk_u8_i16 %0, %1", [[0x00FF0100, 0x7FFF8000, 0x00050064, 0xFFFF0080]],
     lambda a: np.array([min(max(_s16(x & 0xFFFF), 0), 255) | (min(max(_s16(x >> 16), 0), 255) << 8) for x in a.tolist()], dtype=np.uint32)),
]

MASK_CASES = [
    ("cmp_class", "v_cmp_class_f32_e64 %0, %1, %2", [FVALS + [SNAN], [0x3FF, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 0x1F0]], cls),
    ("cmp_lt_f32", "v_cmp_lt_f32_e64 %0, %1, %2", [FVALS, FVALS[::-1]],
     lambda a, b: sum(int(U2F(x) < U2F(y)) << i for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())))),
    ("cmp_neq_f32", "v_cmp_neq_f32_e64 %0, %1, %2", [FVALS, FVALS[::-1]],
     lambda a, b: sum(int(not (U2F(x) == U2F(y))) << i for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())))),
    ("cmp_gt_i32", "v_cmp_gt_i32_e64 %0, %1, %2", [IVALS, IVALS[::-1]],
     lambda a, b: sum(int(x > y) << i for i, (x, y) in enumerate(zip(a.view(np.int32).tolist(), b.view(np.int32).tolist())))),
]


def _kernel(i, asm, nin, kind):
    ins = ", ".join(f'"v"(s{j}[T])' for j in range(nin))
    params = ", ".join(f"const u32* s{j}" for j in range(nin))
    if kind == "v":
        return (f"KERNEL void k{i}({params}, u32* d) {{ u32 r; asm volatile(\"{asm}\" : \"=v\"(r) : {ins}); d[T] = r; }}\n")
    return (f"KERNEL void k{i}({params}, u64* d) {{ u64 r; asm volatile(\"{asm}\" : \"=s\"(r) : {ins}); d[T] = r; }}\n")


def _source():
    src = HEADER
    for i, (_, asm, vals, _ref) in enumerate(CASES):
        src += _kernel(i, asm, len(vals), "v")
    for i, (_, asm, vals, _ref) in enumerate(MASK_CASES):
        src += _kernel(100 + i, asm, len(vals), "m")
    # carries through VCC: 64-bit add from 32-bit halves
    src += ('KERNEL void addc(const u32* a, const u32* b, const u32* c, const u32* e, u32* lo, u32* hi) {'
            ' u32 l, h; asm volatile("v_add_co_u32 %0, vcc, %2, %3\\n\\tv_addc_co_u32 %1, vcc, %4, %5, vcc" '
            ': "=&v"(l), "=&v"(h) : "v"(a[T]), "v"(b[T]), "v"(c[T]), "v"(e[T]) : "vcc"); lo[T] = l; hi[T] = h; }\n')
    # scalar ALU: carry chain through SCC, bit ops
    src += ('KERNEL void salu(u32 a, u32 b, u32 c, u32 e, u32* out) { u32 r0, r1, r2, r3, r4, r5;'
            ' asm volatile("s_add_u32 %0, %6, %7\\n\\ts_addc_u32 %1, %8, %9\\n\\ts_bfe_u32 %2, %6, 0x80004\\n'
            '\\ts_ff1_i32_b32 %3, %7\\n\\ts_flbit_i32_b32 %4, %8\\n\\ts_lshl2_add_u32 %5, %9, %6"'
            ' : "=&s"(r0), "=&s"(r1), "=&s"(r2), "=&s"(r3), "=&s"(r4), "=&s"(r5) : "s"(a), "s"(b), "s"(c), "s"(e) : "scc");'
            ' if (T == 0) { out[0] = r0; out[1] = r1; out[2] = r2; out[3] = r3; out[4] = r4; out[5] = r5; } }\n')
    # lane ops: mbcnt, readlane, writelane, DPP, SDWA
    src += ('KERNEL void lane_ops(const u32* a, u32* out) { u32 t = T; u32 v = a[t]; u32 r0, r1, r2, r3, r4, r5;'
            ' asm volatile("v_mbcnt_lo_u32_b32 %0, -1, 0\\n\\tv_mbcnt_hi_u32_b32 %0, -1, %0" : "=v"(r0));'
            ' u32 s; asm volatile("v_readlane_b32 %0, %1, 37" : "=s"(s) : "v"(v)); r1 = s;'
            ' r2 = v; asm volatile("v_writelane_b32 %0, %1, 5" : "+v"(r2) : "s"(s));'
            ' asm volatile("v_mov_b32_dpp %0, %1 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf" : "=v"(r3) : "v"(v));'
            ' r4 = 0xAAAAAAAA; asm volatile("s_nop 1\\n\\tv_mov_b32_dpp %0, %1 row_shr:3 row_mask:0xf bank_mask:0xf" : "+v"(r4) : "v"(v));'
            ' r5 = 0x11223344; asm volatile("v_add_u32_sdwa %0, %1, %2 dst_sel:BYTE_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_2 src1_sel:WORD_1"'
            ' : "+v"(r5) : "v"(v), "v"(v));'
            ' out[t * 6 + 0] = r0; out[t * 6 + 1] = r1; out[t * 6 + 2] = r2; out[t * 6 + 3] = r3; out[t * 6 + 4] = r4; out[t * 6 + 5] = r5; }\n')
    # SDWA sign extension of an integer operand (sext(...)): as the compiler emits v_lshlrev_b32_sdwa with a
    # sign-extended WORD_0 shift source, and of a byte source
    src += ('KERNEL void sdwa_sext(const u32* a, const u32* b, u32* out) { u32 t = T; u32 v = a[t], w = b[t]; u32 r0, r1;'
            ' asm volatile("v_lshlrev_b32_sdwa %0, %2, sext(%3) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD'
            ' src1_sel:WORD_0\\n\\tv_add_u32_sdwa %1, sext(%2), %3 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_1'
            ' src1_sel:DWORD" : "=&v"(r0), "=&v"(r1) : "v"(w), "v"(v));'
            ' out[2 * t] = r0; out[2 * t + 1] = r1; }\n')
    src += ('KERNEL void dpp_bcast(const u32* a, u32* out) { u32 t = T; u32 v = a[t]; u32 r = 0xEEEEEEEE, q = 0xDDDDDDDD;'
            ' asm volatile("s_nop 1\\n\\tv_mov_b32_dpp %0, %2 row_bcast:15 row_mask:0xa bank_mask:0xf\\n\\t'
            'v_mov_b32_dpp %1, %2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:0" : "+v"(r), "+v"(q) : "v"(v));'
            ' out[2 * t] = r; out[2 * t + 1] = q; }\n')
    # row_newbcast:n (gfx90a+): every lane reads lane n of its row; as AITER's MLA kernels use it, on a multiply
    src += ('KERNEL void dpp_newbcast(const u32* a, const u32* b, u32* out) { u32 t = T; u32 v = a[t], w = b[t]; u32 r, q;'
            ' asm volatile("s_nop 1\\n\\tv_mov_b32_dpp %0, %2 row_newbcast:5 row_mask:0xf bank_mask:0xf\\n\\t'
            'v_mul_u32_u24_dpp %1, %2, %3 row_newbcast:15 row_mask:0xf bank_mask:0xf" : "=&v"(r), "=&v"(q) : "v"(v), "v"(w));'
            ' out[2 * t] = r; out[2 * t + 1] = q; }\n')
    return src


@pytest.fixture
def valu(build, arch):
    return emu.Module(build(_source(), arch))


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c[0] for c in CASES])
def test_vector_op(valu, i):
    name, asm, vals, ref = CASES[i]
    srcs = [arr(v, j) for j, v in enumerate(vals)]
    d = np.zeros(64, dtype=np.uint32)
    valu.launch(f"k{i}", grid=1, block=64, args=[*srcs, d])
    if name == "cvt_pkrtz":
        def rtz16(x):
            h = np.float16(x)
            if abs(float(h)) > abs(x) and math.isfinite(x):
                h = np.nextafter(h, np.float16(0))
            return int(np.frombuffer(np.float16(h).tobytes(), dtype=np.uint16)[0])
        want = np.array([rtz16(U2F(a)) | (rtz16(U2F(b)) << 16) for a, b in zip(srcs[0].tolist(), srcs[1].tolist())], dtype=np.uint32)
    else:
        want = ref(*srcs)
    # NaN results: any quiet NaN with the right sign class is accepted only where the ISA leaves the payload open
    got = d.copy()
    both_nan = isnan(got) & isnan(np.asarray(want, dtype=np.uint32))
    got[both_nan] = np.asarray(want, dtype=np.uint32)[both_nan]
    assert np.array_equal(got, np.asarray(want, dtype=np.uint32)), (name, [hex(x) for x in d[:20]], [hex(x) for x in np.asarray(want)[:20]])


@pytest.mark.parametrize("i", range(len(MASK_CASES)), ids=[c[0] for c in MASK_CASES])
def test_compare_mask(valu, i):
    name, asm, vals, ref = MASK_CASES[i]
    srcs = [arr(v, j) for j, v in enumerate(vals)]
    d = np.zeros(64, dtype=np.uint64)
    valu.launch(f"k{100 + i}", grid=1, block=64, args=[*srcs, d])
    assert int(d[0]) == ref(*srcs), (name, hex(int(d[0])), hex(ref(*srcs)))
    assert (d == d[0]).all()


def test_vcc_carry_chain(valu):
    rng = np.random.default_rng(1)
    a, b, c, e = (rng.integers(0, 2 ** 32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(4))
    a[:8] = 0xFFFFFFFF
    b[:8] = np.arange(8)
    lo, hi = np.zeros(64, np.uint32), np.zeros(64, np.uint32)
    valu.launch("addc", grid=1, block=64, args=[a, b, c, e, lo, hi])
    full = (a.astype(np.uint64) + b) + ((c.astype(np.uint64) + e) << 32)
    assert np.array_equal(lo, (full & 0xFFFFFFFF).astype(np.uint32))
    assert np.array_equal(hi, ((full >> 32) & 0xFFFFFFFF).astype(np.uint32))


@pytest.mark.parametrize("a,b,c,e", [(0xFFFFFFFF, 1, 5, 6), (0x12345678, 0x100, 0x80000000, 0x80000000), (7, 0, 0xFFFFFFFF, 0)])
def test_scalar_alu(valu, a, b, c, e):
    out = np.zeros(8, dtype=np.uint32)
    valu.launch("salu", grid=1, block=64, args=[a, b, c, e, out])
    s = a + b
    carry = s >> 32
    ff1 = (b & -b).bit_length() - 1 if b else 0xFFFFFFFF
    flbit = 32 - c.bit_length() if c else 0xFFFFFFFF
    assert out[:6].tolist() == [s & 0xFFFFFFFF, (c + e + carry) & 0xFFFFFFFF, (a >> 4) & 0xFF, ff1, flbit,
                                ((e << 2) + a) & 0xFFFFFFFF]


def test_lane_ops(valu):
    a = (np.arange(64, dtype=np.uint32) * 0x01020304 + 0x0A0B0C0D).astype(np.uint32)
    out = np.zeros(64 * 6, dtype=np.uint32)
    valu.launch("lane_ops", grid=1, block=64, args=[a, out])
    o = out.reshape(64, 6)
    lane = np.arange(64)
    assert np.array_equal(o[:, 0], lane)                         # mbcnt = lane id
    assert (o[:, 1] == a[37]).all()                              # readlane 37
    want2 = a.copy()
    want2[5] = a[37]
    assert np.array_equal(o[:, 2], want2)                        # writelane 5
    assert np.array_equal(o[:, 3], a[(lane & ~3) | (3 - (lane & 3))])  # quad_perm [3,2,1,0]
    shr = np.where((lane & 15) >= 3, a[np.maximum(lane - 3, 0)], 0xAAAAAAAA)  # row_shr:3, no bound_ctrl: lane keeps old
    assert np.array_equal(o[:, 4], shr.astype(np.uint32))
    s0 = (a >> 16) & 0xFF
    s1 = (a >> 16) & 0xFFFF
    byte = ((s0 + s1) & 0xFF).astype(np.uint32)
    assert np.array_equal(o[:, 5], ((0x11223344 & ~0xFF00) | (byte << 8)).astype(np.uint32))  # SDWA preserve


def test_sdwa_sext(valu):
    a = (np.arange(64, dtype=np.uint64) * 0x9E3779B1 % (1 << 32)).astype(np.uint32)  # bit 15 / bit 15 of byte 1 mixed
    b = (np.arange(64, dtype=np.uint32) * 0x01010101 + 0x00008000 * (np.arange(64) & 1)).astype(np.uint32)
    out = np.zeros(128, dtype=np.uint32)
    valu.launch("sdwa_sext", grid=1, block=64, args=[a, b, out])
    o = out.reshape(64, 2)
    w16 = (a & 0xFFFF).astype(np.int64)
    w16 = np.where(w16 >= 0x8000, w16 - 0x10000, w16)
    want0 = ((w16 << (b & 31).astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)  # lshlrev: sext(word 0) << b
    byte1 = ((b >> 8) & 0xFF).astype(np.int64)
    byte1 = np.where(byte1 >= 0x80, byte1 - 0x100, byte1)
    want1 = ((byte1 + a.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)  # sext(byte 1 of b) + a
    assert np.array_equal(o[:, 0], want0)
    assert np.array_equal(o[:, 1], want1)


def test_dpp_row_bcast_and_bound_ctrl(valu):
    a = np.arange(64, dtype=np.uint32) + 100
    out = np.zeros(128, dtype=np.uint32)
    valu.launch("dpp_bcast", grid=1, block=64, args=[a, out])
    o = out.reshape(64, 2)
    lane = np.arange(64)
    row = lane // 16
    # row_bcast:15 with row_mask 0xa: rows 1 and 3 get lane 15 of the previous row; rows 0, 2 untouched
    want = np.where((row == 1) | (row == 3), a[np.maximum(row * 16 - 1, 0)], 0xEEEEEEEE)
    assert np.array_equal(o[:, 0], want.astype(np.uint32))
    # row_shr:1 bound_ctrl:0 -> lane 0 of each row reads 0
    want = np.where(lane % 16 == 0, 0, a[np.maximum(lane - 1, 0)])
    assert np.array_equal(o[:, 1], want.astype(np.uint32))



MODE_SRC = HEADER + r"""
// MODE register: f32 round toward zero / toward -inf via s_setreg, then f32 denormal flushing
KERNEL void round_modes(const u32* a, const u32* b, u32* out) {
  u32 x = a[T], y = b[T], r0, r1, r2, r3;
  asm volatile("v_add_f32 %0, %1, %2" : "=v"(r0) : "v"(x), "v"(y));
  asm volatile("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 2), 3\n\tv_add_f32 %0, %2, %3\n\t"
               "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 2), 2\n\tv_add_f32 %1, %2, %3\n\t"
               "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 2), 0" : "=&v"(r1), "=&v"(r2) : "v"(x), "v"(y));
  asm volatile("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 0\n\tv_mul_f32 %0, %1, %2\n\t"
               "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3" : "=&v"(r3) : "v"(x), "v"(y));
  out[4 * T] = r0; out[4 * T + 1] = r1; out[4 * T + 2] = r2; out[4 * T + 3] = r3;
}
"""


def test_mode_register_rounding_and_denormals(build, arch):
    m = emu.Module(build(MODE_SRC, arch))
    rng = np.random.default_rng(3)
    x = rng.standard_normal(64).astype(np.float32)
    y = (rng.standard_normal(64) * 1e-4).astype(np.float32)
    x[:4] = [1e-20, -1e-20, 3e-39, 1.0]
    y[:4] = [1e-20, 1e-20, 2.0, 2.0 ** -30]
    out = np.zeros(256, dtype=np.uint32)
    m.launch("round_modes", grid=1, block=64, args=[x.view(np.uint32), y.view(np.uint32), out])
    o = out.reshape(64, 4).view(np.float32)
    exact = x.astype(np.float64) + y.astype(np.float64)          # exact for these magnitudes
    rne = exact.astype(np.float32)
    rtz = np.where(np.abs(rne.astype(np.float64)) > np.abs(exact), np.nextafter(rne, np.float32(0)), rne)
    rmi = np.where(rne.astype(np.float64) > exact, np.nextafter(rne, np.float32(-np.inf)), rne)
    assert np.array_equal(o[:, 0], rne) and np.array_equal(o[:, 1], rtz) and np.array_equal(o[:, 2], rmi)
    prod = (x.astype(np.float64) * y.astype(np.float64)).astype(np.float32)
    tiny = np.finfo(np.float32).tiny
    xin = np.where(np.abs(x) < tiny, np.float32(0) * np.sign(x), x)  # denormal inputs flushed
    flushed = (xin.astype(np.float64) * y.astype(np.float64)).astype(np.float32)
    flushed = np.where(np.abs(flushed) < tiny, np.copysign(np.float32(0), flushed), flushed)
    assert np.array_equal(o[:, 3], flushed) and o[0, 3] == 0 and o[2, 3] == 0 and prod[2] != 0


def test_dpp_row_newbcast(valu):
    a = (np.arange(64, dtype=np.uint32) * 7 + 3) & 0xFFFFFF
    b = np.arange(64, dtype=np.uint32) + 1000
    out = np.zeros(128, dtype=np.uint32)
    valu.launch("dpp_newbcast", grid=1, block=64, args=[a, b, out])
    o = out.reshape(64, 2)
    row = np.arange(64) // 16
    assert np.array_equal(o[:, 0], a[row * 16 + 5])
    assert np.array_equal(o[:, 1], (a[row * 16 + 15] * b).astype(np.uint32))  # src0 broadcast, src1 per lane
    assert any("row_newbcast:5" in t for _, _, t in valu.disassemble())


def test_dpp_row_newbcast_reassembles(build, arch):
    from test_core_decoder import roundtrip

    src = HEADER + "\n".join(ln for ln in _source().split("\n") if "dpp_newbcast" in ln or ln.startswith("#") or
                             ln.startswith("typedef"))
    bad = roundtrip(build(src, arch))
    assert not bad, "\n".join(bad[:20])
