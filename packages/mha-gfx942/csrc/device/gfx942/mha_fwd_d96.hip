// gfx942 MHA forward, head dim 96 (HeadDim<96>: K rows padded to 256 bytes in LDS), default kernels:
// mha_fwd_d96_<m>, mha_fwd_split_d96_<m>, mha_merge_d96_<m>, mha_v_transpose_d96. Design: mha_fwd.hpp.
#include "gfx942/mha_fwd.hpp"

MHA_V_TRANSPOSE(mha_v_transpose_d96, 96)
MHA_KERNELS(d96_rtna, mm::Round::RTNA, 96)
MHA_KERNELS(d96_rtne, mm::Round::RTNE, 96)
MHA_KERNELS(d96_rtz, mm::Round::RTZ, 96)
