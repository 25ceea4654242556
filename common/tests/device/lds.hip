// Device-side tests of moonmath/lds.hpp: b64/b128 LDS reads and writes at swizzled offsets.
#include "moonmath/lds.hpp"
#include "moonmath/sync.hpp"

using namespace mm;

// A 16-row x 128-byte tile: each lane writes one 16-byte chunk per step with lds_write_b128 at
// Swz::offset(row, 16 * chunk) (logical chunk ids as data), then the raw LDS image is copied out,
// then each lane reads back 8-byte halves with lds_read_b64 at logical positions.
template <class Swz> MM_DEVICE void roundtrip(const uint32_t* in, uint32_t* image, uint32_t* back, uint32_t* offs) {
  MM_LDS uint8_t t[16 * 128];
  const uint32_t lane = thread_id_x();
  for (int s = 0; s < 2; ++s) {
    const uint32_t c = s * 64 + lane, row = c / 8, chunk = c % 8;
    const u32x4 v{in[4 * c], in[4 * c + 1], in[4 * c + 2], in[4 * c + 3]};
    lds_write_b128(t, Swz::offset(row, 16 * chunk), v);
    offs[c] = Swz::offset(row, 16 * chunk) | (Swz::byte_of(row, Swz::offset(row, 16 * chunk) % 128) << 16);
  }
  block_sync();
  for (int i = lane; i < 16 * 128 / 4; i += 64) image[i] = ((const uint32_t*)t)[i];
  for (int s = 0; s < 4; ++s) {
    const uint32_t h = s * 64 + lane, row = h / 16, half = h % 16;  // 8-byte halves
    const u32x2 v = lds_read_b64(t, Swz::offset(row, 8 * half));
    back[2 * h] = v[0];
    back[2 * h + 1] = v[1];
  }
}
MM_KERNEL void t_lds_linear(const uint32_t* in, uint32_t* image, uint32_t* back, uint32_t* offs) {
  roundtrip<LinearLds<128>>(in, image, back, offs);
}
MM_KERNEL void t_lds_xor(const uint32_t* in, uint32_t* image, uint32_t* back, uint32_t* offs) {
  roundtrip<XorLds<128>>(in, image, back, offs);
}
MM_KERNEL void t_lds_xor32(const uint32_t* in, uint32_t* image, uint32_t* back, uint32_t* offs) {
  roundtrip<XorLds<128, 32, 4>>(in, image, back, offs);
}

// One b128 read back at a logical offset: lds_read_b128 of chunk (lane % 128 / 16) of row lane / 8.
MM_KERNEL void t_lds_b128(const uint32_t* in, uint32_t* out) {
  MM_LDS uint8_t t[16 * 128];
  const uint32_t lane = thread_id_x();
  for (int i = lane; i < 16 * 128 / 4; i += 64) ((uint32_t*)t)[i] = in[i];
  block_sync();
  const u32x4 v = lds_read_b128(t, 16 * ((lane * 5) % 128));
  for (int j = 0; j < 4; ++j) out[4 * lane + j] = v[j];
}
