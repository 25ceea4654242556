// Hazard checker cases in inline asm (the compiler cannot insert or move waits inside asm).
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32;
typedef unsigned long long u64;
#define T __builtin_amdgcn_workitem_id_x()
// 32-bit LDS address of an element (a generic pointer cast to the LDS address space)
#define LA(x) ((__attribute__((address_space(3))) u32*)(x))

// two scalar loads, wait for "one outstanding", then use the FIRST: SMEM returns out of order -> hazard
KERNEL void smem_order(const u32* p, u32* out, int wait_all) {
  u32 a, b;
  if (wait_all)
    asm volatile("s_load_dword %0, %2, 0x0\n\ts_load_dword %1, %2, 0x4\n\ts_waitcnt lgkmcnt(0)\n\ts_add_u32 %0, %0, %1" : "=&s"(a), "=&s"(b) : "s"(p) : "scc");
  else
    asm volatile("s_load_dword %0, %2, 0x0\n\ts_load_dword %1, %2, 0x4\n\ts_waitcnt lgkmcnt(1)\n\ts_add_u32 %0, %0, 1" : "=&s"(a), "=&s"(b) : "s"(p) : "scc");
  out[T] = a;
}

// two LDS reads, lgkmcnt(1): the first has returned (LDS is in order); `second` reads the second too early
KERNEL void ds_order(u32* out, int second) {
  __attribute__((shared)) static u32 s[65];
  u32 t = T, a, b;
  s[t] = t * 2;
  if (t == 0) s[64] = 128;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  if (second)
    asm volatile("ds_read_b32 %0, %2\n\tds_read_b32 %1, %2 offset:4\n\ts_waitcnt lgkmcnt(1)\n\tv_add_u32 %0, %1, 1\n\ts_waitcnt lgkmcnt(0)" : "=&v"(a), "=&v"(b) : "v"(LA(&s[t])) : "memory");
  else
    asm volatile("ds_read_b32 %0, %2\n\tds_read_b32 %1, %2 offset:4\n\ts_waitcnt lgkmcnt(1)\n\tv_add_u32 %0, %0, 1\n\ts_waitcnt lgkmcnt(0)" : "=&v"(a), "=&v"(b) : "v"(LA(&s[t])) : "memory");
  out[t] = a + b;
}

// two global loads, vmcnt(1): in order, so the first is readable, the second is not
KERNEL void vm_order(const u32* p, u32* out, int second) {
  u32 t = T, a, b;
  const u32* q = p + t;
  if (second)
    asm volatile("global_load_dword %0, %2, off\n\tglobal_load_dword %1, %2, off offset:4\n\ts_waitcnt vmcnt(1)\n\tv_add_u32 %0, %1, 1\n\ts_waitcnt vmcnt(0)" : "=&v"(a), "=&v"(b) : "v"(q));
  else
    asm volatile("global_load_dword %0, %2, off\n\tglobal_load_dword %1, %2, off offset:4\n\ts_waitcnt vmcnt(1)\n\tv_add_u32 %0, %0, 1\n\ts_waitcnt vmcnt(0)" : "=&v"(a), "=&v"(b) : "v"(q));
  out[t] = a + b;
}

// overwriting the destination of an outstanding load (the load would land later and clobber it)
KERNEL void waw(const u32* p, u32* out) {
  u32 t = T, a;
  asm volatile("global_load_dword %0, %1, off\n\tv_mov_b32 %0, 7\n\ts_waitcnt vmcnt(0)" : "=&v"(a) : "v"(p + t));
  out[t] = a;
}

// LDS written by wave 0 and read by wave 1: `mode` 0 = barrier with the LDS write retired first (ok),
// 1 = barrier but the write not retired by lgkmcnt (hazard), 2 = no barrier (race)
KERNEL void lds_pass(u32* out, int mode) {
  __attribute__((shared)) static u32 s[64];
  u32 t = T, v = 0;
  u32 wave = __builtin_amdgcn_readfirstlane(t / 64);
  if (mode == 0) {
    if (wave == 0) asm volatile("ds_write_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" :: "v"(LA(&s[t])), "v"(t + 5) : "memory");
    asm volatile("s_barrier" ::: "memory");
  } else if (mode == 1) {
    if (wave == 0) asm volatile("ds_write_b32 %0, %1" :: "v"(LA(&s[t])), "v"(t + 5) : "memory");
    asm volatile("s_barrier" ::: "memory");
  } else {
    if (wave == 0) asm volatile("ds_write_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" :: "v"(LA(&s[t])), "v"(t + 5) : "memory");
  }
  if (wave == 1) asm volatile("ds_read_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" : "=v"(v) : "v"(LA(&s[(t - 64) & 63])) : "memory");
  asm volatile("s_waitcnt lgkmcnt(0)" ::: "memory");
  out[t] = v;
}

// write-after-read race: after the barrier, wave 0 reads its slots and wave 1 overwrites them with no
// barrier in between (the emulator runs wave 0 first, so it sees the read, then the conflicting write)
KERNEL void lds_war(u32* out) {
  __attribute__((shared)) static u32 s[64];
  u32 t = T, v = 0;
  u32 wave = __builtin_amdgcn_readfirstlane(t / 64);
  if (wave == 0) asm volatile("ds_write_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" :: "v"(LA(&s[t])), "v"(t) : "memory");
  asm volatile("s_barrier" ::: "memory");
  if (wave == 0) asm volatile("ds_read_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" : "=v"(v) : "v"(LA(&s[t])) : "memory");
  if (wave == 1) asm volatile("ds_write_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" :: "v"(LA(&s[(t - 64) & 63])), "v"(t + 1) : "memory");
  out[t] = v;
}

// Wave 0 writes LDS, both waves pass TWO barriers, wave 1 reads. The ISA needs the write retired before
// some barrier that precedes the read, not necessarily the first one after the write (AITER's kernels
// wait one barrier later). `mode` 0: ds_write, retired (lgkmcnt(0)) only between the barriers (legal);
// 1: ds_write never retired before either barrier (hazard); 2: direct-to-LDS load retired (vmcnt(0))
// between the barriers (legal); 3: direct-to-LDS load retired only after the read (hazard).
KERNEL void lds_pass_late(const u32* in, u32* out, int mode) {
  __attribute__((shared)) static u32 s[64];
  u32 t = T, v = 0;
  // use the kernel arguments here, so that their scalar loads are waited for before the LDS write
  // (a later lgkmcnt(0) for them would retire the write too)
  asm volatile("; args %0 %1" :: "s"(mode), "s"(in));
  u32 wave = __builtin_amdgcn_readfirstlane(t / 64);
  if (wave == 0) {
    if (mode < 2)
      asm volatile("ds_write_b32 %0, %1" :: "v"(LA(&s[t])), "v"(t + 5) : "memory");
    else
      __builtin_amdgcn_raw_ptr_buffer_load_lds(__builtin_amdgcn_make_buffer_rsrc((void*)in, 0, 256, 0x00020000),
                                               LA(s), 4, (int)(t * 4), 0, 0, 0);
  }
  asm volatile("s_barrier" ::: "memory");
  if (mode == 0) asm volatile("s_waitcnt lgkmcnt(0)" ::: "memory");
  if (mode == 2) asm volatile("s_waitcnt vmcnt(0)" ::: "memory");
  asm volatile("s_barrier" ::: "memory");
  if (wave == 1) asm volatile("ds_read_b32 %0, %1\n\ts_waitcnt lgkmcnt(0)" : "=v"(v) : "v"(LA(&s[(t - 64) & 63])) : "memory");
  asm volatile("s_waitcnt vmcnt(0) lgkmcnt(0)" ::: "memory");
  out[t] = v;
}
