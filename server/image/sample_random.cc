#include "server/image/sample_random.h"

#include "galley/random.h"

namespace galley::image {

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
  return low + static_cast<int64_t>(UniformBelow(range, [this] { return NextBits(); }));
}

}  // namespace galley::image
