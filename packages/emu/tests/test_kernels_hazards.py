"""Planted bugs are caught and their correct twins run clean (tests/corpus/hazards.hip,
vector_add.hip): a read of a load's destination before the s_waitcnt that retires it, and an LDS
race across the waves of a workgroup."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_util import ARCHS, session_corpus  # noqa: E402

import moonmath_emu as emu  # noqa: E402


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return session_corpus(tmp_path_factory)


pytestmark = pytest.mark.parametrize("arch", ARCHS)


def test_waited_read_is_clean(corpus, arch):
    x = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    corpus.module("hazards", arch).launch("waited_read", grid=(1, 1, 1), block=(64, 1, 1), args=[x, out])
    assert torch.equal(out, x + 1)


def test_read_before_waitcnt_is_caught(corpus, arch):
    x = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(emu.HazardError) as ei:
        corpus.module("hazards", arch).launch("early_read", grid=(1, 1, 1), block=(64, 1, 1), args=[x, out])
    assert "early_read" in str(ei.value)


def test_read_before_waitcnt_unchecked_when_disabled(corpus, arch):
    x = torch.arange(64, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    corpus.module("hazards", arch).launch("early_read", grid=(1, 1, 1), block=(64, 1, 1), args=[x, out],
                                          check_hazards=False)


def test_lds_exchange_with_barrier_is_clean(corpus, arch):
    x = torch.arange(128, dtype=torch.int32)
    out = torch.zeros(128, dtype=torch.int32)
    corpus.module("hazards", arch).launch("lds_exchange_sync", grid=(1, 1, 1), block=(128, 1, 1), args=[x, out])
    assert torch.equal(out, 2 * x[torch.arange(128) ^ 64])


def test_lds_race_is_caught(corpus, arch):
    x = torch.arange(128, dtype=torch.int32)
    out = torch.zeros(128, dtype=torch.int32)
    with pytest.raises(emu.HazardError) as ei:
        corpus.module("hazards", arch).launch("lds_exchange_racy", grid=(1, 1, 1), block=(128, 1, 1), args=[x, out])
    assert "lds_exchange_racy" in str(ei.value)
