// A mix of what the compiler emits for ordinary code: integer division (32/64-bit), f16/bf16
// arithmetic, float/double math, global float/int atomics, ds_bpermute, bit counting.
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32;
typedef unsigned long long u64;
typedef _Float16 half;
typedef __bf16 bf16;
typedef half h2 __attribute__((ext_vector_type(2)));
#define T __builtin_amdgcn_workitem_id_x()

KERNEL void mixed(const float* x, float* y, u32* u, u64* q, half* h, bf16* b, float* acc, u32* mx, u32 d, u64 dd) {
  int t = T;
  float v = x[t];
  y[t] = __builtin_sqrtf(v * v + 1.0f) + __builtin_fabsf(v) * __builtin_copysignf(1.0f, v);
  u[t] = u[t] / d + u[t] % 7;
  q[t] = q[t] / dd + q[t] % 1000003ull;
  h[t] = (half)(v * 2.0f) + h[t];
  h2 hh = {h[t], (half)1.5f};
  hh = hh * hh + hh;
  h[t] = hh.x - hh.y;
  b[t] = (bf16)(v + (float)b[t]);
  __hip_atomic_fetch_add(acc + (t & 3), v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  __hip_atomic_fetch_max(mx, (u32)(t * 37 % 64), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  y[t + 64] = __builtin_fmaxf(v, 0.5f) + __builtin_floorf(v) + __builtin_truncf(v) + (float)(int)v + (float)(u32)(v * v);
  int sh = __builtin_amdgcn_ds_bpermute(((t + 1) & 63) * 4, t);
  u[t + 64] = sh + __builtin_popcount(u[t]) + __builtin_clz(u[t] | 1);
  double dv = (double)v;
  y[t + 128] = (float)(dv * dv / 3.0 + __builtin_sqrt(dv * dv));
}
