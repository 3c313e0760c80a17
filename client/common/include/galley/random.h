// The integer primitives every random choice in galley is built from: the
// sampler's orders (server/sampler/uniform_random.h), the DDP split and
// substitutes (served_job.cc), each job's epoch seed (scheduler.cc) and the
// augmentations (server/image/sample_random.h). One definition each, so the
// streams that must agree across machines and releases cannot drift apart.
// Pure functions; safe from any thread.
#ifndef GALLEY_RANDOM_H_
#define GALLEY_RANDOM_H_

#include <cstdint>

namespace galley {

// SplitMix64's increment, the odd integer closest to 2^64 / golden ratio
// (Steele, Lea, Flood: "Fast splittable pseudorandom number generators",
// OOPSLA 2014).
inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output function: a bijection of 64-bit words in which every
// input bit affects every output bit.
constexpr uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One SplitMix64 output for state `x`: Mix64(x + kGoldenGamma). Also a
// 64-bit hash that sends nearby inputs to unrelated outputs.
constexpr uint64_t SplitMix64(uint64_t x) { return Mix64(x + kGoldenGamma); }

// An integer exactly uniform in [0, n), n > 0, from a source of uniformly
// random 64-bit words: Lemire's multiply-shift with rejection ("Fast Random
// Integer Generation in an Interval", ACM TOMACS 2019). Integers only, so no
// rounding tilts a draw.
template <typename NextBits>
uint64_t UniformBelow(uint64_t n, NextBits&& next_bits) {
  // __extension__ keeps -Wpedantic quiet about the GCC/Clang 128-bit type.
  __extension__ using Wide = unsigned __int128;
  Wide product = static_cast<Wide>(next_bits()) * n;
  uint64_t low = static_cast<uint64_t>(product);
  if (low < n) {
    // Reject the (2^64 mod n) low values that would make some results more
    // likely than others.
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      product = static_cast<Wide>(next_bits()) * n;
      low = static_cast<uint64_t>(product);
    }
  }
  return static_cast<uint64_t>(product >> 64);
}

}  // namespace galley

#endif  // GALLEY_RANDOM_H_
