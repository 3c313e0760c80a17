// SampleRandom: the random stream that drives one sample's augmentation.
//
// galley's augmentation is a pure function of (seed, epoch, item): the three
// are mixed with SplitMix64 (Steele, Lea, Flood: "Fast splittable pseudorandom
// number generators", OOPSLA 2014) into the state of a SplitMix64 stream, so a
// sample's crop does not depend on which worker prepares it or when. Not
// thread-safe: each sample uses its own instance on the stack.
#ifndef GALLEY_SERVER_IMAGE_SAMPLE_RANDOM_H_
#define GALLEY_SERVER_IMAGE_SAMPLE_RANDOM_H_

#include <cstdint>

namespace galley::image {

class SampleRandom {
 public:
  SampleRandom(uint64_t seed, uint64_t epoch, uint64_t item);

  // Next 64 uniformly distributed bits.
  uint64_t NextBits();
  // Uniform in [low, high) with 53 bits of resolution (low when high <= low).
  double Uniform(double low, double high);
  // Uniform integer in [low, high], exactly (Lemire's rejection method).
  int64_t UniformInt(int64_t low, int64_t high);
  // Standard normal (Box-Muller).
  double Normal();
  // Gamma(shape, 1) for shape > 0 (Marsaglia-Tsang); 0 for other shapes.
  double Gamma(double shape);

 private:
  uint64_t state_;
};

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_SAMPLE_RANDOM_H_
