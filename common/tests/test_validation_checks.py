"""The validation helpers the op specifications added to moonmath_common.checks."""
from __future__ import annotations

import pytest
import torch

from moonmath_common import checks


def test_boolean():
    assert checks.boolean("flag", True) is True
    for bad in (1, None, "yes", 0.0):
        with pytest.raises(TypeError, match="flag must be a bool; got"):
            checks.boolean("flag", bad)


def test_power_of_two():
    for ok in (8, 16, 1024):
        assert checks.power_of_two("page_size", ok, lo=8) == ok
    for bad, msg in ((12, "power of two >= 8"), (4, "power of two >= 8"), (0, "power of two"), (-8, "power of two")):
        with pytest.raises(ValueError, match=msg):
            checks.power_of_two("page_size", bad, lo=8)
    with pytest.raises(TypeError, match="page_size must be an int"):
        checks.power_of_two("page_size", 8.0)


def test_values_in():
    t = torch.tensor([3, 0, 7, 2], dtype=torch.int32)
    checks.values_in("idx", t, lo=0, hi=8)
    checks.values_in("idx", t[:0], lo=5, hi=0)          # empty: nothing to check
    with pytest.raises(ValueError, match="idx values must be < 7; got 7 \\(first bad at flat index 2\\)"):
        checks.values_in("idx", t, hi=7)
    with pytest.raises(ValueError, match="idx values must be >= 1; got 0 \\(first bad at flat index 1\\)"):
        checks.values_in("idx", t, lo=1)


def test_nondecreasing():
    checks.nondecreasing("cu", torch.tensor([0, 0, 3, 9]))
    checks.nondecreasing("cu", torch.tensor([5]))
    with pytest.raises(ValueError, match="cu must be non-decreasing; got cu\\[1\\] = 4 > cu\\[2\\] = 3"):
        checks.nondecreasing("cu", torch.tensor([0, 4, 3]))


def test_on_host():
    cpu = torch.zeros(2)
    assert checks.host_checks()
    assert checks.on_host(cpu, None, cpu)
    assert not checks.on_host(cpu, torch.zeros(2, device="meta"))

    seen = []

    def f(x):
        seen.append(checks.host_checks())
        return x + 1

    torch.compile(f, fullgraph=True, backend="aot_eager")(cpu)
    assert seen == [False]   # while tracing, value checks are skipped


def test_byte_span_and_no_overlap_fast_paths():
    """byte_span's contiguous shortcut equals the span from sizes and strides; no_overlap computes out's span
    once and still finds an input overlapping it through another storage, and skips None inputs."""
    base = torch.zeros(64, 48, dtype=torch.bfloat16)
    for t in (base, base[3:9], base[:, :1], base[5:5], torch.zeros(1, 1, 7), base.t(), base[::2, 4:9]):
        p, es = t.data_ptr(), t.element_size()
        if t.numel() == 0:
            want = (p, p)
        else:
            want = (p, p + (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * es)
        assert checks.byte_span(t) == want
    flat = torch.zeros(1024, dtype=torch.uint8)
    out = flat[100:200].view(torch.bfloat16)
    other = torch.from_numpy(flat.numpy()[150:160])  # a second storage over the same bytes
    checks.no_overlap("out", out, a=flat[200:300], b=None)
    with pytest.raises(ValueError, match="out must not overlap b"):
        checks.no_overlap("out", out, a=flat[200:300], b=other)
