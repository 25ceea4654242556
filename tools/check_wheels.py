"""Check that a built wheel of an op package holds a code object for every arch it declares.

usage: python tools/check_wheels.py DIST_DIR PACKAGE
"""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path

DECLARED = {
    "mha-gfx942": ("moonmath_mha_gfx942", ["gfx942"]),
    "attention-gfx950": ("moonmath_attention_gfx950", ["gfx950"]),
    "mla-decode": ("moonmath_mla_decode", ["gfx942", "gfx950"]),
    "mxfp4-moe": ("moonmath_mxfp4_moe", ["gfx942"]),
}


def main(dist: str, package: str) -> int:
    if package not in DECLARED:
        print(f"{package}: no code objects declared")
        return 0
    mod, archs = DECLARED[package]
    wheels = sorted(Path(dist).glob(f"moonmath_{package.replace('-', '_')}-*.whl"))
    if not wheels:
        print(f"no wheel for {package} in {dist}")
        return 1
    names = zipfile.ZipFile(wheels[-1]).namelist()
    bad = 0
    for arch in archs:
        cos = [n for n in names if n.startswith(f"{mod}/kernels/{arch}/") and n.endswith(".hsaco")]
        print(f"{wheels[-1].name}: {arch}: {len(cos)} code objects {[Path(c).name for c in cos]}")
        bad += not cos
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
