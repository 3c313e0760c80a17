// The max_resolution shrink: the size it keeps an image at, that an image
// within the limit is left as it is, and that the shrink is PIL's BOX resize
// (ResizeAntialiased, whose parity with PIL image_resample_test checks).
// tests/python/test_max_resolution.py compares whole jobs with Pillow.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "galley/image/max_resolution.h"

namespace galley::image {
namespace {

RgbImage Noise(int width, int height, uint32_t seed) {
  RgbImage image{width, height, std::vector<uint8_t>(size_t(width) * height * 3)};
  std::mt19937 random(seed);
  for (uint8_t& value : image.pixels) value = static_cast<uint8_t>(random() & 0xFF);
  return image;
}

TEST(MaxResolutionSize, TheLongerSideBecomesTheLimitAndTheShorterOneIsRoundedDown) {
  EXPECT_EQ(MaxResolutionSize(500, 375, 256), (ImageSize{256, 192}));
  EXPECT_EQ(MaxResolutionSize(375, 500, 256), (ImageSize{192, 256}));
  EXPECT_EQ(MaxResolutionSize(600, 400, 256), (ImageSize{256, 170}));  // 170.67 rounds down
  EXPECT_EQ(MaxResolutionSize(300, 300, 256), (ImageSize{256, 256}));
  // Exact integers where a float ratio would fall a hair short of 998.
  EXPECT_EQ(MaxResolutionSize(1000, 999, 999), (ImageSize{999, 998}));
  EXPECT_EQ(MaxResolutionSize(49'999, 50'000, 10'000), (ImageSize{9'999, 10'000}));
  EXPECT_EQ(MaxResolutionSize(5000, 3, 256), (ImageSize{256, 1}));  // never below one pixel
}

TEST(MaxResolutionSize, AnImageWithinTheLimitOrNoLimitKeepsItsSize) {
  EXPECT_EQ(MaxResolutionSize(256, 100, 256), (ImageSize{256, 100}));
  EXPECT_EQ(MaxResolutionSize(100, 256, 256), (ImageSize{100, 256}));
  EXPECT_EQ(MaxResolutionSize(17, 16, 512), (ImageSize{17, 16}));
  EXPECT_EQ(MaxResolutionSize(4000, 3000, 0), (ImageSize{4000, 3000}));
}

TEST(ShrinkToMaxResolution, LeavesAnImageWithinTheLimitUntouched) {
  RgbImage image = Noise(200, 120, 1);
  const std::vector<uint8_t> before = image.pixels;
  const uint8_t* buffer = image.pixels.data();
  ASSERT_TRUE(ShrinkToMaxResolution(200, &image).ok());
  ASSERT_TRUE(ShrinkToMaxResolution(0, &image).ok());
  EXPECT_EQ(image.width, 200);
  EXPECT_EQ(image.height, 120);
  EXPECT_EQ(image.pixels.data(), buffer);  // not even copied
  EXPECT_EQ(image.pixels, before);
}

TEST(ShrinkToMaxResolution, IsTheBoxResizeOfTheWholeImage) {
  for (const auto& [width, height, limit] :
       {std::tuple{500, 375, 256}, std::tuple{333, 517, 128}, std::tuple{64, 17, 16}}) {
    RgbImage image = Noise(width, height, 7);
    const RgbView source{image.pixels.data(), width, height, ptrdiff_t{width} * 3};
    const ImageSize size = MaxResolutionSize(width, height, limit);
    std::vector<uint8_t> expected(size_t(size.width) * size.height * 3);
    ResampleOptions options;
    options.filter = ResampleFilter::kBox;
    ASSERT_TRUE(ResizeAntialiased(source, ResizeGeometry::Whole(source, size.width, size.height),
                                  options, expected.data(), ptrdiff_t{size.width} * 3)
                    .ok());
    ASSERT_TRUE(ShrinkToMaxResolution(limit, &image).ok());
    EXPECT_EQ(image.width, size.width);
    EXPECT_EQ(image.height, size.height);
    EXPECT_EQ(image.pixels, expected) << width << "x" << height << " at " << limit;
  }
}

TEST(ShrinkToMaxResolution, AveragesTheAreaUnderEachPixel) {
  // Halving a 32 x 2 image: each output pixel is the mean of a 2 x 2 block.
  RgbImage image{32, 2, std::vector<uint8_t>(32 * 2 * 3)};
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 32; ++x) {
      for (int c = 0; c < 3; ++c) image.pixels[(y * 32 + x) * 3 + c] = uint8_t(8 * x + 4 * y + c);
    }
  }
  ASSERT_TRUE(ShrinkToMaxResolution(16, &image).ok());
  ASSERT_EQ(image.width, 16);
  ASSERT_EQ(image.height, 1);
  for (int x = 0; x < 16; ++x) {
    for (int c = 0; c < 3; ++c) {
      // (8·2x + 8·(2x+1)) / 2 + (0 + 4) / 2 + c
      EXPECT_EQ(image.pixels[x * 3 + c], 16 * x + 4 + 2 + c) << x << "," << c;
    }
  }
}

TEST(ShrinkToMaxResolution, RefusesPixelsThatAreNotTheGivenSize) {
  RgbImage image{400, 300, std::vector<uint8_t>(10)};
  const Status status = ShrinkToMaxResolution(256, &image);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(image.width, 400);
}

}  // namespace
}  // namespace galley::image
