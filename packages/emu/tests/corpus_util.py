"""Build helpers for the emulator's kernel test corpus (tests/corpus/*.hip).

Each source is compiled for gfx942 and gfx950 with the product toolchain
(common/cmake/moonmath_hipcc.py) into a per-session temporary directory, once per (source, arch).
Test modules declare a `corpus` fixture that returns session_corpus(tmp_path_factory): one Corpus,
hence one compile per (source, arch), per session.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS / "corpus"
REPO = TESTS.parents[2]
HIPCC = REPO / "common" / "cmake" / "moonmath_hipcc.py"
ARCHS = ("gfx942", "gfx950")


def sources() -> list[str]:
    return sorted(p.stem for p in CORPUS.glob("*.hip"))


class Corpus:
    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self._bytes: dict[tuple[str, str], bytes] = {}

    def path(self, name: str, arch: str) -> Path:
        out = self.out_dir / f"{name}.{arch}.hsaco"
        if not out.exists():
            src = CORPUS / f"{name}.hip"
            cmd = [sys.executable, str(HIPCC), "--arch", arch, "-o", str(out), str(src)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"compiling {src.name} for {arch} failed:\n{r.stdout}\n{r.stderr}")
        return out

    def code_object(self, name: str, arch: str) -> bytes:
        key = (name, arch)
        if key not in self._bytes:
            self._bytes[key] = self.path(name, arch).read_bytes()
        return self._bytes[key]

    def module(self, name: str, arch: str):
        import moonmath_emu as emu

        return emu.Module(self.code_object(name, arch))


_SESSION: Corpus | None = None


def session_corpus(tmp_path_factory) -> Corpus:
    global _SESSION
    if _SESSION is None:
        _SESSION = Corpus(tmp_path_factory.mktemp("emu_corpus"))
    return _SESSION
