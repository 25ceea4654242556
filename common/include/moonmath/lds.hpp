// LDS (shared memory) access for tiles: b64/b128 reads and writes at byte offsets, swizzle policies
// for row-major tiles, and gfx950's transposing reads.
//
// Pointers are plain (generic) pointers into an MM_LDS array: after inlining the compiler sees the
// shared-memory origin and emits ds_read/ds_write (never flat). Offsets are bytes.
#pragma once
#include "moonmath/prelude.hpp"

namespace mm {

MM_DEVICE u32x2 lds_read_b64(const void* base, uint32_t off) { return *(const u32x2*)((const uint8_t*)base + off); }
MM_DEVICE u32x4 lds_read_b128(const void* base, uint32_t off) { return *(const u32x4*)((const uint8_t*)base + off); }
MM_DEVICE void lds_write_b64(void* base, uint32_t off, u32x2 v) { *(u32x2*)((uint8_t*)base + off) = v; }
MM_DEVICE void lds_write_b128(void* base, uint32_t off, u32x4 v) { *(u32x4*)((uint8_t*)base + off) = v; }

#if defined(__gfx950__)
// ds_read_b64_tr_b8: each lane supplies the address of an 8-byte row segment; in every 16-lane group, lane t
// receives byte t % 8 of the segments of lanes t / 8, t / 8 + 2, .., t / 8 + 14 (one byte per segment, in
// that order): a 16 x 8 byte matrix read transposed, e.g. an fp8 MFMA operand from row-major rows.
MM_DEVICE u32x2 lds_read_tr8_b64(const void* base, uint32_t off) {
  typedef int i32x2_t __attribute__((ext_vector_type(2)));
  auto* p = (__attribute__((address_space(3))) i32x2_t*)((const uint8_t*)base + off);
  return bit_cast<u32x2>(__builtin_amdgcn_ds_read_tr8_b64_v2i32(p));
}
#endif

// Swizzle policies map (row, byte within the row) of a row-major tile to its LDS byte offset.
// Every policy has: kRowBytes; offset(row, byte); byte_of(row, physical byte within the row), the
// inverse within a row (direct-to-LDS staging writes physical positions and needs the logical ones).

// Rows stored back to back (kRowBytes may include padding).
template <int RowBytes>
struct LinearLds {
  static constexpr int kRowBytes = RowBytes;
  static constexpr uint32_t offset(uint32_t row, uint32_t byte) { return row * RowBytes + byte; }
  static constexpr uint32_t byte_of(uint32_t, uint32_t phys) { return phys; }
};

// 16-byte (or ChunkBytes) chunks of row r are stored at chunk index (c ^ (r % Period)): the
// column-wise reads of fragment loads (many rows, same chunk) then hit different banks.
template <int RowBytes, int ChunkBytes = 16, int Period = 8>
struct XorLds {
  static_assert((ChunkBytes & (ChunkBytes - 1)) == 0 && (Period & (Period - 1)) == 0, "powers of two");
  static_assert(RowBytes % (ChunkBytes * Period) == 0, "a row must hold a multiple of Period chunks");
  static constexpr int kRowBytes = RowBytes;
  static constexpr uint32_t offset(uint32_t row, uint32_t byte) {
    return row * RowBytes + ((((byte / ChunkBytes) ^ (row % Period)) * ChunkBytes) | (byte % ChunkBytes));
  }
  static constexpr uint32_t byte_of(uint32_t row, uint32_t phys) {  // XOR is its own inverse
    return (((phys / ChunkBytes) ^ (row % Period)) * ChunkBytes) | (phys % ChunkBytes);
  }
};

}  // namespace mm
