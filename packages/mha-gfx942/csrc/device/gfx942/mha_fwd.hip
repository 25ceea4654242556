// gfx942 MHA forward, head dim 128, default kernels: mha_fwd_<m>, mha_fwd_split_<m>, mha_merge_<m> (the merge of
// the feature kernels' splits too), the V transpose and the fp8 K/V widening pass. Design: mha_fwd.hpp.
#include "gfx942/mha_fwd.hpp"

MHA_V_TRANSPOSE(mha_v_transpose, 128)
MHA_KV_FP8(mha_kv_fp8, 128)
MHA_KERNELS(rtna, mm::Round::RTNA, 128)
MHA_KERNELS(rtne, mm::Round::RTNE, 128)
MHA_KERNELS(rtz, mm::Round::RTZ, 128)
