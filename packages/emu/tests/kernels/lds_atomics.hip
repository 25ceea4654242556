// LDS atomics as the compiler emits them for shared-memory atomicAdd/Max/CAS on 32- and 64-bit data.
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32;
typedef unsigned long long u64;
#define T __builtin_amdgcn_workitem_id_x()
#define SYNC() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)

KERNEL void lds_atomics(const int* x, int* out, u64* out64, float* outf) {
  __attribute__((shared)) int si[4];
  __attribute__((shared)) u64 s64[2];
  __attribute__((shared)) float sf[1];
  int t = T;
  if (t < 4) si[t] = 0;
  if (t < 2) s64[t] = 0;
  if (t == 0) sf[0] = -1e30f;
  SYNC();
  int v = x[t];
  __hip_atomic_fetch_add(&si[0], v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __hip_atomic_fetch_max(&si[1], v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  int old = __hip_atomic_fetch_min(&si[2], v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __hip_atomic_fetch_add(&s64[0], (u64)(unsigned)v * 0x100000001ull, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __hip_atomic_fetch_xor(&s64[1], 1ull << (t % 64), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  // float max through a compare-and-swap loop (ds_cmpst_rtn_b32)
  float f = (float)v * 0.5f;
  int cur = __builtin_bit_cast(int, sf[0]);
  while (__builtin_bit_cast(float, cur) < f) {
    int expected = cur;
    __hip_atomic_compare_exchange_strong((int*)&sf[0], &expected, __builtin_bit_cast(int, f), __ATOMIC_RELAXED, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
    if (expected == cur) break;
    cur = expected;
  }
  SYNC();
  out[t] = old;
  if (t < 3) out[64 + t] = si[t];
  if (t < 2) out64[t] = s64[t];
  if (t == 0) outf[0] = sf[0];
}
