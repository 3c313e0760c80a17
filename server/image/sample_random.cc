#include "server/image/sample_random.h"

namespace galley::image {
namespace {

// GCC's 128-bit integer, spelled so -Wpedantic accepts it.
__extension__ typedef unsigned __int128 Uint128;

constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

SampleRandom::SampleRandom(uint64_t seed, uint64_t epoch, uint64_t item) {
  // Each component is mixed before the next is added, so (seed, epoch, item)
  // triples that differ anywhere land on unrelated streams.
  uint64_t h = Mix64(seed + kGoldenGamma);
  h = Mix64(h ^ (epoch + 2 * kGoldenGamma));
  h = Mix64(h ^ (item + 3 * kGoldenGamma));
  state_ = h;
}

uint64_t SampleRandom::NextBits() {
  state_ += kGoldenGamma;
  return Mix64(state_);
}

double SampleRandom::Uniform(double low, double high) {
  if (!(high > low)) return low;
  const double unit = static_cast<double>(NextBits() >> 11) * 0x1.0p-53;
  const double value = low + (high - low) * unit;
  return value < high ? value : low;  // guard the rounding edge
}

int64_t SampleRandom::UniformInt(int64_t low, int64_t high) {
  if (high <= low) return low;
  const uint64_t range = static_cast<uint64_t>(high - low) + 1;  // 0 means 2^64
  if (range == 0) return static_cast<int64_t>(NextBits());
  // Lemire, "Fast random integer generation in an interval", TOMACS 2019.
  Uint128 product = static_cast<Uint128>(NextBits()) * range;
  uint64_t fraction = static_cast<uint64_t>(product);
  if (fraction < range) {
    const uint64_t threshold = (0 - range) % range;
    while (fraction < threshold) {
      product = static_cast<Uint128>(NextBits()) * range;
      fraction = static_cast<uint64_t>(product);
    }
  }
  return low + static_cast<int64_t>(product >> 64);
}

}  // namespace galley::image
