// Wave-wide integer sum reductions by three cross-lane mechanisms: DPP, ds_swizzle and ds_bpermute.
// Each wave writes the sum of its 64 inputs to out[wave]; the lane-level partial results of the DPP
// steps are also written (dpp_steps) so lane patterns are checked, not just the total.
#include "common.h"

// DPP controls (GFX9): quad_perm 0x00-0xff, row_ror:n 0x120+n
#define DPP_QUAD_PERM(a, b, c, d) ((a) | ((b) << 2) | ((c) << 4) | ((d) << 6))
#define DPP_ROW_ROR(n) (0x120 + (n))
#define DPP_ROW_SHR(n) (0x110 + (n))

KERNEL void reduce_dpp(const int* in, int* out, int* steps) {
  const u32 gid = bid() * bdim() + tid();
  const u32 wave = gid / 64;
  int v = in[gid];
  v += __builtin_amdgcn_update_dpp(0, v, DPP_QUAD_PERM(1, 0, 3, 2), 0xf, 0xf, false);
  steps[gid * 4 + 0] = v;
  v += __builtin_amdgcn_update_dpp(0, v, DPP_QUAD_PERM(2, 3, 0, 1), 0xf, 0xf, false);
  steps[gid * 4 + 1] = v;
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_ROR(4), 0xf, 0xf, false);
  steps[gid * 4 + 2] = v;
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_ROR(8), 0xf, 0xf, false);
  steps[gid * 4 + 3] = v;
  // every lane of a 16-lane row now holds the row sum; add the four rows
  int total = __builtin_amdgcn_readlane(v, 0) + __builtin_amdgcn_readlane(v, 16) +
              __builtin_amdgcn_readlane(v, 32) + __builtin_amdgcn_readlane(v, 48);
  if (lane_id() == 0) out[wave] = total;
}

// row_shr with bound_ctrl: lanes shifted in from outside the row read 0 (an inclusive prefix scan
// within each row of 16 lanes).
KERNEL void scan_row_dpp(const int* in, int* out) {
  const u32 gid = bid() * bdim() + tid();
  int v = in[gid];
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_SHR(1), 0xf, 0xf, true);
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_SHR(2), 0xf, 0xf, true);
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_SHR(4), 0xf, 0xf, true);
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_SHR(8), 0xf, 0xf, true);
  out[gid] = v;
}

// ds_swizzle in bit-mask mode (offset[15] = 0): lane reads lane ((l & and) | or) ^ xor within 32
#define SWZ_XOR(x) (0x1f | ((x) << 10))

KERNEL void reduce_swizzle(const int* in, int* out) {
  const u32 gid = bid() * bdim() + tid();
  const u32 wave = gid / 64;
  int v = in[gid];
  v += __builtin_amdgcn_ds_swizzle(v, SWZ_XOR(1));
  v += __builtin_amdgcn_ds_swizzle(v, SWZ_XOR(2));
  v += __builtin_amdgcn_ds_swizzle(v, SWZ_XOR(4));
  v += __builtin_amdgcn_ds_swizzle(v, SWZ_XOR(8));
  v += __builtin_amdgcn_ds_swizzle(v, SWZ_XOR(16));
  int total = __builtin_amdgcn_readlane(v, 0) + __builtin_amdgcn_readlane(v, 32);
  if (lane_id() == 0) out[wave] = total;
}

// ds_bpermute: lane reads the value of lane (addr / 4); butterfly over the full wave
KERNEL void reduce_bpermute(const int* in, int* out, int* after_first) {
  const u32 gid = bid() * bdim() + tid();
  const u32 wave = gid / 64;
  const int lane = (int)lane_id();
  int v = in[gid];
  for (int m = 32; m >= 1; m >>= 1) {
    v += __builtin_amdgcn_ds_bpermute((lane ^ m) * 4, v);
    if (m == 32) after_first[gid] = v;
  }
  if (lane == 0) out[wave] = v;
}

// ds_permute (push form): lane l sends its value to lane (63 - l)
KERNEL void reverse_permute(const int* in, int* out) {
  const u32 gid = bid() * bdim() + tid();
  const int lane = (int)lane_id();
  out[gid] = __builtin_amdgcn_ds_permute((63 - lane) * 4, in[gid]);
}
