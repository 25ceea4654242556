// Lane checker cases: an MFMA reads all 64 lanes of its operands whatever EXEC is, so lanes written
// under a narrower EXEC (stale) or never written (undefined) reach its result. Inline asm fixes the
// EXEC masks and registers; v200+ are never written by the compiler's code (undefined at wave start).
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32;
typedef unsigned long long u64;
typedef float f4 __attribute__((ext_vector_type(4)));
#define T __builtin_amdgcn_workitem_id_x()
#define WAIT_MFMA "s_nop 7\n\ts_nop 7\n\ts_nop 3\n\t"

// A (16x16 f16, 4 per lane) from ab[0:64), B from ab[64:128), a second B from ab[128:192).
// mode 0: B recomputed under full EXEC, MFMA under full EXEC (clean)
//      1: EXEC = lanes 0-31, B recomputed there (lanes 32-63 keep the old B), MFMA there (stale: the miscompile)
//      2: EXEC = lanes 0-31, MFMA there on operands written under full EXEC (sunk but harmless)
//      3: B = a row never written but in lanes l % 16 < 8 (columns j >= 8 of D undefined), full EXEC
//      4: as 3, D staged through LDS before the store
// Each lane t with bit t of store_mask set stores D (4 floats).
KERNEL void lanes_mfma(const u64* ab, f4* out, int mode, u64 store_mask) {
  u32 t = T;
  u64 a = ab[t], b = ab[64 + t], b2 = ab[128 + t];
  f4 d;
  if (mode == 0) {
    asm volatile("v_lshlrev_b64 %[b], 0, %[b2]\n\tv_mfma_f32_16x16x16_f16 %[d], %[a], %[b], 0\n\t" WAIT_MFMA
                 : [d] "=&v"(d), [b] "+v"(b) : [a] "v"(a), [b2] "v"(b2));
  } else if (mode == 1) {
    asm volatile("s_mov_b64 s[40:41], exec\n\ts_mov_b32 exec_hi, 0\n\t"
                 "v_lshlrev_b64 %[b], 0, %[b2]\n\tv_mfma_f32_16x16x16_f16 %[d], %[a], %[b], 0\n\t" WAIT_MFMA
                 "s_mov_b64 exec, s[40:41]"
                 : [d] "=&v"(d), [b] "+v"(b) : [a] "v"(a), [b2] "v"(b2) : "s40", "s41");
  } else if (mode == 2) {
    asm volatile("s_mov_b64 s[40:41], exec\n\ts_mov_b32 exec_hi, 0\n\t"
                 "v_mfma_f32_16x16x16_f16 %[d], %[a], %[b], 0\n\t" WAIT_MFMA "s_mov_b64 exec, s[40:41]"
                 : [d] "=&v"(d) : [a] "v"(a), [b] "v"(b) : "s40", "s41");
  } else {
    asm volatile("s_mov_b64 s[40:41], exec\n\ts_mov_b32 exec_lo, 0x00ff00ff\n\ts_mov_b32 exec_hi, 0x00ff00ff\n\t"
                 "v_lshlrev_b64 v[200:201], 0, %[b2]\n\ts_mov_b64 exec, s[40:41]\n\t"
                 "v_mfma_f32_16x16x16_f16 %[d], %[a], v[200:201], 0\n\t" WAIT_MFMA
                 : [d] "=&v"(d) : [a] "v"(a), [b2] "v"(b2) : "s40", "s41", "v200", "v201");
    if (mode == 4) {
      __attribute__((shared)) static f4 s[64];
      s[t] = d;
      __builtin_amdgcn_s_barrier();
      d = s[t ^ 1];
    }
  }
  if (store_mask >> t & 1) out[t] = d;
}

// A VALU op on a never-written row: `pick` 1 selects (v_cndmask with VCC all ones) the defined source,
// 0 the never-written v210; the result is stored.
KERNEL void lanes_cndmask(u32* out, int pick) {
  u32 t = T, r;
  if (pick)
    asm volatile("s_mov_b64 vcc, -1\n\tv_cndmask_b32 %0, v210, %1, vcc" : "=v"(r) : "v"(t) : "vcc", "v210");
  else
    asm volatile("s_mov_b64 vcc, 0\n\tv_cndmask_b32 %0, v210, %1, vcc" : "=v"(r) : "v"(t) : "vcc", "v210");
  out[t] = r + 1;
}

#if defined(__gfx950__)
// The clang miscompile of docs/kernels/mxfp4_moe_gfx950.md ("Compiler pitfall"): the MFMA's result is used
// only under `lane < n`, and clang 22 sinks the MFMA and the op making its scale-B operand after the
// s_and_saveexec_b64 (with -mllvm -disable-machine-sink it stays before the branch).
typedef int v8i __attribute__((ext_vector_type(8)));
KERNEL void sunk_scaled_mfma(const v8i* a, const v8i* b, const unsigned char* sc, f4* out, u32 n) {
  u32 lane = T;
  u32 s = sc[lane];
  f4 c = {0, 0, 0, 0};
  f4 d = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a[lane], b[lane], c, 4, 4, 0, (int)s, 0, 127);
  if (lane < n) out[lane] = d;
}
#endif

// v_mad_u64_u32 with a never-written high addend (v213): the low result dword is defined, the high one not.
KERNEL void lanes_mad64(u32* out, int high) {
  u32 t = T, r;
  if (high)
    asm volatile("v_mov_b32 v212, %1\n\tv_mad_u64_u32 v[212:213], s[40:41], v212, 3, v[212:213]\n\tv_mov_b32 %0, v213"
                 : "=v"(r) : "v"(t) : "s40", "s41", "v212", "v213");
  else
    asm volatile("v_mov_b32 v212, %1\n\tv_mad_u64_u32 v[212:213], s[40:41], v212, 3, v[212:213]\n\tv_mov_b32 %0, v212"
                 : "=v"(r) : "v"(t) : "s40", "s41", "v212", "v213");
  out[t] = r;
}
