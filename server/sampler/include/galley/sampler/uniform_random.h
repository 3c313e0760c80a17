// UniformRandom: a seeded generator of exactly uniform integers for the
// samplers.
//
// The sampler's guarantee (every job's order is a uniformly random
// permutation) rests on two primitives being exact: an integer uniform in
// [0, n) and a coin that is heads with probability a/b. Both are built on
// integers only, so no floating-point rounding tilts a draw: Lemire's
// multiply-shift method with rejection gives exact uniformity ("Fast Random
// Integer Generation in an Interval", ACM TOMACS 2019), and the coin compares
// such an integer against a. The bit source is xoshiro256** (Blackman and
// Vigna), seeded through splitmix64 so that nearby seeds give unrelated
// streams.
//
// Not thread-safe: each sampler owns its own instance.
#ifndef GALLEY_SERVER_SAMPLER_UNIFORM_RANDOM_H_
#define GALLEY_SERVER_SAMPLER_UNIFORM_RANDOM_H_

#include <cstdint>

#include "galley/random.h"

namespace galley {

class UniformRandom {
 public:
  explicit UniformRandom(uint64_t seed) {
    for (uint64_t& word : state_) word = SplitMix(seed);
  }

  // 64 uniformly random bits.
  uint64_t Bits() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Exactly uniform in [0, n); n must be positive.
  uint64_t Below(uint64_t n) {
    return UniformBelow(n, [this] { return Bits(); });
  }

  // True with probability exactly numerator / denominator (numerator may
  // equal or exceed denominator: then always true).
  bool Chance(uint64_t numerator, uint64_t denominator) {
    if (numerator >= denominator) return true;
    if (numerator == 0) return false;
    return Below(denominator) < numerator;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix(uint64_t& x) { return Mix64(x += kGoldenGamma); }

  uint64_t state_[4];
};

}  // namespace galley

#endif  // GALLEY_SERVER_SAMPLER_UNIFORM_RANDOM_H_
