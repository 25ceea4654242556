// gfx950 attention forward kernels, head dims (128, 128) and (192, 128) (MLA prefill): the pipeline of
// attention_fwd.hpp over the dense partitioner, each with its compile-time feature twins
// (attention_fwd_kernels.hpp: attn_fwd_d128, attn_fwd_d128_softcap, ..._window, ..._softcap_window and the
// _sinks of each). The other head dims are in attention_fwd_dims.hip.
#include "attention_fwd_kernels.hpp"

ATTN_FWD_KERNELS(attn_fwd_d128, 128, 128)
ATTN_FWD_KERNELS(attn_fwd_d192_128, 192, 128)
