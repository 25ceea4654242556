// Launch shape of the cross-rank LSE merge: one wave per (token, head) row, four waves per block.
#pragma once
#include <cstdint>
#include <stdexcept>

namespace moonmath::mla {

constexpr int kMergeDim = 512;
constexpr int kMergeMaxRanks = 16;
constexpr int kMergeWavesPerBlock = 4;
constexpr int kMergeBlockThreads = 64 * kMergeWavesPerBlock;
// Each rank's parts are addressed through one buffer resource whose size field is 32 bits.
constexpr int64_t kMergeMaxRows = (int64_t{1} << 31) / (kMergeDim * 2);

struct MergeLaunch {
  int64_t grid;   // workgroups
  int block;      // threads per workgroup
};

inline MergeLaunch plan_merge(int64_t rows) {
  if (rows < 0 || rows > kMergeMaxRows) throw std::invalid_argument("merge rows out of range");
  return {(rows + kMergeWavesPerBlock - 1) / kMergeWavesPerBlock, kMergeBlockThreads};
}

}  // namespace moonmath::mla
