// gfx942 MHA forward, head dim 128, feature kernels (sinks, soft-cap, window / causal, fp8 descales):
// mha_fwd_feat_<m>, mha_fwd_split_feat_<m>; their splits merge with mha_fwd's mha_merge_<m>. Design: mha_fwd.hpp.
#include "gfx942/mha_fwd.hpp"

MHA_FEAT_KERNELS(rtna, mm::Round::RTNA, 128)
MHA_FEAT_KERNELS(rtne, mm::Round::RTNE, 128)
MHA_FEAT_KERNELS(rtz, mm::Round::RTZ, 128)
