"""ISA budgets of the gfx942 MHA forward kernels, read from the built code object's metadata.

Declared budgets (docs/kernels/mha_gfx942.md):
  mha_fwd_<mode>        VGPR+AGPR <= 256 (two waves per SIMD, 512 threads: the 512-register file halved;
                        the 2 q tiles' Q operands and O accumulators are 128 of them); AGPR <= 64;
                        SGPR <= 80; LDS 65536 (two stages of one K and one V_t block); scratch 0; no spills.
  mha_fwd_split_<mode>  the same, SGPR <= 96 (the schedule entry).
  mha_merge_<mode>      VGPR <= 32, AGPR 0, SGPR <= 40; LDS 0; scratch 0.
  mha_v_transpose       VGPR <= 48, AGPR 0, SGPR <= 32; LDS 16384 (one 64 x 128 bf16 block); scratch 0.
  head dim 64 (the same kernels with d64_ before the mode, mha_v_transpose_d64): VGPR+AGPR <= 128 (Q and O
                        halve; amdgpu_waves_per_eu(4): 118-128 used, so two 8-wave workgroups share a CU), LDS 32768
                        (stages of 8 KB), V transpose LDS 8192; SGPR budgets as above.
  head dim 96 (d96_, mha_v_transpose_d96): VGPR+AGPR <= 176 (154-158 used), dense SGPR <= 88 (70-82), LDS 57344
                        (K rows padded to 256 bytes: 16 KB + a 12 KB V_t block per stage), V transpose LDS 12288.
  mha_kv_fp8[_d64]      (fp8 K/V widening) VGPR <= 64 (32), AGPR 0, SGPR <= 40; LDS 16384 (8192); scratch 0.
"""
from __future__ import annotations

import pytest

from moonmath_mha_gfx942.kernel import (
    ARCH,
    HEAD_DIMS,
    KERNELS,
    TRANSPOSE_KERNEL,
    code_object,
    kernel_names,
    transpose_kernel,
)

BUDGETS = {TRANSPOSE_KERNEL: dict(vgpr=48, agpr=0, sgpr=32, lds=16384),
           transpose_kernel(64): dict(vgpr=32, agpr=0, sgpr=32, lds=8192),
           transpose_kernel(96): dict(vgpr=48, agpr=0, sgpr=32, lds=12288),
           transpose_kernel(128, fp8=True): dict(vgpr=64, agpr=0, sgpr=40, lds=16384),
           transpose_kernel(64, fp8=True): dict(vgpr=32, agpr=0, sgpr=40, lds=8192)}
for _mode in ("rtna", "rtne", "rtz"):
    _dense, _split, _merge = kernel_names(_mode)
    BUDGETS[_dense] = dict(vgpr=256, agpr=64, sgpr=80, lds=65536, threads=512)
    BUDGETS[_split] = dict(vgpr=256, agpr=64, sgpr=96, lds=65536, threads=512)
    BUDGETS[_merge] = dict(vgpr=32, agpr=0, sgpr=40, lds=0)
    _fdense, _fsplit, _ = kernel_names(_mode, features=True)   # sinks / soft-cap variants: the same budgets
    BUDGETS[_fdense] = BUDGETS[_dense]
    BUDGETS[_fsplit] = BUDGETS[_split]
    for _d, _vgpr, _lds, _sgpr in ((64, 128, 32768, 80), (96, 176, 57344, 88)):  # d64: two workgroups per CU
        _names = kernel_names(_mode, head_dim=_d) + kernel_names(_mode, features=True, head_dim=_d)[:2]
        _dense_b = dict(BUDGETS[_dense], sgpr=_sgpr)
        _bs = (_dense_b, BUDGETS[_split], BUDGETS[_merge], _dense_b, BUDGETS[_split])
        for _i, (_name, _b) in enumerate(zip(_names, _bs)):   # the d64 feature kernels: one workgroup per CU
            _cap = _b["vgpr"] if _d == 64 and _i >= 3 else min(_b["vgpr"], _vgpr)
            BUDGETS[_name] = dict(_b, vgpr=_cap, lds=min(_b["lds"], _lds))


# The code object of each kernel (kernel.code_object: one per head dim and family; transposes and merges in the
# default one).
OBJECTS = {TRANSPOSE_KERNEL: code_object(), transpose_kernel(64): code_object(64),
           transpose_kernel(96): code_object(96),
           transpose_kernel(128, fp8=True): code_object(), transpose_kernel(64, fp8=True): code_object(64)}
for _mode in ("rtna", "rtne", "rtz"):
    for _d in HEAD_DIMS:
        OBJECTS.update(dict.fromkeys(kernel_names(_mode, head_dim=_d), code_object(_d)))
        OBJECTS.update(dict.fromkeys(kernel_names(_mode, features=True, head_dim=_d)[:2], code_object(_d, True)))
assert set(OBJECTS) == set(BUDGETS)


@pytest.mark.parametrize("kernel", list(BUDGETS))
def test_isa_budget(kernel):
    if ARCH not in KERNELS.archs_built():
        pytest.skip("this build has no gfx942 code objects")
    m = KERNELS.kernel_meta("isa budget", ARCH, OBJECTS[kernel], kernel)
    b = BUDGETS[kernel]
    assert m.vgpr <= b["vgpr"], f"{kernel}: {m.vgpr} VGPR+AGPR > {b['vgpr']}"
    assert m.agpr <= b["agpr"], f"{kernel}: {m.agpr} AGPR > {b['agpr']}"
    assert m.sgpr <= b["sgpr"], f"{kernel}: {m.sgpr} SGPR > {b['sgpr']}"
    assert m.lds <= b["lds"], f"{kernel}: {m.lds} bytes of LDS > {b['lds']}"
    assert m.scratch == 0, f"{kernel}: {m.scratch} bytes of scratch"
    assert m.raw.get(".vgpr_spill_count", 0) == 0 and m.raw.get(".sgpr_spill_count", 0) == 0
    assert m.max_workgroup_size == b.get("threads", 256)


def test_no_agpr_used_as_spill_space():
    """AGPRs in the dense kernels hold MFMA accumulators and load destinations used by MFMAs directly. VALU
    work on an AGPR-resident accumulator goes through v_accvgpr_read/write: today none (at 256 registers
    per wave everything lives in VGPRs). A jump above 64 means the compiler has started parking values in
    AGPRs (the step before spills)."""
    if ARCH not in KERNELS.archs_built():
        pytest.skip("this build has no gfx942 code objects")
    emu = pytest.importorskip("moonmath_emu")
    code = KERNELS.path("isa", ARCH, code_object()).read_bytes()
    for mode in ("rtna", "rtne", "rtz"):
        dense = kernel_names(mode)[0]
        text = [t for k, _, t in emu.disassemble(code) if k == dense]
        moves = sum(t.startswith("v_accvgpr_") for t in text)
        assert moves <= 64, f"{dense}: {moves} AGPR moves (registers are running out)"


def test_code_objects_hold_exactly_their_kernels():
    """Each (head dim, family) code object holds its kernels and no other: a kernel instantiated twice (two
    objects, two copies) or in the wrong object (run() would not find it) fails here."""
    if ARCH not in KERNELS.archs_built():
        pytest.skip("this build has no gfx942 code objects")
    emu = pytest.importorskip("moonmath_emu")
    held = {}
    for path in KERNELS.code_objects(ARCH):
        for k in {k for k, _, _ in emu.disassemble(path.read_bytes())}:
            held.setdefault(k, []).append(path.stem)
    assert {k: v for k, v in held.items() if len(v) > 1} == {}
    assert {k: v[0] for k, v in held.items()} == OBJECTS


def test_attention_kernels_keep_the_wave_priorities():
    """The two-group schedule's priorities (docs/kernels/mha_gfx942.md, Design): MFMA phases at 3, group B's
    softmax at 1 (its MFMA phase waits on it; modeled RTNE 70.5 -> 68.7 cycles per key), group A's at 0, and
    group A's first PV head-dim tile at 2, below group B's QK MFMAs deferred past the barrier (session 7). A
    kernel without s_setprio 1 has lost B's priority and runs A's softmax first whenever both are ready; one
    without 2 lets B's deferred MFMAs interleave with A's whole MFMA phase (modeled RTZ 64.8 -> 91.7)."""
    if ARCH not in KERNELS.archs_built():
        pytest.skip("this build has no gfx942 code objects")
    emu = pytest.importorskip("moonmath_emu")
    attention = [k for k in OBJECTS if k.startswith("mha_fwd")]
    assert len(attention) == 36  # 3 modes x 3 head dims x (dense, split, feature dense, feature split)
    texts: dict = {}
    for name in set(OBJECTS[k] for k in attention):
        for k, _, t in emu.disassemble(KERNELS.path("isa", ARCH, name).read_bytes()):
            texts.setdefault(k, []).append(t.split()[:2])
    for k in attention:
        prios = {int(arg, 0) for op, *rest in texts[k] if op == "s_setprio" for arg in rest}
        assert prios == {0, 1, 2, 3}, f"{k}: s_setprio values {sorted(prios)}"
