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
#include <string>
#include <vector>

#include "server/image/decoder.h"

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

}  // namespace galley::image

#endif  // GALLEY_TESTS_UNIT_IMAGE_FIXTURE_H_
