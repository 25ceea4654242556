"""Read an AMDGPU code object (ELF, code object v5): arch and the per-kernel metadata.

The metadata is the msgpack map in the NT_AMDGPU_METADATA note ("AMDGPU", type 32): for each
kernel its name, explicit and hidden arguments (offset, size, value_kind), kernarg segment size,
register counts, LDS and scratch use. Used to pack kernel arguments for the hip backend, by
`python -m moonmath_amd info` and by the ISA budget tests.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

EM_AMDGPU = 0xE0
NT_AMDGPU_METADATA = 32
# e_flags & 0xFF (EF_AMDGPU_MACH) for the archs we build.
MACH_TO_ARCH = {0x4C: "gfx942", 0x4F: "gfx950", 0x3F: "gfx90a", 0x40: "gfx940", 0x4B: "gfx941"}


class CodeObjectError(ValueError):
    pass


def _msgpack(buf: bytes, i: int = 0) -> tuple[Any, int]:
    """Decode one msgpack value at buf[i:]; returns (value, next index). Covers the subset LLVM emits."""
    b = buf[i]
    i += 1
    if b <= 0x7F:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0x80 <= b <= 0x8F:
        return _map(buf, i, b & 0xF)
    if 0x90 <= b <= 0x9F:
        return _arr(buf, i, b & 0xF)
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return buf[i:i + n].decode(), i + n
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in fixed:
        return fixed[b], i
    ints = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
            0xCA: ">f", 0xCB: ">d"}
    if b in ints:
        fmt = ints[b]
        n = struct.calcsize(fmt)
        return struct.unpack_from(fmt, buf, i)[0], i + n
    strs = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
    if b in strs:
        fmt = strs[b]
        n0 = struct.calcsize(fmt)
        n = struct.unpack_from(fmt, buf, i)[0]
        raw = buf[i + n0:i + n0 + n]
        return (raw.decode() if b >= 0xD9 else bytes(raw)), i + n0 + n
    if b in (0xDC, 0xDD):
        fmt = ">H" if b == 0xDC else ">I"
        n = struct.unpack_from(fmt, buf, i)[0]
        return _arr(buf, i + struct.calcsize(fmt), n)
    if b in (0xDE, 0xDF):
        fmt = ">H" if b == 0xDE else ">I"
        n = struct.unpack_from(fmt, buf, i)[0]
        return _map(buf, i + struct.calcsize(fmt), n)
    raise CodeObjectError(f"unsupported msgpack byte 0x{b:02x} in the code object metadata")


def _arr(buf: bytes, i: int, n: int) -> tuple[list, int]:
    out = []
    for _ in range(n):
        v, i = _msgpack(buf, i)
        out.append(v)
    return out, i


def _map(buf: bytes, i: int, n: int) -> tuple[dict, int]:
    out = {}
    for _ in range(n):
        k, i = _msgpack(buf, i)
        v, i = _msgpack(buf, i)
        out[k] = v
    return out, i


@dataclass(frozen=True)
class KernelArg:
    name: str
    offset: int
    size: int
    value_kind: str

    @property
    def hidden(self) -> bool:
        return self.value_kind.startswith("hidden_")


@dataclass(frozen=True)
class KernelMeta:
    name: str
    args: tuple[KernelArg, ...]
    kernarg_size: int
    vgpr: int
    agpr: int
    sgpr: int
    lds: int
    scratch: int
    max_workgroup_size: int
    raw: dict = field(repr=False, compare=False, default_factory=dict)

    @property
    def explicit_args(self) -> tuple[KernelArg, ...]:
        return tuple(a for a in self.args if not a.hidden)


@dataclass(frozen=True)
class CodeObject:
    arch: str
    kernels: dict[str, KernelMeta]

    @classmethod
    def parse(cls, data: bytes) -> CodeObject:
        if data[:4] != b"\x7fELF" or data[4] != 2:
            raise CodeObjectError("not a 64-bit ELF code object")
        (e_machine,) = struct.unpack_from("<H", data, 18)
        if e_machine != EM_AMDGPU:
            raise CodeObjectError(f"ELF machine {e_machine:#x} is not AMDGPU")
        (e_flags,) = struct.unpack_from("<I", data, 48)
        arch = MACH_TO_ARCH.get(e_flags & 0xFF, f"mach{e_flags & 0xFF:#x}")
        (e_shoff,) = struct.unpack_from("<Q", data, 40)
        e_shentsize, e_shnum = struct.unpack_from("<HH", data, 58)
        meta = None
        for s in range(e_shnum):
            off = e_shoff + s * e_shentsize
            sh_type, = struct.unpack_from("<I", data, off + 4)
            if sh_type != 7:  # SHT_NOTE
                continue
            sh_offset, sh_size = struct.unpack_from("<QQ", data, off + 24)
            p, end = sh_offset, sh_offset + sh_size
            while p + 12 <= end:
                namesz, descsz, ntype = struct.unpack_from("<III", data, p)
                name = data[p + 12:p + 12 + namesz].rstrip(b"\0")
                desc_off = p + 12 + ((namesz + 3) & ~3)
                if name == b"AMDGPU" and ntype == NT_AMDGPU_METADATA:
                    meta, _ = _msgpack(data[desc_off:desc_off + descsz])
                p = desc_off + ((descsz + 3) & ~3)
        if meta is None:
            raise CodeObjectError("no AMDGPU metadata note (is this a code object v4+?)")
        kernels = {}
        for k in meta.get("amdhsa.kernels", []):
            args = tuple(KernelArg(a.get(".name", ""), a[".offset"], a[".size"], a[".value_kind"])
                         for a in k.get(".args", []))
            km = KernelMeta(
                name=k[".name"], args=args, kernarg_size=k.get(".kernarg_segment_size", 0),
                vgpr=k.get(".vgpr_count", 0), agpr=k.get(".agpr_count", 0), sgpr=k.get(".sgpr_count", 0),
                lds=k.get(".group_segment_fixed_size", 0), scratch=k.get(".private_segment_fixed_size", 0),
                max_workgroup_size=k.get(".max_flat_workgroup_size", 0), raw=k)
            kernels[km.name] = km
        return cls(arch=arch, kernels=kernels)


class StructArg:
    """A by-value struct kernel argument (a C++ struct the kernel takes by value in its kernarg segment).

    data: the struct's bytes, laid out by the C++ definition (typically packed by the package's host module
    from the same header the device code includes, so the layout is written once); buffers: the tensors its
    pointer fields address (the emulator maps their storage for its memory sanitizer; the hip backend
    ignores them). Launchers recognise it by ``__kernarg__`` (moonmath_emu does too).
    """

    __slots__ = ("data", "buffers")

    def __init__(self, data: bytes, buffers: Any = ()):
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"StructArg data must be bytes; got {type(data).__name__}")
        self.data = bytes(data)
        self.buffers = tuple(buffers)

    def __kernarg__(self) -> tuple[bytes, tuple]:
        return self.data, self.buffers

    def __repr__(self) -> str:
        return f"StructArg({len(self.data)} bytes, {len(self.buffers)} buffers)"


def pack_explicit_args(meta: KernelMeta, values: list | tuple) -> bytes:
    """Lay out the explicit kernel arguments as the metadata says (hidden ones are the runtime's).

    values: tensors (data_ptr), None (null pointer), ints (two's complement of the arg's size),
    floats (f32 for 4 bytes, f64 for 8), StructArg (its bytes, which must be the argument's size).
    """
    explicit = meta.explicit_args
    if len(values) != len(explicit):
        raise TypeError(f"kernel {meta.name} takes {len(explicit)} arguments; got {len(values)}")
    size = max((a.offset + a.size for a in explicit), default=0)
    buf = bytearray(size)
    for a, v in zip(explicit, values):
        if hasattr(v, "__kernarg__"):
            data = bytes(v.__kernarg__()[0])
            if len(data) != a.size:
                raise TypeError(f"kernel {meta.name} argument {a.name or a.offset}: a struct of {a.size} bytes; "
                                f"got {len(data)}")
            buf[a.offset:a.offset + a.size] = data
            continue
        if v is None:
            raw = 0
        elif hasattr(v, "data_ptr"):
            raw = v.data_ptr()
        elif isinstance(v, float):
            struct.pack_into("<f" if a.size == 4 else "<d", buf, a.offset, v)
            continue
        elif isinstance(v, (int,)):
            raw = v
        else:
            raise TypeError(f"kernel {meta.name} argument {a.name or a.offset}: unsupported {type(v).__name__}")
        raw &= (1 << (8 * a.size)) - 1
        buf[a.offset:a.offset + a.size] = raw.to_bytes(a.size, "little")
    return bytes(buf)
