"""MUBUF range rules and buffer loads straight into LDS (tests/corpus/buffer_ops.hip).

Raw buffers (stride 0): an access at byte offset >= num_records is out of range; out-of-range loads
return 0 and out-of-range stores are dropped. The tensors behind the descriptors are larger than
num_records, so nothing here is a sanitizer error."""
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


@pytest.mark.parametrize("soff", [0, 64])
def test_buffer_b128_range_with_soffset(corpus, arch, soff):
    lanes = 64
    src = torch.arange(lanes * 4 + 64, dtype=torch.int32) + 1
    dst = torch.full((lanes * 4 + 64,), -5, dtype=torch.int32)
    in_bytes, out_bytes = 40 * 16, 50 * 16
    corpus.module("buffer_ops", arch).launch("buffer_copy_b128", grid=(1, 1, 1), block=(lanes, 1, 1),
                                             args=[src, dst, in_bytes, out_bytes, soff])
    want = np.full(dst.numel(), -5, np.int64)
    s = src.numpy()
    for lane in range(lanes):
        off = lane * 16 + soff  # byte offset of the 16-byte access (voffset + soffset)
        val = s[off // 4: off // 4 + 4] if off + 16 <= in_bytes else np.zeros(4)
        if off + 16 <= out_bytes:
            want[off // 4: off // 4 + 4] = val
    assert np.array_equal(dst.numpy(), want)


def test_buffer_load_to_lds(corpus, arch):
    n = 256
    src = torch.arange(n, dtype=torch.int32) + 7
    out = torch.zeros(n, dtype=torch.int32)
    in_records = 200  # dwords: the last wave's loads beyond 200 write 0 into LDS
    counters = corpus.module("buffer_ops", arch).launch("buffer_load_to_lds", grid=(1, 1, 1), block=(256, 1, 1),
                                                        args=[src, out, in_records * 4])
    lds = np.where(np.arange(n) < in_records, src.numpy(), 0).reshape(4, 64)
    t = np.arange(n)
    wave, lane = t // 64, t % 64
    want = lds[wave, (lane + 1) % 64] + 1000 * lds[(wave + 1) % 4, lane]
    assert np.array_equal(out.numpy(), want)
    assert counters["barrier"] == 4
