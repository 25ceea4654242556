// Core test kernels: sanitizer, buffer resources, direct-to-LDS, scalar buffer loads, scratch.
#define KERNEL extern "C" __attribute__((global))
#define LDS __attribute__((shared))
typedef unsigned int u32;
#define DEVICE static inline __attribute__((device, always_inline))
DEVICE u32 tid() { return __builtin_amdgcn_workitem_id_x(); }
DEVICE u32 bid() { return __builtin_amdgcn_workgroup_id_x(); }
DEVICE void sync_workgroup() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
typedef u32 u32x4 __attribute__((ext_vector_type(4)));
// the same V# as a plain SGPR quad for inline asm: base[47:0], stride[61:48], num_records, word3
DEVICE u32x4 vsharp(const void* p, u32 stride, u32 num_records) {
  unsigned long long a = (unsigned long long)p;
  u32x4 r = {(u32)a, (u32)(a >> 32) | (stride << 16), num_records, 0x00020000u};
  return r;
}
DEVICE __amdgpu_buffer_rsrc_t rsrc(const void* p, short stride, u32 num_records) {
  return __builtin_amdgcn_make_buffer_rsrc((void*)p, stride, (int)num_records, 0x00020000);
}

// plain global store of out[i] for i in [0, n): the planted bug is launching with n > out.numel()
KERNEL void fill(u32* out, int n) {
  int i = bid() * 64 + tid();
  if (i < n) out[i] = (u32)i * 3u;
}

// plain global load past the end
KERNEL void gather(const u32* in, const int* idx, u32* out) {
  int t = tid();
  out[t] = in[idx[t]];
}

// LDS out of bounds: static 256-byte LDS, index from memory
KERNEL void lds_oob(const int* idx, u32* out) {
  LDS static u32 tile[64];
  int t = tid();
  tile[t] = t;
  sync_workgroup();
  out[t] = ((volatile u32*)tile)[idx[t]];
}

// dynamic LDS: extern shared array sized by the launch
extern LDS u32 dyn[];
KERNEL void dyn_lds(u32* out, int n) {
  int t = tid();
  for (int i = t; i < n; i += 64) dyn[i] = i + 1;
  sync_workgroup();
  u32 s = 0;
  for (int i = 0; i < n; i++) s += dyn[i];
  out[t] = s;
}

// structured buffer (stride != 0, idxen): element i at base + i*stride + offset; index >= num_records is OOB
KERNEL void struct_load(const u32* in, u32* out, int stride, u32 num_records, u32 voff) {
  int t = tid();
  u32x4 r = vsharp(in, (u32)stride, num_records);
  u32 v;
  asm volatile("buffer_load_dword %0, %1, %2, 0 idxen\n\ts_waitcnt vmcnt(0)" : "=v"(v) : "v"(t), "s"(r) : "memory");
  out[t] = v;
  (void)voff;
}

// raw buffer whose num_records exceeds the tensor: in-range for the descriptor, outside every buffer
KERNEL void raw_store(u32* out, u32 num_records) {
  int t = tid();
  __builtin_amdgcn_raw_buffer_store_b32((u32)t, rsrc(out, 0, num_records), t * 4, 0, 0);
}

// s_buffer_load through a descriptor (scalar loads are range checked per dword too)
KERNEL void sbuf(const u32* in, u32* out, u32 num_records) {
  u32x4 r = vsharp(in, 0, num_records);
  unsigned long long ab;
  asm volatile("s_buffer_load_dwordx2 %0, %1, 0x8\n\ts_waitcnt lgkmcnt(0)" : "=s"(ab) : "s"(r));
  out[tid()] = (u32)ab * 1000u + (u32)(ab >> 32);
}

// direct-to-LDS with the wait: correct
KERNEL void lds_dma_ok(const u32* in, u32* out) {
  LDS static u32 tile[64];
  u32 t = tid();
  __builtin_amdgcn_raw_ptr_buffer_load_lds(rsrc(in, 0, 256), (__attribute__((address_space(3))) void*)tile, 4, (int)(t * 4), 0, 0, 0);
  __builtin_amdgcn_s_waitcnt(0x0f70);  // vmcnt(0)
  u32 v;
  asm volatile("ds_read_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" : "=v"(v) : "v"(((t + 1) % 64) * 4) : "memory");
  out[t] = v;
}

// direct-to-LDS read before vmcnt retires the load (inline asm: the compiler cannot add the wait)
KERNEL void lds_dma_early(const u32* in, u32* out) {
  LDS static u32 tile[64];
  u32 t = tid();
  __builtin_amdgcn_raw_ptr_buffer_load_lds(rsrc(in, 0, 256), (__attribute__((address_space(3))) void*)tile, 4, (int)(t * 4), 0, 0, 0);
  u32 v;
  asm volatile("ds_read_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" : "=v"(v) : "v"(((t + 1) % 64) * 4) : "memory");
  __builtin_amdgcn_s_waitcnt(0x0f70);
  out[t] = v;
}

// private (scratch) memory: a dynamically indexed local array forces scratch
KERNEL void scratch_array(const int* idx, u32* out) {
  volatile u32 a[40];
  int t = tid();
  for (int i = 0; i < 40; i++) a[i] = t * 100 + i;
  out[t] = a[idx[t]];
}

#ifdef __gfx950__
// gfx950: 16-byte buffer loads straight into LDS (each lane's 16 bytes land at M0 + lane * 16)
KERNEL void lds_dma_x4(const u32* in, u32* out, u32 num_records) {
  LDS static u32 tile[256];
  u32 t = tid();
  __builtin_amdgcn_raw_ptr_buffer_load_lds(rsrc(in, 0, num_records), (__attribute__((address_space(3))) void*)tile, 16, (int)(t * 16), 0, 0, 0);
  __builtin_amdgcn_s_waitcnt(0x0f70);  // vmcnt(0)
  for (int i = 0; i < 4; i++) out[t * 4 + i] = tile[t * 4 + i];
}
#endif
