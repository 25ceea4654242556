// gfx942 MHA forward, head dim 96, feature kernels: mha_fwd_feat_d96_<m>, mha_fwd_split_feat_d96_<m> (merged by
// mha_fwd_d96's mha_merge_d96_<m>). Design: mha_fwd.hpp.
#include "gfx942/mha_fwd.hpp"

MHA_FEAT_KERNELS(d96_rtna, mm::Round::RTNA, 96)
MHA_FEAT_KERNELS(d96_rtne, mm::Round::RTNE, 96)
MHA_FEAT_KERNELS(d96_rtz, mm::Round::RTZ, 96)
