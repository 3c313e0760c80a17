// Split: how the one cache budget is shared between the three tiers, in whole
// percent. A plain value; safe to copy between threads.
#ifndef GALLEY_CACHE_SPLIT_H_
#define GALLEY_CACHE_SPLIT_H_

#include <cstdint>

namespace galley::cache {

struct Split {
  int encoded_pct = 50;
  int decoded_pct = 50;
  int augmented_pct = 0;

  // Each share in 0..100 and the three add up to at most 100.
  bool IsValid() const {
    return encoded_pct >= 0 && decoded_pct >= 0 && augmented_pct >= 0 &&
           encoded_pct + decoded_pct + augmented_pct <= 100;
  }

  friend bool operator==(const Split&, const Split&) = default;
};

// `pct` percent of `total`, rounded down, without overflowing for any total.
inline uint64_t ShareOf(uint64_t total, int pct) {
  const auto p = static_cast<uint64_t>(pct);
  return total / 100 * p + total % 100 * p / 100;
}

}  // namespace galley::cache

#endif  // GALLEY_CACHE_SPLIT_H_
