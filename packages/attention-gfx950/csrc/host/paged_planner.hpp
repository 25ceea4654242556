// Host planning of paged K/V (issue 13): the sequences of forward_paged for the shared planner
// (attention_planner.hpp). A paged sequence's keys are reached through its page list, so its
// Sequence carries the first page-list entry in k_tok0 (the paged partitioner's convention,
// csrc/device/gfx950/attention_fwd_paged.hpp); q/out/lse are packed as in varlen.
#pragma once

#include <stdexcept>
#include <vector>

#include "attention_planner.hpp"

namespace attn950 {

// cu_q: [B + 1] query offsets; k_lens: [B] key lengths; page0: [B] first page-list entry per sequence.
inline std::vector<Sequence> paged_sequences(const std::vector<int32_t>& cu_q, const std::vector<int32_t>& k_lens,
                                             const std::vector<int32_t>& page0) {
  if (cu_q.empty() || k_lens.size() + 1 != cu_q.size() || page0.size() != k_lens.size())
    throw std::invalid_argument("paged plan: cu_seqlens_q needs B + 1 entries, seqlens_k and page0 B");
  std::vector<Sequence> s;
  for (size_t b = 0; b < k_lens.size(); ++b) {
    if (cu_q[b + 1] < cu_q[b]) throw std::invalid_argument("cu_seqlens_q must be non-decreasing");
    if (k_lens[b] < 0 || page0[b] < 0) throw std::invalid_argument("seqlens_k and page offsets must be >= 0");
    s.push_back({0, cu_q[b], cu_q[b + 1] - cu_q[b], page0[b], k_lens[b]});
  }
  return s;
}

}  // namespace attn950
