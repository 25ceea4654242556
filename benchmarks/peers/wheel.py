"""The pinned AITER wheel: fetched at run time into a cache, verified, read member by member.

Nothing of AITER is in this repository. The first use runs

    python -m pip download --no-deps amd-aiter==0.1.7.post2.dev18 -d $CACHE

(the package index through pip, its ordinary client), checks the wheel's SHA-256 against the pin below,
and from then on reads the code objects it needs straight out of the wheel (a zip): nothing is unpacked
that is not used. The cache directory is ``$MOONMATH_AITER_CACHE`` when set, else
``~/.cache/moonmath/aiter``.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

AITER_VERSION = "0.1.7.post2.dev18"
WHEEL_NAME = f"amd_aiter-{AITER_VERSION}-py3-none-any.whl"
# SHA-256 of the wheel the package index serves for this version (checked on every first read).
WHEEL_SHA256 = "fe139d74438217c35e87e3b961166bac8db2d381eadccb371da2e63615f05a31"
CACHE_ENV = "MOONMATH_AITER_CACHE"


class WheelUnavailable(RuntimeError):
    """The pinned wheel is neither in the cache nor obtainable from the package index."""


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "moonmath" / "aiter"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@cache
def wheel_path() -> Path:
    """Path of the verified wheel in the cache, downloading it on first use."""
    d = cache_dir()
    p = d / WHEEL_NAME
    if not p.exists():
        d.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               f"amd-aiter=={AITER_VERSION}", "-d", str(d)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not p.exists():
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise WheelUnavailable(f"could not fetch amd-aiter=={AITER_VERSION} into {d} "
                                   f"(`{' '.join(cmd)}` exited {r.returncode}: {' | '.join(tail)})")
    digest = _sha256(p)
    if digest != WHEEL_SHA256:
        raise WheelUnavailable(f"{p} has SHA-256 {digest}, not the pinned {WHEEL_SHA256}; delete it to re-fetch")
    return p


@cache
def _zip() -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel_path())


def read_member(path: str) -> bytes:
    """Bytes of one file of the wheel, e.g. ``aiter_meta/hsa/gfx942/mla/<name>.co``."""
    try:
        return _zip().read(path)
    except KeyError:
        raise FileNotFoundError(f"{path} is not in {WHEEL_NAME}") from None


def code_object(arch: str, rel: str) -> bytes:
    """A shipped code object: ``code_object("gfx942", "fmha_v3_fwd/MI300/fwd_hd128_bf16_rtne.co")``."""
    if arch not in ("gfx942", "gfx950"):
        raise ValueError(f"arch must be 'gfx942' or 'gfx950'; got {arch!r}")
    return read_member(f"aiter_meta/hsa/{arch}/{rel}")


def available() -> str | None:
    """None when the wheel can be used, else the reason it cannot (for skips)."""
    try:
        wheel_path()
    except WheelUnavailable as e:
        return str(e)
    return None
