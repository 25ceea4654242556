// MXFP4 MoE host planners: pure functions of shapes (no HIP, no torch types).
//
// pe = num_valid_tokens / num_active_experts (a real quotient; every comparison below is done exactly
// in integers). The thresholds are the ones tuned on MI300X for the original kernels.
//
//   gate/up block_m : 16 if pe <= 12, 32 if pe < 29, else 48
//   gate/up K       : a positive multiple of 32 (one E8M0 scale per 32 k; the gfx942 kernel walks any
//                     number of 32-k groups, so K % 256 is no longer required)
//   down block_m    : 0 (down does not serve this K; use gate/up with EPI_NONE) unless K is 384, 512 or
//                     768; then 16 if pe <= 12, 32 if pe <= 200 or K != 384, else 64
//   down nt         : 1 if pe <= 4, else 2 (column tiles per lane group; 2 needs an even N)
//   down BN         : 128 * nt columns per column step
//   down n_steps    : column chunks each CTA sweeps against its staged A tile, from the total number
//                     of chunks ceil(N / BN), the M blocks and the CU count (see down_n_steps)
//
// Invalid arguments throw std::invalid_argument naming the argument (pybind11 maps it to ValueError).
// Every argument is bounded by the kernel field it ends up in (token and column counts are uint32,
// expert counts and grid rows int32), which also keeps every product below exact in int64.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace moonmath {
namespace moe {

inline void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

constexpr int64_t kMaxU32 = 0xFFFFFFFFll;  // num_valid_tokens, N, K: uint32 kernel arguments
constexpr int64_t kMaxI32 = 0x7FFFFFFFll;  // num_active_experts, num_m_blocks: int32 ids / grid rows
constexpr int64_t kMaxCus = 65535;         // num_cus: far above any GPU, and 12 * num_cus stays small

inline void check_range(const char* name, int64_t v, int64_t lo, int64_t hi) {
  require(v >= lo && v <= hi, std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  "]; got " + std::to_string(v));
}

inline void check_tokens(int64_t num_valid_tokens, int64_t num_active_experts) {
  check_range("num_valid_tokens", num_valid_tokens, 0, kMaxU32);
  check_range("num_active_experts", num_active_experts, 1, kMaxI32);
}

// pe <= x  <=>  nvt <= x * n_active ; pe < x  <=>  nvt < x * n_active
inline bool pe_le(int64_t nvt, int64_t n_active, int64_t x) { return nvt <= x * n_active; }
inline bool pe_lt(int64_t nvt, int64_t n_active, int64_t x) { return nvt < x * n_active; }

inline int gateup_block_m(int64_t num_valid_tokens, int64_t num_active_experts) {
  check_tokens(num_valid_tokens, num_active_experts);
  if (pe_le(num_valid_tokens, num_active_experts, 12)) return 16;
  if (pe_lt(num_valid_tokens, num_active_experts, 29)) return 32;
  return 48;
}

inline bool gateup_supports_k(int64_t K) { return K > 0 && K <= kMaxU32 && K % 32 == 0; }

inline bool down_supports_k(int64_t K) { return K == 384 || K == 512 || K == 768; }

inline int down_block_m(int64_t num_valid_tokens, int64_t num_active_experts, int64_t K) {
  check_tokens(num_valid_tokens, num_active_experts);
  check_range("K", K, 1, kMaxU32);
  if (!down_supports_k(K)) return 0;
  if (pe_le(num_valid_tokens, num_active_experts, 12)) return 16;
  if (pe_le(num_valid_tokens, num_active_experts, 200) || K != 384) return 32;
  return 64;
}

inline int down_nt(int64_t num_valid_tokens, int64_t num_active_experts) {
  check_tokens(num_valid_tokens, num_active_experts);
  return pe_le(num_valid_tokens, num_active_experts, 4) ? 1 : 2;
}

inline int64_t down_bn(int nt) {
  require(nt == 1 || nt == 2, "nt must be 1 or 2; got " + std::to_string(nt));
  return 128 * static_cast<int64_t>(nt);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t down_n_steps(int64_t m_blocks, int64_t N, int64_t num_cus, int block_m, int nt) {
  check_range("num_m_blocks", m_blocks, 0, kMaxI32);
  check_range("N", N, 1, kMaxU32);
  check_range("num_cus", num_cus, 1, kMaxCus);
  require(block_m == 16 || block_m == 32 || block_m == 64,
          "block_m must be 16, 32 or 64; got " + std::to_string(block_m));
  const int64_t total = ceil_div(N, down_bn(nt));
  int64_t steps = total * m_blocks / (12 * num_cus);
  if (steps < 1) steps = 1;
  if (steps > total) steps = total;
  if (block_m == 16) {
    if (steps < 4 && total >= 4 && m_blocks <= 2 * num_cus && (total / 4) * m_blocks >= 2 * num_cus) steps = 4;
  } else if (steps < total / 2) {
    steps = total / 2;
  }
  return total / ceil_div(total, steps);
}

struct DownPlan {
  int block_m;      // 0: the down kernel does not serve this K
  int nt;
  int64_t n_steps;
};

inline DownPlan down_plan(int64_t num_valid_tokens, int64_t num_active_experts, int64_t N, int64_t K,
                          int64_t m_blocks, int64_t num_cus) {
  const int bm = down_block_m(num_valid_tokens, num_active_experts, K);
  check_range("N", N, 1, kMaxU32);
  check_range("num_m_blocks", m_blocks, 0, kMaxI32);
  check_range("num_cus", num_cus, 1, kMaxCus);
  if (bm == 0) return DownPlan{0, 0, 0};
  int nt = down_nt(num_valid_tokens, num_active_experts);
  if (N % 2 != 0) nt = 1;  // two adjacent columns per lane need an even N
  return DownPlan{bm, nt, down_n_steps(m_blocks, N, num_cus, bm, nt)};
}

}  // namespace moe
}  // namespace moonmath
