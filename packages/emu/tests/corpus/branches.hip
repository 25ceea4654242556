// Data-dependent loops and divergent branches.
#include "common.h"

// Collatz trajectory per work-item: a loop whose trip count differs per lane, with a branch inside.
KERNEL void collatz(const u32* in, u32* steps, u32* peak, int n) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n) return;
  u32 x = in[i], s = 0, p = x;
  while (x != 1u && s < 500u) {
    if (x & 1u) x = 3u * x + 1u;
    else x >>= 1;
    p = x > p ? x : p;
    ++s;
  }
  steps[i] = s;
  peak[i] = p;
}

// Nested divergent branches on lane bits and data; a switch; an early exit for some lanes.
KERNEL void classify(const int* in, int* out, float* fout, int n) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n) return;
  int v = in[i];
  int r;
  if (v < 0) {
    if ((i & 3) == 0) r = -v;
    else r = v * 3;
  } else if (v % 7 == 0) {
    r = 1000 + (i & 15);
  } else {
    switch (v & 3) {
      case 0: r = v >> 1; break;
      case 1: r = v ^ 0x55; break;
      case 2: r = v + i; break;
      default: r = -1; break;
    }
  }
  out[i] = r;
  float f = (float)v;
  if (i & 1) f = f * 0.5f;
  else f = f + 0.25f;
  fout[i] = f;
}
