// Raw buffer resources (V#) and buffer loads/stores. A raw buffer (stride 0) range-checks every
// access against num_records bytes: out-of-range loads return 0 and out-of-range stores are
// dropped, so partial tiles need no padding and no bounds branches.
#pragma once
#include "moonmath/prelude.hpp"

namespace mm {

typedef __amdgpu_buffer_rsrc_t buffer_rsrc;

// Word 3 of the V# for gfx9 raw buffers: DATA_FORMAT = 32 (bits 15..18 = 4), as the compiler uses.
constexpr int kRawBufferFlags = 0x00020000;

MM_DEVICE buffer_rsrc make_buffer(const void* base, uint32_t num_bytes) {
  return __builtin_amdgcn_make_buffer_rsrc(const_cast<void*>(base), (short)0, (int)num_bytes, kRawBufferFlags);
}

// aux = cache policy bits (sc0/sc1/nt); 0 = default.
MM_DEVICE uint32_t buffer_load_b32(buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  return __builtin_amdgcn_raw_buffer_load_b32(r, voff, soff, 0);
}
MM_DEVICE u32x2 buffer_load_b64(buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  return __builtin_amdgcn_raw_buffer_load_b64(r, voff, soff, 0);
}
MM_DEVICE u32x3 buffer_load_b96(buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  return __builtin_amdgcn_raw_buffer_load_b96(r, voff, soff, 0);
}
MM_DEVICE u32x4 buffer_load_b128(buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  return __builtin_amdgcn_raw_buffer_load_b128(r, voff, soff, 0);
}
MM_DEVICE uint16_t buffer_load_u16(buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  return __builtin_amdgcn_raw_buffer_load_b16(r, voff, soff, 0);
}
MM_DEVICE uint8_t buffer_load_u8(buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  return __builtin_amdgcn_raw_buffer_load_b8(r, voff, soff, 0);
}
MM_DEVICE float buffer_load_f32(buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  return __builtin_bit_cast(float, buffer_load_b32(r, voff, soff));
}

MM_DEVICE void buffer_store_b32(uint32_t v, buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  __builtin_amdgcn_raw_buffer_store_b32(v, r, voff, soff, 0);
}
MM_DEVICE void buffer_store_b64(u32x2 v, buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  __builtin_amdgcn_raw_buffer_store_b64(v, r, voff, soff, 0);
}
MM_DEVICE void buffer_store_b128(u32x4 v, buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  __builtin_amdgcn_raw_buffer_store_b128(v, r, voff, soff, 0);
}
MM_DEVICE void buffer_store_u16(uint16_t v, buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  __builtin_amdgcn_raw_buffer_store_b16(v, r, voff, soff, 0);
}
MM_DEVICE void buffer_store_u8(uint8_t v, buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  __builtin_amdgcn_raw_buffer_store_b8(v, r, voff, soff, 0);
}
MM_DEVICE void buffer_store_f32(float v, buffer_rsrc r, uint32_t voff, uint32_t soff = 0) {
  buffer_store_b32(__builtin_bit_cast(uint32_t, v), r, voff, soff);
}

// Direct-to-LDS load: each active lane fetches `Bytes` from the buffer and the hardware writes them
// to LDS at (M0 = lds base) + lane * Bytes. It counts against vmcnt, not lgkmcnt.
// Bytes: 1, 2 or 4 (gfx942, gfx950); 12 or 16 (gfx950 only).
template <int Bytes>
MM_DEVICE void buffer_load_to_lds(buffer_rsrc r, MM_LDS void* lds, uint32_t voff, uint32_t soff = 0) {
  auto* dst = (__attribute__((address_space(3))) void*)lds;
  // The builtin wants a literal size, so spell each case out.
  if constexpr (Bytes == 1) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 1, voff, soff, 0, 0);
  else if constexpr (Bytes == 2) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 2, voff, soff, 0, 0);
  else if constexpr (Bytes == 4) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 4, voff, soff, 0, 0);
#if defined(__gfx950__)
  else if constexpr (Bytes == 12) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 12, voff, soff, 0, 0);
  else if constexpr (Bytes == 16) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 16, voff, soff, 0, 0);
#endif
  else static_assert(Bytes == 1, "direct-to-LDS loads move 1, 2 or 4 bytes per lane (12, 16 on gfx950)");
}

// The same with an immediate offset: the hardware adds Offset (< 4096) to both the global offset and
// the LDS address (M0 + Offset + lane * Bytes), so a linear copy of consecutive 64 * Bytes pieces needs
// one lane offset and one M0 for all of them (no per-piece address arithmetic).
template <int Bytes, int Offset>
MM_DEVICE void buffer_load_to_lds_at(buffer_rsrc r, MM_LDS void* lds, uint32_t voff, uint32_t soff = 0) {
  static_assert(Offset >= 0 && Offset < 4096, "the instruction offset is 12 bits");
  auto* dst = (__attribute__((address_space(3))) void*)lds;
  if constexpr (Bytes == 1) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 1, voff, soff, Offset, 0);
  else if constexpr (Bytes == 2) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 2, voff, soff, Offset, 0);
  else if constexpr (Bytes == 4) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 4, voff, soff, Offset, 0);
#if defined(__gfx950__)
  else if constexpr (Bytes == 12) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 12, voff, soff, Offset, 0);
  else if constexpr (Bytes == 16) __builtin_amdgcn_raw_ptr_buffer_load_lds(r, dst, 16, voff, soff, Offset, 0);
#endif
  else static_assert(Bytes == 1, "direct-to-LDS loads move 1, 2 or 4 bytes per lane (12, 16 on gfx950)");
}

}  // namespace mm
