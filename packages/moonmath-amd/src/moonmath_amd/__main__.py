"""python -m moonmath_amd info | demo"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m moonmath_amd",
                                 description="moonmath-amd: what is installed (info) and a check of every kernel "
                                             "against its reference (demo).")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{info,demo}")
    p_info = sub.add_parser("info", help="versions, archs built, compiler, backends, kernels",
                            description="Versions, the archs each package was built for, the compiler, which "
                                        "backend and arch apply and where that choice came from, every kernel's "
                                        "registers and LDS.")
    p_info.add_argument("--json", action="store_true", help="print the same as JSON")
    p_demo = sub.add_parser("demo", help="every op's kernel on the current backend, checked against its reference",
                            description="Runs every op's kernel (hip, or emu on the CPU) and the plain-torch "
                                        "reference on the same inputs; a row without a kernel says so. Exit "
                                        "status 1 when a kernel fails its tolerance.")
    p_demo.add_argument("--arch", action="append", choices=["gfx942", "gfx950"],
                        help="emulated arch to run (repeatable; default: gfx942 and gfx950)")
    a = ap.parse_args(argv)
    if a.cmd == "info":
        from .info import collect, render

        info = collect()
        print(json.dumps(info, indent=2) if a.json else render(info))
        return 0
    from .demo import run_demo

    return run_demo(a.arch)


if __name__ == "__main__":
    sys.exit(main())
