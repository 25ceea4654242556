// fp8 / bf8 / bf16 conversions with the hardware conversion instructions.
//   gfx942: fp8 = e4m3fnuz, bf8 = e5m2fnuz;  gfx950: fp8 = e4m3fn (OCP), bf8 = e5m2 (OCP)
#include "common.h"

// out[i] packs x[4i..4i+3]: bytes 0,1 from v_cvt_pk_fp8_f32 word 0, bytes 2,3 from word 1
KERNEL void to_fp8(const float* x, u32* out, int n4) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n4) return;
  int v = __builtin_amdgcn_cvt_pk_fp8_f32(x[4 * i], x[4 * i + 1], 0, false);
  v = __builtin_amdgcn_cvt_pk_fp8_f32(x[4 * i + 2], x[4 * i + 3], v, true);
  out[i] = (u32)v;
}

KERNEL void to_bf8(const float* x, u32* out, int n4) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n4) return;
  int v = __builtin_amdgcn_cvt_pk_bf8_f32(x[4 * i], x[4 * i + 1], 0, false);
  v = __builtin_amdgcn_cvt_pk_bf8_f32(x[4 * i + 2], x[4 * i + 3], v, true);
  out[i] = (u32)v;
}

// decode every byte of in[i] with v_cvt_f32_fp8 / v_cvt_f32_bf8 (byte select 0..3)
KERNEL void from_fp8(const u32* in, float* out, int n4) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n4) return;
  const int w = (int)in[i];
  out[4 * i + 0] = __builtin_amdgcn_cvt_f32_fp8(w, 0);
  out[4 * i + 1] = __builtin_amdgcn_cvt_f32_fp8(w, 1);
  out[4 * i + 2] = __builtin_amdgcn_cvt_f32_fp8(w, 2);
  out[4 * i + 3] = __builtin_amdgcn_cvt_f32_fp8(w, 3);
}

// the packed decode: v_cvt_pk_f32_fp8 of word 0 (bytes 0, 1) and word 1 (bytes 2, 3)
KERNEL void from_fp8_pk(const u32* in, float* out, int n4) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n4) return;
  const int w = (int)in[i];
  const auto lo = __builtin_amdgcn_cvt_pk_f32_fp8(w, false), hi = __builtin_amdgcn_cvt_pk_f32_fp8(w, true);
  out[4 * i + 0] = lo[0];
  out[4 * i + 1] = lo[1];
  out[4 * i + 2] = hi[0];
  out[4 * i + 3] = hi[1];
}

KERNEL void from_bf8(const u32* in, float* out, int n4) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n4) return;
  const int w = (int)in[i];
  out[4 * i + 0] = __builtin_amdgcn_cvt_f32_bf8(w, 0);
  out[4 * i + 1] = __builtin_amdgcn_cvt_f32_bf8(w, 1);
  out[4 * i + 2] = __builtin_amdgcn_cvt_f32_bf8(w, 2);
  out[4 * i + 3] = __builtin_amdgcn_cvt_f32_bf8(w, 3);
}

// stochastic rounding: byte i%4 of out[i] = cvt_sr_fp8(x[i], rnd[i]); the other bytes stay 0x11
KERNEL void to_fp8_sr(const float* x, const u32* rnd, u32* out, int n) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n) return;
  int old = 0x11111111;
  switch (i & 3) {
    case 0: old = __builtin_amdgcn_cvt_sr_fp8_f32(x[i], (int)rnd[i], old, 0); break;
    case 1: old = __builtin_amdgcn_cvt_sr_fp8_f32(x[i], (int)rnd[i], old, 1); break;
    case 2: old = __builtin_amdgcn_cvt_sr_fp8_f32(x[i], (int)rnd[i], old, 2); break;
    default: old = __builtin_amdgcn_cvt_sr_fp8_f32(x[i], (int)rnd[i], old, 3); break;
  }
  out[i] = (u32)old;
}

// f32 -> bf16 (round to nearest even). gfx950 has v_cvt_pk_bf16_f32; gfx942 gets an integer sequence.
KERNEL void to_bf16(const float* x, u16* out, int n) {
  const int i = (int)(bid() * bdim() + tid());
  if (i >= n) return;
  out[i] = __builtin_bit_cast(u16, (__bf16)x[i]);
}
