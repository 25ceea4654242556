// Core test kernels for moonmath-emu (compiled for gfx942 and gfx950 by the product toolchain).
#define KERNEL extern "C" __attribute__((global))
#define LDS __attribute__((address_space(3)))
#define DEVICE __attribute__((device)) inline
#define SYNC() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
typedef unsigned int u32;

DEVICE int tid_x() { return __builtin_amdgcn_workitem_id_x(); }
DEVICE int gid_x() { return __builtin_amdgcn_workgroup_id_x(); }

KERNEL void vadd(const float* a, const float* b, float* c, int n) {
  int i = gid_x() * __builtin_amdgcn_workgroup_size_x() + tid_x();
  if (i < n) c[i] = a[i] + b[i];
}

// Reads blockDim/gridDim from the hidden arguments (code object v5) and the 3-D ids.
KERNEL void dims(int* out) {
  int x = __builtin_amdgcn_workitem_id_x(), y = __builtin_amdgcn_workitem_id_y(), z = __builtin_amdgcn_workitem_id_z();
  int bx = __builtin_amdgcn_workgroup_size_x(), by = __builtin_amdgcn_workgroup_size_y(), bz = __builtin_amdgcn_workgroup_size_z();
  int gx = __builtin_amdgcn_workgroup_id_x(), gy = __builtin_amdgcn_workgroup_id_y(), gz = __builtin_amdgcn_workgroup_id_z();
  int nx = __builtin_amdgcn_grid_size_x() / bx;  // grid size in work-items (from the dispatch packet)
  int lin_t = x + bx * (y + by * z);
  int lin_g = gx + nx * (gy + (__builtin_amdgcn_grid_size_y() / by) * gz);
  int* o = out + (lin_g * bx * by * bz + lin_t) * 8;
  o[0] = x; o[1] = y; o[2] = z; o[3] = bx; o[4] = by; o[5] = bz; o[6] = lin_g; o[7] = nx;
}

// Loop + divergent branches.
KERNEL void collatz(const u32* in, u32* steps, int n) {
  int i = gid_x() * 64 + tid_x();
  if (i >= n) return;
  u32 v = in[i], s = 0;
  while (v != 1 && s < 1000) {
    if (v & 1) v = 3 * v + 1; else v >>= 1;
    s++;
  }
  steps[i] = s;
}

// Wave reduction through LDS with barriers (256 threads, 4 waves).
KERNEL void block_sum(const float* x, float* out) {
  __attribute__((shared)) float buf[256];
  int t = tid_x();
  buf[t] = x[gid_x() * 256 + t];
  SYNC();
  for (int s = 128; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    SYNC();
  }
  if (t == 0) out[gid_x()] = buf[0];
}

// Cross-lane: reduction with ds_swizzle / dpp via __shfl_xor-like builtins.
KERNEL void wave_sum_bpermute(const float* x, float* out) {
  int t = tid_x();
  float v = x[t];
  for (int off = 32; off > 0; off >>= 1) {
    int src = (t ^ off) * 4;
    v += __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(src, __builtin_bit_cast(int, v)));
  }
  out[t] = v;
}

// Math: a mix of float ops the compiler lowers to transcendental and conversion instructions.
KERNEL void mathops(const float* x, float* out, int n) {
  int i = gid_x() * 64 + tid_x();
  if (i >= n) return;
  float v = x[i];
  out[i * 6 + 0] = __builtin_amdgcn_exp2f(v);
  out[i * 6 + 1] = __builtin_amdgcn_rcpf(v);
  out[i * 6 + 2] = __builtin_amdgcn_rsqf(v > 0 ? v : -v);
  out[i * 6 + 3] = v / (v + 3.0f);
  out[i * 6 + 4] = (float)(int)(v * 100.0f);
  out[i * 6 + 5] = __builtin_fmaf(v, v, 1.0f);
}

// Private memory through scratch_* instructions and a real (non-inlined) call: s_getpc/s_swappc/s_setpc.
__attribute__((noinline, device)) u32 times3(u32* a, int i) { return a[i] * 3; }
KERNEL void scratch_call(const int* idx, u32* out) {
  u32 a[33];
  int t = tid_x();
  for (int i = 0; i < 33; i++) a[i] = t * 100 + i;
  out[t] = a[idx[t]] + times3(a, idx[t] ^ 1);
}

// IEEE division: the compiler's v_div_scale / v_rcp / v_fma / v_div_fmas / v_div_fixup sequence
KERNEL void fdiv32(const float* a, const float* b, float* out) { int t = tid_x(); out[t] = a[t] / b[t]; }
KERNEL void fdiv64(const double* a, const double* b, double* out) { int t = tid_x(); out[t] = a[t] / b[t]; }

// Agent/system-scope fences and release/acquire atomics: buffer_wbl2 / buffer_inv and sc0/sc1 bits
KERNEL void fences(int* p) {
  int t = tid_x();
  p[t] = t + 1;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
  __hip_atomic_store(p + 64, 5, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
  int v = __hip_atomic_load(p + 65, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
  p[66 + t] = v + p[(t + 1) & 63];
}

// spins until another workgroup sets the flag: never terminates when workgroups run one at a time
KERNEL void spin(volatile int* flag) { while (*flag == 0) {} }
