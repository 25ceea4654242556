"""pack_explicit_args (the hip backend's kernarg layout): scalars, pointers and by-value structs (StructArg)."""
import struct

import pytest
import torch

from moonmath_common.codeobject import KernelArg, KernelMeta, StructArg, pack_explicit_args


def _meta(*args):
    return KernelMeta("k", tuple(KernelArg(n, o, s, k) for n, o, s, k in args), 64, 0, 0, 0, 0, 0, 256)


def test_struct_bytes_land_at_the_argument_offset():
    t = torch.zeros(4)
    meta = _meta(("p", 0, 8, "global_buffer"), ("s", 8, 16, "by_value"), ("n", 24, 4, "by_value"),
                 ("hidden", 32, 8, "hidden_block_count_x"))
    blob = struct.pack("<QII", 0x1122334455667788, 7, 9)
    buf = pack_explicit_args(meta, [t, StructArg(blob, [t]), 5])
    assert buf[0:8] == t.data_ptr().to_bytes(8, "little")
    assert buf[8:24] == blob
    assert buf[24:28] == (5).to_bytes(4, "little")


def test_struct_of_the_wrong_size_is_refused():
    meta = _meta(("s", 0, 16, "by_value"))
    with pytest.raises(TypeError, match="struct of 16 bytes; got 12"):
        pack_explicit_args(meta, [StructArg(b"\0" * 12)])
    with pytest.raises(TypeError, match="bytes"):
        StructArg("not bytes")
