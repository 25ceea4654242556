"""`import moonmath_amd.mla as mla`: the MLA decode ops under the original package's module layout
(SGLang's MoonmathMLABackend imports this module). The same functions as moonmath_amd's top level."""
from moonmath_mla_decode import (
    mla_dcp_lse_merge_ranks,
    mla_decode_a8w8,
    mla_decode_a16w8,
    mla_decode_a16w16,
    mla_decode_mxfp4,
)

__all__ = ["mla_dcp_lse_merge_ranks", "mla_decode_a8w8", "mla_decode_a16w16", "mla_decode_a16w8", "mla_decode_mxfp4"]
