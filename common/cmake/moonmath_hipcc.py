#!/usr/bin/env python3
"""Compile HIP device code into an AMDGPU code object (.hsaco) without ROCm.

Compiler discovery, in order (ARCHITECTURE.md section 3):
  1. $MOONMATH_CLANG (a clang binary, or the word "ziglang")
  2. ROCm's clang ($ROCM_PATH/llvm/bin/clang, /opt/rocm/llvm/bin/clang)
  3. clang-NN (NN >= 20) on PATH, newest first, then a plain `clang` if it is >= 20
  4. the clang bundled in the `ziglang` PyPI wheel (`python -m ziglang clang`)

The ziglang clang links AMDGPU objects by running a program named `lld` with
`-flavor gnu`; we put a small shim named `lld` on PATH that drops those two
arguments and runs `python -m ziglang ld.lld`.

Usage:
  moonmath_hipcc.py --arch gfx942 -o out.hsaco src.hip [-I dir] [-D NAME=V] [-- extra clang flags]
  moonmath_hipcc.py --print-compiler       # prints "<how> <version string>"
"""
from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile

MIN_CLANG_MAJOR = 20

BASE_FLAGS = [
    "-x", "hip", "--cuda-device-only", "-nogpuinc", "-nogpulib",
    "-O3", "--no-gpu-bundle-output", "-std=c++17",
    # Kernels use clang builtins only; keep the code object self-contained.
    "-fno-gpu-rdc",
]


def _version_of(cmd: list[str]) -> tuple[int, str] | None:
    try:
        out = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"clang version (\d+)[\d.]*", out)
    if not m:
        return None
    return int(m.group(1)), out.splitlines()[0].strip()


def _ziglang_cmd() -> list[str] | None:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "ziglang", "clang"]


@functools.lru_cache(maxsize=1)
def find_compiler() -> tuple[list[str], str, str]:
    """Return (command, how-found, version string)."""
    explicit = os.environ.get("MOONMATH_CLANG", "").strip()
    if explicit:
        cmd = _ziglang_cmd() if explicit == "ziglang" else [explicit]
        if cmd is None:
            raise SystemExit("MOONMATH_CLANG=ziglang but the ziglang package is not installed (pip install ziglang)")
        v = _version_of(cmd)
        if v is None:
            raise SystemExit(f"MOONMATH_CLANG={explicit!r} is not a working clang")
        return cmd, "MOONMATH_CLANG", v[1]
    candidates: list[tuple[str, list[str]]] = []
    for root in filter(None, [os.environ.get("ROCM_PATH"), "/opt/rocm"]):
        p = os.path.join(root, "llvm", "bin", "clang")
        if os.path.exists(p):
            candidates.append(("rocm", [p]))
    for nn in range(40, MIN_CLANG_MAJOR - 1, -1):
        p = shutil.which(f"clang-{nn}")
        if p:
            candidates.append(("PATH", [p]))
    if shutil.which("clang"):
        candidates.append(("PATH", [shutil.which("clang")]))
    for how, cmd in candidates:
        v = _version_of(cmd)
        if v and v[0] >= MIN_CLANG_MAJOR:
            return cmd, how, v[1]
    cmd = _ziglang_cmd()
    if cmd is not None:
        v = _version_of(cmd)
        if v:
            return cmd, "ziglang", v[1]
    raise SystemExit(
        "no clang >= 20 with the AMDGPU backend found: set MOONMATH_CLANG, install ROCm, "
        "or `pip install ziglang` (its bundled clang 22 builds gfx942 and gfx950)")


def _lld_shim_dir() -> str:
    d = os.path.join(tempfile.gettempdir(), f"moonmath-lld-shim-{os.getuid()}")
    shim = os.path.join(d, "lld")
    body = ("#!/bin/sh\n"
            "# ziglang's clang calls `lld -flavor gnu ...`; ld.lld does not take -flavor.\n"
            "if [ \"$1\" = \"-flavor\" ]; then shift 2; fi\n"
            f"exec \"{sys.executable}\" -m ziglang ld.lld \"$@\"\n")
    os.makedirs(d, exist_ok=True)
    try:
        with open(shim) as f:
            if f.read() == body:
                return d
    except OSError:
        pass
    tmp = f"{shim}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(body)
    os.chmod(tmp, 0o755)
    os.replace(tmp, shim)
    return d


def compile_code_object(arch: str, src: str, out: str, includes=(), defines=(), extra=()) -> None:
    cmd, how, _ = find_compiler()
    args = cmd + BASE_FLAGS + [f"--offload-arch={arch}"]
    args += [f"-I{i}" for i in includes] + [f"-D{d}" for d in defines] + list(extra)
    args += ["-o", out, src]
    env = dict(os.environ)
    if how == "ziglang" or (how == "MOONMATH_CLANG" and cmd[0] == sys.executable):
        env["PATH"] = _lld_shim_dir() + os.pathsep + env.get("PATH", "")
    r = subprocess.run(args, env=env)
    if r.returncode != 0:
        raise SystemExit(f"device compile failed ({r.returncode}): {' '.join(args)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch")
    ap.add_argument("-o", dest="out")
    ap.add_argument("-I", dest="includes", action="append", default=[])
    ap.add_argument("-D", dest="defines", action="append", default=[])
    ap.add_argument("--print-compiler", action="store_true")
    ap.add_argument("src", nargs="?")
    ap.add_argument("extra", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.print_compiler:
        _, how, ver = find_compiler()
        print(f"{how}: {ver}")
        return 0
    if not (a.arch and a.out and a.src):
        ap.error("--arch, -o and a source file are required")
    extra = [x for x in a.extra if x != "--"]
    compile_code_object(a.arch, a.src, a.out, a.includes, a.defines, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
