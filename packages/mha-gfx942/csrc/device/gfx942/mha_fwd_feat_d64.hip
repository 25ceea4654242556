// gfx942 MHA forward, head dim 64, feature kernels: mha_fwd_feat_d64_<m>, mha_fwd_split_feat_d64_<m> (merged by
// mha_fwd_d64's mha_merge_d64_<m>). Design: mha_fwd.hpp.
#include "gfx942/mha_fwd.hpp"

MHA_FEAT_KERNELS(d64_rtna, mm::Round::RTNA, 64)
MHA_FEAT_KERNELS(d64_rtne, mm::Round::RTNE, 64)
MHA_FEAT_KERNELS(d64_rtz, mm::Round::RTZ, 64)
