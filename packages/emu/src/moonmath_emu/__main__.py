"""python -m moonmath_emu disasm|info|run FILE"""
from __future__ import annotations

import argparse
import json
import sys

from . import EmuError, Module, opcodes_in, supported_opcodes


def _parse_arg(s: str):
    """run arguments: 'f32:N' / 'i32:N' ... -> zero tensor of N elements, ints, floats, 'null'."""
    import numpy as np

    if s == "null":
        return None
    if ":" in s:
        dt, n = s.split(":", 1)
        dtypes = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32, "u8": np.uint8,
                  "f64": np.float64, "i64": np.int64, "bf16": np.uint16}
        if dt not in dtypes:
            raise SystemExit(f"unknown buffer type {dt!r} (one of {', '.join(dtypes)})")
        return np.zeros(int(n), dtype=dtypes[dt])
    try:
        return int(s, 0)
    except ValueError:
        return float(s)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m moonmath_emu", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("disasm", help="disassemble every kernel")
    d.add_argument("file")
    d.add_argument("--kernel", default=None)
    i = sub.add_parser("info", help="kernels, registers, LDS, arguments")
    i.add_argument("file")
    i.add_argument("--json", action="store_true")
    r = sub.add_parser("run", help="launch a kernel on zero-filled buffers and print the counters")
    r.add_argument("file")
    r.add_argument("--kernel", default=None)
    r.add_argument("--grid", default="1,1,1")
    r.add_argument("--block", default="64,1,1")
    r.add_argument("--dynamic-lds", type=int, default=0)
    r.add_argument("--no-hazards", action="store_true")
    r.add_argument("args", nargs="*", help="f32:N (zero buffer of N floats), i32:N, ..., ints, floats, null")
    a, rest = p.parse_known_args(argv)
    if rest:
        if a.cmd != "run":
            p.error(f"unrecognized arguments: {' '.join(rest)}")
        a.args = list(a.args) + rest
    data = open(a.file, "rb").read()
    try:
        m = Module(data)
        if a.cmd == "disasm":
            for k, pc, text in m.disassemble():
                if a.kernel and k != a.kernel:
                    continue
                print(f"{k:24s} {pc:#08x}  {text}")
            missing = opcodes_in(data) - supported_opcodes(m.arch)
            if missing:
                print(f"# not supported by the emulator: {', '.join(sorted(missing))}", file=sys.stderr)
        elif a.cmd == "info":
            infos = {k: m.kernel_info(k) for k in m.kernels}
            if a.json:
                print(json.dumps({"arch": m.arch, "kernels": infos}, indent=2, default=str))
            else:
                print(f"arch: {m.arch}")
                for k, inf in infos.items():
                    print(f"kernel {k}: vgpr={inf['vgpr']} agpr={inf['agpr']} accum_offset={inf['accum_offset']} "
                          f"sgpr={inf['sgpr']} lds={inf['lds']} scratch={inf['scratch']} kernarg={inf['kernarg_size']} "
                          f"wavefront={inf['wavefront_size']}")
                    for arg in inf["args"]:
                        print(f"    +{arg['offset']:<4d} {arg['size']:>2d}B {arg['value_kind']:<28s} {arg['name']}")
        else:
            k = a.kernel or m.kernels[0]
            grid = [int(x) for x in a.grid.split(",")]
            block = [int(x) for x in a.block.split(",")]
            args = [_parse_arg(x) for x in a.args]
            c = m.launch(k, grid=grid, block=block, args=args, dynamic_lds=a.dynamic_lds,
                         check_hazards=not a.no_hazards)
            print(json.dumps(c, indent=2))
    except EmuError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
