"""Decoder/disassembler cross-check against LLVM: every instruction of the test kernels is disassembled
by moonmath-emu, re-assembled by LLVM's AMDGPU assembler (clang -cc1as, the product toolchain's clang)
and must encode to exactly the original bytes."""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from _emu_build import compile_path, kernel_source

import moonmath_emu as emu

HERE = Path(__file__).resolve().parent


def _clang() -> list[str] | None:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "ziglang", "clang"]


def _file_offset(data: bytes):
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phsz, phnum = struct.unpack_from("<HH", data, 54)
    segs = []
    for i in range(phnum):
        o = phoff + i * phsz
        if struct.unpack_from("<I", data, o)[0] != 1:
            continue
        off, va, _pa, fsz = struct.unpack_from("<QQQQ", data, o + 8)
        segs.append((va, off, fsz))

    def fo(va):
        for v, o, s in segs:
            if v <= va < v + s:
                return o + va - v
        raise KeyError(va)
    return fo


def _same_16bit_literal(text: str, enc: bytes, orig: bytes) -> bool:
    # A 16-bit operand's 32-bit literal: only its low half is used, and clang sign-extends it when it
    # emits code while the assembler zero-extends it; the instruction is the same.
    return ("16" in text.split()[0] and len(enc) == 8 and enc[:6] == orig[:6] and enc[6:] == b"\0\0"
            and orig[6:] == b"\xff\xff")


def _literal_vs_inline(data: bytes, off: int, enc: bytes, text: str) -> bool:
    # The compiler may encode a value that has an inline-constant form as a 32-bit literal (e.g. a
    # relocated PC-relative offset that happens to be -1); the assembler then picks the inline form.
    # Same instruction, same value: accept when our text carries that literal.
    orig = data[off:off + len(enc) + 4]
    if len(enc) != 4 or len(orig) != 8:
        return False
    lit = int.from_bytes(orig[4:8], "little")
    return f"{lit:#x}" in text and (lit <= 64 or lit >= 0xFFFFFFF0)


def roundtrip(data: bytes) -> list[str]:
    clang = _clang()
    if clang is None:
        pytest.skip("ziglang clang not available")
    m = emu.Module(data)
    rows = m.disassemble()
    asm = "\n".join(t.split(" ; ->")[0] for _, _, t in rows) + "\n"
    r = subprocess.run(clang + ["-cc1as", "-triple", "amdgcn-amd-amdhsa", "-target-cpu", m.arch, "-filetype", "asm",
                                "-show-encoding", "-", "-o", "-"], input=asm, capture_output=True, text=True)
    enc_lines = [ln for ln in r.stdout.splitlines() if "encoding:" in ln]
    assert len(enc_lines) == len(rows), f"LLVM rejected our syntax:\n{r.stderr[:3000]}"
    fo = _file_offset(data)
    bad = []
    for (k, pc, text), ln in zip(rows, enc_lines):
        enc = bytes(int(x, 16) for x in ln.split("encoding: [")[1].rstrip("]").split(","))
        orig = data[fo(pc):fo(pc) + len(enc)]
        if enc != orig and not _same_16bit_literal(text, enc, orig) and not _literal_vs_inline(data, fo(pc), enc, text):
            bad.append(f"{k}+{pc:#x}: {text!r} -> LLVM {enc.hex()} != original {orig.hex()}")
    return bad


def _sources():
    srcs = [("basic.hip", kernel_source("basic.hip"))]
    corpus = HERE / "corpus"
    if corpus.is_dir():
        for p in sorted(corpus.glob("*.hip")):
            srcs.append((p.name, p.read_text().replace('#include "common.h"', (corpus / "common.h").read_text())
                         if (corpus / "common.h").exists() else p.read_text()))
    return srcs


@pytest.mark.parametrize("name,src", _sources(), ids=[n for n, _ in _sources()])
def test_disassembly_reassembles_bit_exact(build, arch, name, src):
    data = build(src, arch)
    bad = roundtrip(data)
    assert not bad, "\n".join(bad[:20])


def _product_kernels():
    root = HERE.parents[2]
    out = []
    for p in sorted((root / "packages").glob("*/csrc/device/**/*.hip")):
        if "emu" in p.parts:
            continue
        archs = [a for a in ("gfx942", "gfx950") if a in p.parts] or ["gfx942", "gfx950"]
        for a in archs:
            out.append((p, a))
    return out


@pytest.mark.parametrize("path,arch_", _product_kernels(), ids=[f"{p.parent.name}/{p.name}-{a}" for p, a in _product_kernels()])
def test_product_kernels_disassemble_bit_exact_and_are_supported(path, arch_):
    root = HERE.parents[2]
    pkg = next(p for p in path.parents if p.name == "csrc").parent
    # the include directories the packages' builds use (MoonmathCodeObjects.cmake: common, csrc/device, csrc)
    includes = (str(root / "common" / "include"), str(pkg / "csrc" / "device"), str(pkg / "csrc"))
    data = compile_path(path, arch_, includes)  # a product kernel that does not build is a failure, not a skip
    bad = roundtrip(data)
    assert not bad, "\n".join(bad[:20])
    missing = emu.opcodes_in(data) - emu.supported_opcodes(arch_)
    assert not missing, f"{path.name}: opcodes the emulator lacks: {sorted(missing)}"
