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
