// moonmath device prelude: what HIP's headers would give us, from clang builtins only.
// We compile with -nogpuinc -nogpulib, so kernels include this instead of hip_runtime.h.
#pragma once

// No system headers either (they may not exist for the device target): fixed-width types from
// the compiler's predefined macros.
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __SIZE_TYPE__ size_t;

#define MM_KERNEL extern "C" __attribute__((global))
#define MM_DEVICE __attribute__((device)) __attribute__((always_inline)) inline
// Upper bound on the workgroup size the kernel is compiled for (lets the compiler budget registers).
#define MM_LAUNCH_BOUNDS(max_threads) __attribute__((amdgpu_flat_work_group_size(1, max_threads)))
#define MM_LDS __attribute__((shared))

namespace mm {

typedef float f32x2 __attribute__((ext_vector_type(2)));
typedef _Float16 f16x2 __attribute__((ext_vector_type(2)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef uint32_t u32x2 __attribute__((ext_vector_type(2)));
typedef uint32_t u32x3 __attribute__((ext_vector_type(3)));
typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
typedef uint32_t u32x8 __attribute__((ext_vector_type(8)));
typedef int32_t i32x8 __attribute__((ext_vector_type(8)));
typedef short i16x4 __attribute__((ext_vector_type(4)));
typedef short i16x8 __attribute__((ext_vector_type(8)));
typedef __bf16 bf16x4 __attribute__((ext_vector_type(4)));
typedef __bf16 bf16x8 __attribute__((ext_vector_type(8)));

constexpr int kWaveSize = 64;

MM_DEVICE uint32_t thread_id_x() { return __builtin_amdgcn_workitem_id_x(); }
MM_DEVICE uint32_t thread_id_y() { return __builtin_amdgcn_workitem_id_y(); }
MM_DEVICE uint32_t thread_id_z() { return __builtin_amdgcn_workitem_id_z(); }
MM_DEVICE uint32_t block_id_x() { return __builtin_amdgcn_workgroup_id_x(); }
MM_DEVICE uint32_t block_id_y() { return __builtin_amdgcn_workgroup_id_y(); }
MM_DEVICE uint32_t block_id_z() { return __builtin_amdgcn_workgroup_id_z(); }
// Workgroup sizes and counts come from the code object v5 hidden kernel arguments.
MM_DEVICE uint32_t block_dim_x() { return __builtin_amdgcn_workgroup_size_x(); }
MM_DEVICE uint32_t block_dim_y() { return __builtin_amdgcn_workgroup_size_y(); }
MM_DEVICE uint32_t block_dim_z() { return __builtin_amdgcn_workgroup_size_z(); }
MM_DEVICE uint32_t grid_dim_x() { return __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(); }

MM_DEVICE uint32_t lane_id() { return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)); }
MM_DEVICE uint32_t wave_id() { return __builtin_amdgcn_readfirstlane(thread_id_x() / kWaveSize); }

// Wave-uniform copy of a value (a scalar register), from lane 0 of the active lanes.
MM_DEVICE uint32_t uniform(uint32_t v) { return __builtin_amdgcn_readfirstlane(v); }
MM_DEVICE float uniform(float v) { return __builtin_bit_cast(float, __builtin_amdgcn_readfirstlane(__builtin_bit_cast(uint32_t, v))); }

template <typename To, typename From>
MM_DEVICE To bit_cast(From v) { return __builtin_bit_cast(To, v); }

}  // namespace mm
