// MUBUF loads/stores through buffer resource descriptors and their range rules (raw buffers,
// stride 0: an access whose offset is at or beyond num_records bytes is out of range: loads return
// 0, stores are dropped), plus buffer loads straight into LDS.
#include "common.h"

// out[i] = in[i] + 1 for every work-item, with in/out described by num_records (bytes) that may be
// smaller than the tensors behind them.
KERNEL void buffer_copy_b32(const float* in, float* out, u32 in_bytes, u32 out_bytes) {
  const u32 i = bid() * bdim() + tid();
  __amdgpu_buffer_rsrc_t rin = make_rsrc(in, in_bytes);
  __amdgpu_buffer_rsrc_t rout = make_rsrc(out, out_bytes);
  u32 v = __builtin_amdgcn_raw_buffer_load_b32(rin, (int)(i * 4), 0, 0);
  float f = __builtin_bit_cast(float, v) + 1.0f;
  __builtin_amdgcn_raw_buffer_store_b32(__builtin_bit_cast(u32, f), rout, (int)(i * 4), 0, 0);
}

typedef u32 u32x4 __attribute__((ext_vector_type(4)));
// 16-byte accesses with a scalar offset (soffset) added to the per-lane offset
KERNEL void buffer_copy_b128(const u32* in, u32* out, u32 in_bytes, u32 out_bytes, int soff) {
  const u32 i = bid() * bdim() + tid();
  __amdgpu_buffer_rsrc_t rin = make_rsrc(in, in_bytes);
  __amdgpu_buffer_rsrc_t rout = make_rsrc(out, out_bytes);
  u32x4 v = __builtin_amdgcn_raw_buffer_load_b128(rin, (int)(i * 16), soff, 0);
  __builtin_amdgcn_raw_buffer_store_b128(v, rout, (int)(i * 16), soff, 0);
}

// Direct-to-LDS: each wave loads 64 dwords from `in` (byte offset 4*lane) into LDS, then every lane
// reads the dword written for lane (lane + 1) % 64 and the one the next wave loaded.
KERNEL void buffer_load_to_lds(const u32* in, u32* out, u32 in_bytes) {
  LDS static u32 tile[256];
  const u32 t = tid(), lane = t % 64;
  const u32 wave = __builtin_amdgcn_readfirstlane(t / 64);  // wave-uniform: soffset and M0 are scalars
  __amdgpu_buffer_rsrc_t rin = make_rsrc(in, in_bytes);
  __builtin_amdgcn_raw_ptr_buffer_load_lds(rin, (LDS_PTR void*)&tile[wave * 64], 4, (int)(lane * 4), (int)(wave * 256), 0, 0);
  // the loads must land before LDS is read (vmcnt) and before other waves read it (barrier)
  __builtin_amdgcn_s_waitcnt(0x0f70);  // vmcnt(0)
  sync_workgroup();
  out[t] = tile[wave * 64 + (lane + 1) % 64] + 1000u * tile[((wave + 1) % 4) * 64 + lane];
}
