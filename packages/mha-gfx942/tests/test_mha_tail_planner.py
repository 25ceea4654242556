"""The gfx942 MHA tail KV-split planner: its C++ unit test (built with the host compiler) and the binding."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
HOST = HERE.parent / "csrc" / "host"
CONFIG = HERE.parent / "csrc" / "device" / "gfx942"  # mha_config.hpp, shared with the kernels


def test_cpp_unit_test(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    exe = tmp_path / "mha_tail_planner_test"
    src = HERE / "cpp" / "mha_tail_planner_test.cpp"
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{HOST}", f"-I{CONFIG}", str(src), "-o", str(exe)],
                   check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_binding():
    from moonmath_mha_gfx942 import _C

    assert _C.CTA_ROWS == 256 and _C.KV_BLOCK == 64
    p = _C.plan_tail(385, 1000, 3, 4, min_kv_blocks=4)
    assert (p.n_work, p.n_dense, p.tail, p.parts, p.slots) == (6, 4, 2, 2, 4)
    assert p.ws_o_floats == 4 * 256 * 128 and p.ws_ml_floats == 4 * 256 * 2
    assert _C.split_schedule(p, 2)[:8] == [0, 2, 0, 2, 0, 2, 1, 2]  # item 4 = (q block 0, head 2), parts 0, 1
    assert _C.merge_table(p, 2)[4:8] == [1, 2, 2, 2]
    assert _C.plan_tail(385, 1000, 3, 4).tail == 0  # default guard: 16 kv blocks < 48
    assert _C.plan_tail(385, 1000, 3, 4, enabled=False, min_kv_blocks=4).tail == 0
    # MI300X: B*H = 24, S = 8192 -> 32 q blocks x 24 = 768 items = 2 rounds + 160 stranded
    big = _C.plan_tail(8192, 8192, 24, 304)
    assert big.n_work == 768 and big.tail == 160 and big.parts > 1 and big.span < big.span_unsplit
    for bad in [dict(sq=0), dict(skv=0), dict(bh=0), dict(cus=0)]:
        args = dict(sq=1, skv=1, bh=1, cus=304) | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            _C.plan_tail(**args)
