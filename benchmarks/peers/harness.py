"""Loading AITER code objects into moonmath-emu and launching them with a kernarg image we build.

AITER's kernels take one packed argument struct whose fields each sit in a 16-byte slot; the code
objects' metadata lists every padding word as its own by-value argument. So a family describes its
struct as a table of `Field`s (byte offset, name, kind) and `launch` places each value at its offset:
tensor fields are passed to the emulator as tensors (so the memory sanitizer knows their storage),
every other metadata argument is cut out of the packed little-endian image.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

import moonmath_emu as emu

from . import wheel


@dataclass(frozen=True)
class Field:
    """One field of an AITER kernel's argument struct."""

    offset: int  # byte offset in the kernarg segment
    name: str
    kind: str  # "ptr" (tensor or None), "u32", "i32", "f32"
    doc: str = ""


def layout_table(fields: tuple[Field, ...]) -> str:
    """The argument layout as a markdown table (for docs and reports)."""
    rows = ["| offset | field | kind | meaning |", "|---|---|---|---|"]
    rows += [f"| {f.offset} | `{f.name}` | {f.kind} | {f.doc} |" for f in fields]
    return "\n".join(rows)


@cache
def load(arch: str, rel: str) -> tuple[emu.Module, str]:
    """The emulator module of one shipped code object and its (single) kernel's name."""
    mod = emu.Module(wheel.code_object(arch, rel))
    if mod.arch != arch:
        raise RuntimeError(f"{rel}: code object is for {mod.arch}, expected {arch}")
    if len(mod.kernels) != 1:
        raise RuntimeError(f"{rel}: expected one kernel, found {mod.kernels}")
    return mod, mod.kernels[0]


def pack_args(mod: emu.Module, kernel: str, fields: tuple[Field, ...], values: dict[str, Any]) -> list[Any]:
    """The emulator's argument list for `kernel` from `values` (by field name) placed per `fields`."""
    info = mod.kernel_info(kernel)
    size = info["kernarg_size"]
    image = bytearray(size)
    tensors: dict[int, Any] = {}
    names = {f.name for f in fields}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"values for unknown fields {sorted(unknown)}")
    for f in fields:
        if f.name not in values:
            raise ValueError(f"no value for field {f.name!r}")
        v = values[f.name]
        if f.offset + (8 if f.kind == "ptr" else 4) > size:
            raise ValueError(f"field {f.name} at {f.offset} lies past the kernarg segment ({size} bytes)")
        if f.kind == "ptr":
            if v is not None:
                tensors[f.offset] = v
        elif f.kind == "u32":
            struct.pack_into("<I", image, f.offset, int(v) & 0xFFFFFFFF)
        elif f.kind == "i32":
            struct.pack_into("<i", image, f.offset, int(v))
        elif f.kind == "f32":
            struct.pack_into("<f", image, f.offset, float(v))
        else:
            raise ValueError(f"field {f.name}: unknown kind {f.kind!r}")
    args: list[Any] = []
    placed = set()
    for a in info["args"]:
        if a["value_kind"].startswith("hidden_"):
            break  # code object v5 hidden arguments: the emulator fills them
        off, n = a["offset"], a["size"]
        if off in tensors:
            if n != 8:
                raise RuntimeError(f"{kernel}: pointer field at {off} meets a {n}-byte metadata argument")
            args.append(tensors[off])
            placed.add(off)
        else:
            args.append(int.from_bytes(image[off:off + n], "little"))
    missing = set(tensors) - placed
    if missing:
        raise RuntimeError(f"{kernel}: pointer fields at offsets {sorted(missing)} match no metadata argument")
    return args


def launch(arch: str, rel: str, fields: tuple[Field, ...], values: dict[str, Any], grid: tuple[int, int, int],
           block: int, check_hazards: bool | str = False) -> dict:
    """Run one shipped kernel on the emulator; returns the emulator's counters."""
    mod, kernel = load(arch, rel)
    args = pack_args(mod, kernel, fields, values)
    return mod.launch(kernel, grid=grid, block=(block, 1, 1), args=args, check_hazards=check_hazards)
