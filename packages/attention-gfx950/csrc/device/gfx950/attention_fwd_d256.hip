// gfx950 attention forward, kernel head dims (Dqk, Dv) = (256, 128) (issue 17): head dims 256 run as two column
// passes of these kernels, each over one half of V's and out's columns (kernel.py COLUMN_PASSES; one 32-row tile
// per wave cannot hold O and Q of Dv = Dqk = 256). Every feature twin (attention_fwd_kernels.hpp).
#include "attention_fwd_kernels.hpp"

ATTN_FWD_KERNELS(attn_fwd_d256_128, 256, 128)
