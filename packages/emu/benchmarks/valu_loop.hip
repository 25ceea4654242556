// Benchmark kernel: a VALU-bound loop (f32 multiply-adds, integer ops) per work-item.
#define KERNEL extern "C" __attribute__((global))

KERNEL void valu_loop(float* out, int iters) {
  const unsigned t = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  float a = (float)t * 0.001f, b = 1.0001f, c = 0.5f, d = 0.25f;
  unsigned h = t;
  for (int i = 0; i < iters; ++i) {
    a = a * b + c;
    c = c * b - d;
    d = d * 0.999f + a;
    h = (h ^ (h << 5)) + (unsigned)i;
    b = b + 1e-7f;
  }
  out[t] = a + c + d + (float)(h & 255u);
}
