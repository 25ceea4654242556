"""MUBUF range rules and buffer loads straight into LDS (tests/corpus/buffer_ops.hip).

Raw buffers (stride 0). The ISA composes the address as base (V#) + SGPR offset (soffset) + buffer
offset (here voffset + inst_offset) and range-checks the buffer offset against num_records: the
soffset is not part of the range check. Multi-dword loads/stores (dwordx2/x3/x4) are checked per
dword. Out-of-range loads return 0, out-of-range stores are dropped. The tensors behind the
descriptors are larger than every in-range access, so nothing here is a sanitizer error."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_util import ARCHS, session_corpus  # noqa: E402


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return session_corpus(tmp_path_factory)


pytestmark = pytest.mark.parametrize("arch", ARCHS)


def test_buffer_b32_range(corpus, arch):
    n = 256
    src = torch.arange(n, dtype=torch.float32) * 3
    dst = torch.full((n,), -1.0)
    in_records, out_records = 100, 200  # dwords
    corpus.module("buffer_ops", arch).launch("buffer_copy_b32", grid=(1, 1, 1), block=(256, 1, 1),
                                             args=[src, dst, in_records * 4, out_records * 4])
    want = np.full(n, -1.0, np.float32)
    loaded = np.where(np.arange(n) < in_records, src.numpy(), 0.0) + 1.0  # OOB loads read 0
    want[:out_records] = loaded[:out_records]                             # OOB stores dropped
    assert np.array_equal(dst.numpy(), want)


# The buffer range check counts soffset: an access is in range when soffset + voffset + inst_offset +
# its size fits in num_records (per dword for x2/x3/x4). This is how AMD's rocjitsu emulator models
# gfx950 hardware and how Triton's Gluon buffer-descriptor docs state it; LLVM's intrinsic comments
# call soffset "excluded from bounds checking". docs/emulator.md records the conflict.
@pytest.mark.parametrize("soff", [0, 64])
def test_buffer_b128_range_per_dword_counts_soffset(corpus, arch, soff):
    lanes = 64
    src = torch.arange(lanes * 4 + 64, dtype=torch.int32) + 1
    dst = torch.full((lanes * 4 + 64,), -5, dtype=torch.int32)
    in_bytes, out_bytes = 40 * 16 + 8, 50 * 16 + 4  # not multiples of 16: some lanes are partly in range
    corpus.module("buffer_ops", arch).launch("buffer_copy_b128", grid=(1, 1, 1), block=(lanes, 1, 1),
                                             args=[src, dst, in_bytes, out_bytes, soff])
    want = np.full(dst.numel(), -5, np.int64)
    s = src.numpy()
    for lane in range(lanes):
        off = soff + lane * 16  # the checked offset includes soffset
        for c in range(4):
            end = off + 4 * c + 4
            val = s[off // 4 + c] if end <= in_bytes else 0
            if end <= out_bytes:
                want[off // 4 + c] = val
    assert np.array_equal(dst.numpy(), want)


def test_buffer_load_to_lds(corpus, arch):
    n = 256
    src = torch.arange(n, dtype=torch.int32) + 7
    out = torch.zeros(n, dtype=torch.int32)
    # each wave loads dword `lane` at voffset 4*lane, soffset 256*wave; the checked offset counts soffset,
    # so only wave 0's lanes < 40 are in range: every other lane writes 0 into LDS
    in_bytes = 40 * 4
    counters = corpus.module("buffer_ops", arch).launch("buffer_load_to_lds", grid=(1, 1, 1), block=(256, 1, 1),
                                                        args=[src, out, in_bytes])
    lane_of = np.arange(n) % 64
    wave_of = np.arange(n) // 64
    lds = np.where((wave_of * 256 + lane_of * 4 + 4) <= in_bytes, src.numpy(), 0).reshape(4, 64)
    t = np.arange(n)
    wave, lane = t // 64, t % 64
    want = lds[wave, (lane + 1) % 64] + 1000 * lds[(wave + 1) % 4, lane]
    assert np.array_equal(out.numpy(), want)
    assert counters["barrier"] == 4
