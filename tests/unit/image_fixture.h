// Reading the image fixtures that tests/fixtures/make_fixtures.py writes
// into GALLEY_IMAGE_FIXTURE_DIR, and comparing decoded images. Expected
// pixels come from PIL (the torchvision loader), stored losslessly as
// `<name>.ref.png` next to each fixture.
#ifndef GALLEY_TESTS_UNIT_IMAGE_FIXTURE_H_
#define GALLEY_TESTS_UNIT_IMAGE_FIXTURE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "galley/image/decoder.h"

namespace galley::image {

inline std::vector<uint8_t> ReadFixture(const std::string& name) {
  const std::string path = std::string(GALLEY_IMAGE_FIXTURE_DIR) + "/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline RgbImage DecodeFixture(const std::string& name) {
  auto image = Decode(ReadFixture(name), DecodeOptions{});
  EXPECT_TRUE(image.ok()) << name << ": " << image.status().ToString();
  return image.ok() ? std::move(image).value() : RgbImage{};
}

inline Status DecodeStatus(const std::string& name) {
  return Decode(ReadFixture(name), DecodeOptions{}).status();
}

// Largest per-sample difference; -1 when the sizes differ.
inline int MaxAbsDiff(const RgbImage& a, const RgbImage& b) {
  if (a.width != b.width || a.height != b.height || a.pixels.size() != b.pixels.size()) return -1;
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    worst = std::max(worst, std::abs(int{a.pixels[i]} - int{b.pixels[i]}));
  }
  return worst;
}

// Overwrites `flips` random bytes of `original` at or after `keep` (so the
// signature survives) and, every third round, cuts it short; the decode of
// what is left must give a whole image or fail with DataLoss or
// ResourceExhausted, never crash.
inline void ExpectDamageHandled(const std::vector<uint8_t>& original, size_t keep, int flips,
                                int round, std::mt19937& random, const std::string& name) {
  std::vector<uint8_t> bytes = original;
  for (int k = 0; k < flips; ++k) {
    bytes[keep + random() % (bytes.size() - keep)] = static_cast<uint8_t>(random());
  }
  if (round % 3 == 0) bytes.resize(keep + random() % (bytes.size() - keep));
  auto image = Decode(bytes, DecodeOptions{});
  if (image.ok()) {
    EXPECT_EQ(image->pixels.size(), static_cast<size_t>(image->width) * image->height * 3);
  } else {
    const StatusCode code = image.status().code();
    EXPECT_TRUE(code == StatusCode::kDataLoss || code == StatusCode::kResourceExhausted)
        << name << ": " << image.status().ToString();
  }
}

}  // namespace galley::image

#endif  // GALLEY_TESTS_UNIT_IMAGE_FIXTURE_H_
