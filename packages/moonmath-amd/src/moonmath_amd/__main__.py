"""python -m moonmath_amd info | demo"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m moonmath_amd")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_info = sub.add_parser("info", help="versions, archs built, compiler, backends, kernels")
    p_info.add_argument("--json", action="store_true")
    p_demo = sub.add_parser("demo", help="every op on the default backend, checked against its reference")
    p_demo.add_argument("--arch", action="append", help="emulated arch(s) to run (default: gfx942 and gfx950)")
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
