// Timing-model test kernels: LDS bank conflicts, an MFMA chain, a global load the wave waits for.
#define KERNEL extern "C" __attribute__((global))
#define LDS __attribute__((shared))
typedef unsigned int u32;
#define DEVICE static inline __attribute__((device, always_inline))
DEVICE u32 tid() { return __builtin_amdgcn_workitem_id_x(); }
DEVICE u32 bid() { return __builtin_amdgcn_workgroup_id_x(); }

// one wave: each lane stores and loads LDS dword lane * stride (stride 32: every lane in bank 0)
KERNEL void lds_stride(u32* out, u32 stride) {
  LDS u32 sh[64 * 33];
  u32 i = tid() * stride;
  __atomic_store_n(&sh[i], tid() + 1, __ATOMIC_RELAXED);
  __builtin_amdgcn_s_barrier();
  out[tid()] = __atomic_load_n(&sh[i], __ATOMIC_RELAXED);
}

typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef short s16x4 __attribute__((ext_vector_type(4)));

// n dependent 32x32x8 bf16 MFMAs (accumulating into one tile) per wave
KERNEL void mfma_chain(float* out, int n) {
  s16x4 a = {(short)tid(), 1, 2, 3}, b = {1, 1, 1, 1};
  f32x16 acc = {};
  for (int k = 0; k < n; k++) acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc, 0, 0, 0);
  for (int j = 0; j < 16; j++) out[(bid() * 256 + tid()) * 16 + j] = acc[j];
}

// a dependent load chain: out[i] = src[src[...src[i]]] (n hops), each hop waits for its load
KERNEL void chase(const u32* src, u32* out, int n) {
  u32 p = bid() * 64 + tid();
  for (int k = 0; k < n; k++) p = src[p];
  out[bid() * 64 + tid()] = p;
}

// n iterations of s_nop 15 (16 wait states each) in one wave
KERNEL void nops(u32* out, int n) {
  for (int k = 0; k < n; k++) __asm__ volatile("s_nop 15");
  out[bid() * 64 + tid()] = tid();
}

// one wave: each lane writes its 16-byte slot of LDS, then reads slot[lane] with one ds_read_b128
typedef u32 u32x4 __attribute__((ext_vector_type(4)));
KERNEL void lds_read_b128(u32* out, const u32* slot) {
  LDS u32x4 sh[64];
  sh[tid()] = (u32x4){tid(), 1, 2, 3};
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  u32x4 v = sh[slot[tid()]];
  out[tid()] = v.x + v.y + v.z + v.w;
}

#if defined(__gfx950__)
// n dependent scaled 16x16x128 MFMAs per wave; fmt 0: fp8 x fp8, 1: fp8 x fp4, 2: fp4 x fp4 (CBSZ / BLGP)
typedef int i32x8 __attribute__((ext_vector_type(8)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
KERNEL void mfma_f8f6f4_chain(float* out, int n, int fmt) {
  i32x8 a = {(int)tid(), 1, 2, 3, 4, 5, 6, 7}, b = a;
  f32x4 acc = {};
  for (int k = 0; k < n; k++) {
    if (fmt == 0) acc = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a, b, acc, 0, 0, 0, 127, 0, 127);
    else if (fmt == 1) acc = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a, b, acc, 0, 4, 0, 127, 0, 127);
    else acc = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a, b, acc, 4, 4, 0, 127, 0, 127);
  }
  for (int j = 0; j < 4; j++) out[(bid() * 256 + tid()) * 4 + j] = acc[j];
}
#endif

// a streaming read: n iterations of 8 independent 16-byte loads per lane (8 KiB a wave in flight, distinct
// lines), summed
KERNEL void stream(const u32x4* src, u32* out, int n) {
  u32 acc = 0;
  for (int k = 0; k < n; k++) {
    u32x4 v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = src[((k * 8 + j) * 4 + bid()) * 256 + tid()];
#pragma unroll
    for (int j = 0; j < 8; j++) acc += v[j].x ^ v[j].w;
  }
  out[bid() * 256 + tid()] = acc;
}

// one wave: 4 16-byte raw-buffer loads per lane at lane * 16 + k * 1024 of a buffer of `bytes` bytes (the range
// check: loads past it read zeros)
KERNEL void buffer_range(const u32x4* src, u32* out, u32 bytes) {
  __amdgpu_buffer_rsrc_t r = __builtin_amdgcn_make_buffer_rsrc((void*)src, (short)0, (int)bytes, 0x00020000);
  u32 acc = 0;
#pragma unroll
  for (int k = 0; k < 4; k++) acc += __builtin_amdgcn_raw_buffer_load_b128(r, tid() * 16 + k * 1024, 0, 0)[0];
  out[tid()] = acc;
}
