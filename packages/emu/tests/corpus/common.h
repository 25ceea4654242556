// Shared helpers for the emulator test corpus: clang builtins only (no HIP headers).
#pragma once
#define KERNEL extern "C" __attribute__((global))
#define DEVICE static inline __attribute__((device, always_inline))
// LDS arrays: HIP's __shared__ (clang attribute "shared"; address space 3)
#define LDS __attribute__((shared))
#define LDS_PTR __attribute__((address_space(3)))

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

DEVICE u32 tid() { return __builtin_amdgcn_workitem_id_x(); }
DEVICE u32 bid() { return __builtin_amdgcn_workgroup_id_x(); }
DEVICE u32 bid_y() { return __builtin_amdgcn_workgroup_id_y(); }
DEVICE u32 bdim() { return __builtin_amdgcn_workgroup_size_x(); }
// code object v5 hidden argument block_count_x (offset 0 of the implicit arguments)
DEVICE u32 grid_blocks_x() { return ((const u32 __attribute__((address_space(4)))*)__builtin_amdgcn_implicitarg_ptr())[0]; }
DEVICE u32 lane_id() { return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)); }

// __syncthreads(): make this wave's LDS/global writes visible to the workgroup, then barrier
DEVICE void sync_workgroup() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// buffer resource word 3 for raw (untyped) buffers on gfx9 (data format 32, as composable_kernel uses)
#define BUFFER_RSRC_WORD3 0x00020000
DEVICE __amdgpu_buffer_rsrc_t make_rsrc(const void* p, u32 num_records) {
  return __builtin_amdgcn_make_buffer_rsrc((void*)p, (short)0, (int)num_records, (int)BUFFER_RSRC_WORD3);
}
