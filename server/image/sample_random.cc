#include "galley/image/sample_random.h"

#include <cmath>

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

double SampleRandom::Normal() {
  // Box-Muller: u1 in (0, 1], so the log is finite.
  const double u1 = 1.0 - Uniform(0.0, 1.0);
  const double u2 = Uniform(0.0, 1.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double SampleRandom::Gamma(double shape) {
  if (!(shape > 0)) return 0.0;
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1 / a) (Marsaglia and Tsang, section 6).
    const double u = 1.0 - Uniform(0.0, 1.0);
    return Gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  // Marsaglia and Tsang, "A simple method for generating gamma variables"
  // (ACM TOMS 26(3), 2000): squeeze-and-reject on a transformed normal.
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = Normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - Uniform(0.0, 1.0);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace galley::image
