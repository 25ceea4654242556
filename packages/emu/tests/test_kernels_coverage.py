"""Coverage: every opcode in every test-corpus code object is implemented by the emulator."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_util import ARCHS, session_corpus, sources  # noqa: E402

import moonmath_emu as emu  # noqa: E402


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return session_corpus(tmp_path_factory)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sources())
def test_corpus_opcodes_supported(corpus, name, arch):
    co = corpus.code_object(name, arch)
    used = emu.opcodes_in(co)
    assert used, f"no opcodes found in {name} ({arch})"
    missing = sorted(used - set(emu.supported_opcodes(arch)))
    assert not missing, f"{name}.hip ({arch}) uses opcodes the emulator lacks: {missing}"


def test_corpus_covers_every_mfma_the_emulator_claims(corpus):
    """Each MFMA in supported_opcodes() appears in some corpus object, so none is claimed untested."""
    for arch in ARCHS:
        used: set[str] = set()
        for name in sources():
            used |= emu.opcodes_in(corpus.code_object(name, arch))
        claimed = {op for op in emu.supported_opcodes(arch) if op.startswith("v_mfma")}
        assert claimed <= used, f"{arch}: MFMA forms without a corpus probe: {sorted(claimed - used)}"
