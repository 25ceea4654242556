// The arguments of the MLA decode kernels (mla_decode_a16w8_ws.hip): one struct for the
// host, which packs it (csrc/host/mla_args_bind.cpp: _C.pack_mla_decode_args, called by kernel.py), and the
// device, which takes it by value in the kernarg segment. Plain C++ (no HIP types): pointers travel as
// 64-bit device addresses; the kernels cast them back (mla_decode_common.hpp: args_ptr).
#pragma once
#include <cstdint>

namespace mla {

struct MlaDecodeArgs {
  // device addresses (0: none)
  uint64_t q_lat;         // [T, H, 512] bf16
  uint64_t q_pe;          // [T, H, 64] bf16
  uint64_t pool;          // [pool_slots, 576] fp8 (the arch's native format)
  uint64_t o_lat;         // [T, H, 512] bf16 (direct mode)
  uint64_t seq_lens;      // [B] int32
  uint64_t kv_indices;    // [n_idx] int32
  uint64_t kv_indptr;     // [B + 1] int32
  uint64_t glen;          // [B] int32 global lengths (seq_lens when cp_world == 1)
  uint64_t lse;           // [T, H] fp32 base 2 (direct mode, kFlagLse)
  uint64_t ws_o;          // [B * nparts units, q_len * H, 512] fp32 (partial mode)
  uint64_t ws_ml;         // [B * nparts units, q_len * H, 4] fp32 (m, l, ln, 0) (partial mode)
  uint64_t kv_scale_dev;  // [1] fp32 on the device, or 0: c_qk_bits / o_scale_bits hold the host's values
  uint32_t B, H, q_len, nparts;
  uint32_t pool_slots;    // records of the structured pool buffer
  uint32_t n_idx;         // usable kv_indices entries (min(numel, 2^31 - 1))
  uint32_t cp_rank, cp_world, flags;
  uint32_t c_qk_bits;         // fp32 scale * kv_scale * log2(e) (host kv_scale)
  uint32_t o_scale_bits;      // fp32 kv_scale (host kv_scale)
  uint32_t scale_log2e_bits;  // fp32 scale * log2(e) (device kv_scale)
};
static_assert(sizeof(MlaDecodeArgs) == 12 * 8 + 12 * 4, "MlaDecodeArgs: no padding (the host packs its bytes)");

}  // namespace mla
