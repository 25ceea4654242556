// Waits, barriers and scheduling hints (gfx9 family: gfx942, gfx950).
#pragma once
#include "moonmath/prelude.hpp"

namespace mm {

// s_waitcnt immediate for gfx9: vmcnt[3:0] + vmcnt_hi[15:14], expcnt[6:4], lgkmcnt[11:8].
constexpr int waitcnt_imm(int vmcnt, int expcnt, int lgkmcnt) {
  return (vmcnt & 0xF) | ((vmcnt >> 4) << 14) | ((expcnt & 0x7) << 4) | ((lgkmcnt & 0xF) << 8);
}
constexpr int kNoWait = 63;  // vmcnt max (6 bits); expcnt/lgkmcnt saturate below

template <int N> MM_DEVICE void wait_vmcnt() { __builtin_amdgcn_s_waitcnt(waitcnt_imm(N, 7, 15)); }
template <int N> MM_DEVICE void wait_lgkmcnt() { __builtin_amdgcn_s_waitcnt(waitcnt_imm(kNoWait, 7, N)); }
MM_DEVICE void wait_all() { __builtin_amdgcn_s_waitcnt(waitcnt_imm(0, 0, 0)); }

// Workgroup barrier with LDS visibility: all LDS traffic retired, then s_barrier.
MM_DEVICE void block_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

template <int P> MM_DEVICE void set_priority() { __builtin_amdgcn_s_setprio(P); }
MM_DEVICE void sched_barrier() { __builtin_amdgcn_sched_barrier(0); }

}  // namespace mm
