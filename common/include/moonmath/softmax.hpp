// exp2-domain online softmax and log-sum-exp merging (base 2 throughout).
// Scores are pre-multiplied by scale*log2(e) so exp(x*scale) == exp2(x*scale_log2e).
#pragma once
#include "moonmath/prelude.hpp"

namespace mm {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
// An LSE at or beyond this magnitude marks an empty partial: it carries no weight (NaN: see LseMerge).
constexpr float kEmptyLse = 3e38f;

MM_DEVICE float exp2(float x) { return __builtin_amdgcn_exp2f(x); }
MM_DEVICE float log2(float x) { return __builtin_amdgcn_logf(x); }
MM_DEVICE float rcp(float x) { return __builtin_amdgcn_rcpf(x); }

MM_DEVICE bool lse_is_empty(float lse) { return !(__builtin_fabsf(lse) < kEmptyLse); }

// Running state of one softmax row: m = max so far (log2 units), l = sum of exp2(s - m).
struct OnlineSoftmax {
  float m = -__builtin_inff();
  float l = 0.f;
  // Fold a block whose max is `block_max`; returns the factor by which earlier accumulators must be
  // rescaled (0 on the first block, when m was -inf).
  MM_DEVICE float update_max(float block_max) {
    float m_new = __builtin_fmaxf(m, block_max);
    float r = (m == -__builtin_inff()) ? 0.f : exp2(m - m_new);
    l *= r;
    m = m_new;
    return r;
  }
  MM_DEVICE float lse() const { return l > 0.f ? m + log2(l) : -__builtin_inff(); }
};

// Merge of partial results given their base-2 LSEs: w_r = exp2(lse_r - max_r lse_r).
// Call with every partial's LSE once to find the max, then weight(lse) per partial.
// Merge of per-part base-2 LSEs. A part whose |lse| >= kEmptyLse (+-inf, or the huge sentinels) is
// empty: weight 0. A NaN lse is not empty: it says the part's inputs held NaN/Inf, so it poisons the
// row (lse() is NaN; callers write NaN outputs) instead of being dropped silently.
struct LseMerge {
  float max_lse = -__builtin_inff();
  float sum_w = 0.f;
  bool poisoned = false;
  MM_DEVICE void see(float lse) {
    if (lse != lse) poisoned = true;
    else if (!lse_is_empty(lse)) max_lse = __builtin_fmaxf(max_lse, lse);
  }
  MM_DEVICE float weight(float lse) const {
    return lse_is_empty(lse) ? 0.f : exp2(lse - max_lse);
  }
  MM_DEVICE void add(float w) { sum_w += w; }
  MM_DEVICE bool empty() const { return !(sum_w > 0.f); }
  MM_DEVICE float lse() const {
    return poisoned ? __builtin_nanf("") : empty() ? -__builtin_inff() : max_lse + log2(sum_w);
  }
};

}  // namespace mm
