// Vector add with a bounds check, and a grid-stride variant that reads the grid size from the
// code-object-v5 hidden arguments.
#include "common.h"

KERNEL void vadd(const float* a, const float* b, float* c, int n) {
  int i = (int)(bid() * bdim() + tid());
  if (i < n) c[i] = a[i] + b[i];
}

KERNEL void vadd_grid_stride(const float* a, const float* b, float* c, int n) {
  int stride = (int)(grid_blocks_x() * bdim());
  for (int i = (int)(bid() * bdim() + tid()); i < n; i += stride) c[i] = a[i] * 2.0f + b[i];
}

// Writes out[i] = i for i < n. Passing n larger than out's length is the planted out-of-bounds store.
KERNEL void fill_index(int* out, int n) {
  int i = (int)(bid() * bdim() + tid());
  if (i < n) out[i] = i;
}
