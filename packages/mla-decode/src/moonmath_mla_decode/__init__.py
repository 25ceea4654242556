"""moonmath-mla-decode: MLA absorbed decode (bf16 Q x fp8 / bf16 / MXFP4 KV), any q_len, DCP, and the rank merge."""
from .decode import mla_decode_a16w8
from .formats import mla_decode_a8w8, mla_decode_a16w16, mla_decode_mxfp4
from .merge import mla_dcp_lse_merge_ranks

__version__ = "0.1.0"

__all__ = ["mla_dcp_lse_merge_ranks", "mla_decode_a8w8", "mla_decode_a16w16", "mla_decode_a16w8", "mla_decode_mxfp4"]
