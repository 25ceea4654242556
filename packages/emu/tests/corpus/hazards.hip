// Planted bugs for the emulator's hazard checker, each next to its correct twin.
#include "common.h"

// Reads the destination of a global load before any s_waitcnt retires it (inline asm, so the
// compiler cannot insert the wait). early_read is the bug; waited_read is correct.
KERNEL void early_read(const u32* in, u32* out) {
  const u32 t = tid();
  const u32* p = in + t;
  u32 v;
  asm volatile("global_load_dword %0, %1, off\n\tv_add_u32 %0, 1, %0" : "=&v"(v) : "v"(p) : "memory");
  out[t] = v;
}

KERNEL void waited_read(const u32* in, u32* out) {
  const u32 t = tid();
  const u32* p = in + t;
  u32 v;
  asm volatile("global_load_dword %0, %1, off\n\ts_waitcnt vmcnt(0)\n\tv_add_u32 %0, 1, %0" : "=&v"(v) : "v"(p) : "memory");
  out[t] = v;
}

// Two waves exchange data through LDS: each writes its half, then reads the other wave's half.
// lds_exchange_racy has no barrier between the write and the read (an LDS race across waves);
// lds_exchange_sync is correct. block = 128.
KERNEL void lds_exchange_racy(const int* in, int* out) {
  LDS static int s[128];
  const u32 t = tid();
  s[t] = in[t] * 2;
  asm volatile("" ::: "memory");  // compiler-only: keep the LDS write before the read
  out[t] = s[t ^ 64u];
}

KERNEL void lds_exchange_sync(const int* in, int* out) {
  LDS static int s[128];
  const u32 t = tid();
  s[t] = in[t] * 2;
  sync_workgroup();
  out[t] = s[t ^ 64u];
}
