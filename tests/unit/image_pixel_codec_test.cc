// Packed pixels (image/pixel_codec.h): every image comes back bit for bit,
// natural-looking pixels pack smaller than they are, and anything that is not
// an intact packed value -- cut, extended, bit-flipped, another shape, too
// large -- is refused as an error, never read as pixels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "galley/image/pixel_codec.h"

namespace galley::image {
namespace {

// Smooth gradients plus per-pixel noise, as a photograph shrunk by an area
// filter looks to a compressor.
std::vector<uint8_t> PhotoLike(int width, int height, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<double> noise(0.0, 6.0);
  std::vector<uint8_t> pixels(size_t(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const double base = 128 + 90 * std::sin(0.03 * x + 0.02 * y + c) + noise(random);
        pixels[(size_t(y) * width + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(base, 0.0, 255.0));
      }
    }
  }
  return pixels;
}

std::vector<uint8_t> Random(int width, int height, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> pixels(size_t(width) * height * 3);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(random());
  return pixels;
}

std::vector<uint8_t> Pack(const std::vector<uint8_t>& pixels, int width, int height) {
  auto packed = PackPixels(pixels, width, height);
  EXPECT_TRUE(packed.ok()) << packed.status().ToString();
  return packed.ok() ? *packed : std::vector<uint8_t>();
}

TEST(PixelCodecTest, EveryImageComesBackBitForBit) {
  struct Shape {
    int width, height;
  };
  for (const Shape shape :
       {Shape{1, 1}, Shape{1, 57}, Shape{63, 1}, Shape{256, 192}, Shape{170, 256}, Shape{31, 17}}) {
    for (const auto& pixels :
         {PhotoLike(shape.width, shape.height, 1), Random(shape.width, shape.height, 2),
          std::vector<uint8_t>(size_t(shape.width) * shape.height * 3, 255),
          std::vector<uint8_t>(size_t(shape.width) * shape.height * 3, 0)}) {
      const std::vector<uint8_t> packed = Pack(pixels, shape.width, shape.height);
      auto image = UnpackPixels(packed, DecodeOptions{});
      ASSERT_TRUE(image.ok()) << image.status().ToString();
      EXPECT_EQ(image->width, shape.width);
      EXPECT_EQ(image->height, shape.height);
      EXPECT_EQ(image->pixels, pixels) << shape.width << "x" << shape.height;
    }
  }
}

TEST(PixelCodecTest, PhotoLikePixelsPackSmallerAndNoiseBarelyGrows) {
  const std::vector<uint8_t> photo = PhotoLike(256, 192, 3);
  EXPECT_LT(Pack(photo, 256, 192).size(), photo.size() * 3 / 4);
  // Incompressible pixels are stored raw by Zstandard: the header and the
  // frame's own bytes are all that is added.
  const std::vector<uint8_t> noise = Random(256, 192, 4);
  EXPECT_LT(Pack(noise, 256, 192).size(), noise.size() + 256);
}

TEST(PixelCodecTest, TheHeaderIsAsDocumented) {
  const std::vector<uint8_t> packed = Pack(PhotoLike(300, 2, 5), 300, 2);
  ASSERT_GE(packed.size(), kPackedHeaderBytes);
  EXPECT_EQ(std::string(packed.begin(), packed.begin() + 4), "GLPK");
  EXPECT_EQ(packed[4], 1);  // version
  EXPECT_EQ(packed[5], 1);  // filter
  EXPECT_EQ(packed[8] | packed[9] << 8, 300);
  EXPECT_EQ(packed[12], 2);
  // The Zstandard frame's magic follows the header.
  EXPECT_EQ(packed[20], 0x28);
  EXPECT_EQ(packed[23], 0xFD);
}

TEST(PixelCodecTest, PixelsOfAnotherSizeAreRefused) {
  const std::vector<uint8_t> pixels(10 * 10 * 3);
  EXPECT_EQ(PackPixels(pixels, 10, 9).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackPixels(pixels, 0, 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackPixels({}, 0, 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(PixelCodecTest, AnImageOverThePixelLimitIsRefusedBeforeItIsUnpacked) {
  const std::vector<uint8_t> packed = Pack(PhotoLike(64, 64, 6), 64, 64);
  DecodeOptions small;
  small.max_pixels = 64 * 64 - 1;
  auto image = UnpackPixels(packed, small);
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("64x64"), std::string::npos);
  small.max_pixels = 64 * 64;
  EXPECT_TRUE(UnpackPixels(packed, small).ok());
}

// Every prefix, one byte more, a file's bytes, a value with another shape:
// DataLoss, naming what is wrong.
TEST(PixelCodecTest, CutExtendedAndForeignValuesAreDataLoss) {
  const std::vector<uint8_t> packed = Pack(PhotoLike(40, 30, 7), 40, 30);
  for (size_t length = 0; length < packed.size(); ++length) {
    const std::vector<uint8_t> cut(packed.begin(), packed.begin() + length);
    auto image = UnpackPixels(cut, DecodeOptions{});
    ASSERT_FALSE(image.ok()) << "a value cut to " << length << " bytes was read";
    EXPECT_EQ(image.status().code(), StatusCode::kDataLoss);
  }
  std::vector<uint8_t> longer = packed;
  longer.push_back(0);
  EXPECT_EQ(UnpackPixels(longer, DecodeOptions{}).status().code(), StatusCode::kDataLoss);

  const std::vector<uint8_t> jpeg_start = {0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, 'J', 'F', 'I',
                                           'F',  0,    1,    1,    0, 0,    1,   0,   1,
                                           0,    0,    0,    0,    0, 0,    0};
  auto foreign = UnpackPixels(jpeg_start, DecodeOptions{});
  EXPECT_EQ(foreign.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(foreign.status().message().find("magic"), std::string::npos);

  // 40x30 and 30x40 hold as many bytes: the header's check still tells them
  // apart.
  std::vector<uint8_t> turned = packed;
  turned[8] = 30;
  turned[12] = 40;
  auto shape = UnpackPixels(turned, DecodeOptions{});
  EXPECT_EQ(shape.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(shape.status().message().find("checksum"), std::string::npos);
}

// Random damage, many times over: a value is either refused as DataLoss or
// (where the damage fell on bits nothing reads) gives the very same pixels.
TEST(PixelCodecTest, DamagedValuesAreRefusedNeverMisread) {
  const int width = 48, height = 36;
  const std::vector<uint8_t> pixels = PhotoLike(width, height, 8);
  const std::vector<uint8_t> packed = Pack(pixels, width, height);
  std::mt19937 random(20261129);
  int refused = 0, unchanged = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    std::vector<uint8_t> damaged = packed;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = random() % damaged.size();
      switch (random() % 4) {
        case 0:
          damaged[at] ^= static_cast<uint8_t>(1u << (random() % 8));
          break;
        case 1:
          damaged[at] = static_cast<uint8_t>(random());
          break;
        case 2:
          damaged.resize(std::max<size_t>(1, at));
          break;
        default:
          damaged.insert(damaged.begin() + static_cast<ptrdiff_t>(at),
                         static_cast<uint8_t>(random()));
          break;
      }
    }
    auto image = UnpackPixels(damaged, DecodeOptions{});
    if (image.ok()) {
      ASSERT_EQ(image->width, width);
      ASSERT_EQ(image->height, height);
      ASSERT_EQ(image->pixels, pixels) << "trial " << trial << " read damage as pixels";
      ++unchanged;
    } else {
      ASSERT_EQ(image.status().code(), StatusCode::kDataLoss) << image.status().ToString();
      ++refused;
    }
  }
  EXPECT_GT(refused, 3900);
  RecordProperty("unchanged", unchanged);
}

}  // namespace
}  // namespace galley::image
