// gfx942 MHA forward, head dim 64 (HeadDim<64>), default kernels: mha_fwd_d64_<m>, mha_fwd_split_d64_<m>,
// mha_merge_d64_<m>, mha_v_transpose_d64, mha_kv_fp8_d64. Design: mha_fwd.hpp.
#include "gfx942/mha_fwd.hpp"

MHA_V_TRANSPOSE(mha_v_transpose_d64, 64)
MHA_KV_FP8(mha_kv_fp8_d64, 64)
MHA_KERNELS(d64_rtna, mm::Round::RTNA, 64)
MHA_KERNELS(d64_rtne, mm::Round::RTNE, 64)
MHA_KERNELS(d64_rtz, mm::Round::RTZ, 64)
