"""moonmath-mla-decode: MLA absorbed decode (bf16 Q x fp8 KV), any q_len, DCP, and the rank merge."""
from .merge import mla_dcp_lse_merge_ranks

__version__ = "0.1.0"

__all__ = ["mla_dcp_lse_merge_ranks"]

try:  # the decode op (its reference and validation) is added beside the merge
    from .decode import mla_decode_a16w8  # noqa: F401

    __all__.append("mla_decode_a16w8")
except ImportError as _e:  # pragma: no cover - only while decode.py is absent
    if "decode" not in str(_e):
        raise
