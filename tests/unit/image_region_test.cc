// Region decoding: DecodeRegion's pixels equal the same rectangle of Decode's,
// and ApplyRegion on a decoded region gives Apply's sample on the whole image
// byte for byte, over many random crops and several kinds of JPEG.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "galley/image/decoder.h"
#include "galley/image/region_decoder.h"
#include "galley/image/testing/transform_test_paths.h"
#include "galley/image/transforms.h"

namespace galley::image {
namespace {

using nlohmann::json;

// Smooth shapes plus noise, so chroma varies from pixel to pixel and any
// upsampling difference at a region edge would show.
std::vector<uint8_t> PhotoLikePixels(int width, int height, int pixel_size, uint32_t seed) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * pixel_size);
  std::mt19937 random(seed);
  std::normal_distribution<double> noise(0.0, 20.0);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < pixel_size; ++c) {
        const double base = 128 + 90 * std::sin(x * (0.013 + 0.004 * c) + y * (0.009 - 0.003 * c));
        pixels[(static_cast<size_t>(y) * width + x) * pixel_size + c] =
            static_cast<uint8_t>(std::clamp(base + noise(random), 0.0, 255.0));
      }
    }
  }
  return pixels;
}

struct JpegKind {
  std::string name;
  int subsampling;
  int flags;
};

std::vector<uint8_t> Compress(const std::vector<uint8_t>& pixels, int width, int height,
                              int pixel_format, int subsampling, int flags) {
  tjhandle compressor = tjInitCompress();
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const int result = tjCompress2(compressor, pixels.data(), width, 0, height, pixel_format, &buffer,
                                 &size, subsampling, 90, flags);
  EXPECT_EQ(result, 0) << tjGetErrorStr2(compressor);
  std::vector<uint8_t> jpeg(buffer, buffer + size);
  tjFree(buffer);
  tjDestroy(compressor);
  return jpeg;
}

std::vector<uint8_t> MakeJpeg(int width, int height, const JpegKind& kind, uint32_t seed) {
  return Compress(PhotoLikePixels(width, height, 3, seed), width, height, TJPF_RGB,
                  kind.subsampling, kind.flags);
}

const std::vector<JpegKind>& Kinds() {
  static const std::vector<JpegKind> kinds = {
      {"420", TJSAMP_420, 0},
      {"422", TJSAMP_422, 0},
      {"444", TJSAMP_444, 0},
      {"gray", TJSAMP_GRAY, 0},
      {"progressive420", TJSAMP_420, TJFLAG_PROGRESSIVE},
      {"progressive444", TJSAMP_444, TJFLAG_PROGRESSIVE},
  };
  return kinds;
}

// Sizes that are and are not multiples of the 16-pixel MCU.
const std::vector<std::pair<int, int>>& Sizes() {
  static const std::vector<std::pair<int, int>> sizes = {{500, 375}, {333, 501}, {64, 48}};
  return sizes;
}

// Inserts an EXIF APP1 segment with the given orientation right after SOI.
std::vector<uint8_t> WithOrientation(const std::vector<uint8_t>& jpeg, int orientation) {
  const std::vector<uint8_t> tiff = {
      'M',  'M',  0, 42, 0, 0, 0, 8,  // big-endian header, IFD at offset 8
      0,    1,                        // one entry
      0x01, 0x12, 0, 3,  0, 0, 0, 1, 0, static_cast<uint8_t>(orientation), 0, 0,  // SHORT tag
      0,    0,    0, 0};                                                          // no next IFD
  std::vector<uint8_t> payload = {'E', 'x', 'i', 'f', 0, 0};
  payload.insert(payload.end(), tiff.begin(), tiff.end());
  const size_t length = payload.size() + 2;
  std::vector<uint8_t> out;
  out.reserve(jpeg.size() + length + 2);
  out.push_back(jpeg[0]);  // SOI
  out.push_back(jpeg[1]);
  for (const uint8_t byte : {uint8_t{0xFF}, uint8_t{0xE1}, static_cast<uint8_t>(length >> 8),
                             static_cast<uint8_t>(length & 0xFF)}) {
    out.push_back(byte);
  }
  for (const uint8_t byte : payload) out.push_back(byte);
  for (size_t i = 2; i < jpeg.size(); ++i) out.push_back(jpeg[i]);
  return out;
}

// The rectangle's pixels cut from a full image.
std::vector<uint8_t> Cut(const RgbImage& image, int x, int y, int width, int height) {
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(width) * height * 3);
  for (int row = y; row < y + height; ++row) {
    const uint8_t* start = &image.pixels[(static_cast<size_t>(row) * image.width + x) * 3];
    out.insert(out.end(), start, start + static_cast<size_t>(width) * 3);
  }
  return out;
}

TEST(DecodeRegionTest, PixelsEqualTheFullDecode) {
  std::mt19937 random(7);
  int compared = 0;
  for (const JpegKind& kind : Kinds()) {
    for (const auto& [width, height] : Sizes()) {
      const std::vector<uint8_t> jpeg = MakeJpeg(width, height, kind, 11);
      auto full = Decode(jpeg, DecodeOptions{});
      ASSERT_TRUE(full.ok()) << full.status().ToString();
      for (int trial = 0; trial < 150; ++trial) {
        const int w = std::uniform_int_distribution<int>(1, width)(random);
        const int h = std::uniform_int_distribution<int>(1, height)(random);
        const int x = std::uniform_int_distribution<int>(0, width - w)(random);
        const int y = std::uniform_int_distribution<int>(0, height - h)(random);
        auto region = DecodeRegion(jpeg, DecodeOptions{}, x, y, w, h);
        ASSERT_TRUE(region.ok()) << kind.name << ": " << region.status().ToString();
        EXPECT_EQ(region->pixels.width, w);
        EXPECT_EQ(region->pixels.height, h);
        EXPECT_EQ(region->x, x);
        EXPECT_EQ(region->y, y);
        EXPECT_EQ(region->full_width, width);
        EXPECT_EQ(region->full_height, height);
        ASSERT_TRUE(region->pixels.pixels == Cut(*full, x, y, w, h))
            << kind.name << " " << width << "x" << height << " rect " << x << "," << y << " " << w
            << "x" << h;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(Kinds().size() * Sizes().size() * 150));
}

TransformPipeline MustParse(const json& spec) {
  auto pipeline = TransformPipeline::FromJson(spec);
  EXPECT_TRUE(pipeline.ok()) << spec.dump() << ": " << pipeline.status().ToString();
  return std::move(pipeline).value();
}

std::vector<json> RegionPipelines() {
  return {
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}}, {{"op", "RandomHorizontalFlip"}}}}},
      {{"ops",
        {{{"op", "RandomHorizontalFlip"}},
         {{"op", "RandomResizedCrop"}, {"size", {96, 128}}, {"interpolation", "bicubic"}}}},
       {"output",
        {{"layout", "NHWC"},
         {"dtype", "float32"},
         {"mean", {0.485, 0.456, 0.406}},
         {"std", {0.229, 0.224, 0.225}}}}},
      {{"ops", {{{"op", "CenterCrop"}, {"size", {200}}}, {{"op", "Resize"}, {"size", {64, 64}}}}}},
      // Larger than the image: the crop pads with zeros.
      {{"ops",
        {{{"op", "CenterCrop"}, {"size", {600, 420}}}, {{"op", "Resize"}, {"size", {50, 60}}}}},
       {"output", {{"layout", "NHWC"}}}},
      {{"ops", {{{"op", "CenterCrop"}, {"size", {40}}}}}},
      // A later crop: SourceWindow is narrower than the first crop, which the
      // first resize still reads whole.
      {{"ops",
        {{{"op", "RandomResizedCrop"}, {"size", {256}}},
         {{"op", "CenterCrop"}, {"size", {224}}},
         {{"op", "RandomHorizontalFlip"}}}}},
  };
}

TEST(ApplyRegionTest, SamplesEqualApplyOnTheFullImage) {
  const std::vector<json> specs = RegionPipelines();
  int compared = 0;
  for (const JpegKind& kind : Kinds()) {
    for (const auto& [width, height] : Sizes()) {
      const std::vector<uint8_t> jpeg = MakeJpeg(width, height, kind, 23);
      auto full = Decode(jpeg, DecodeOptions{});
      ASSERT_TRUE(full.ok()) << full.status().ToString();
      for (const json& spec : specs) {
        const TransformPipeline pipeline = MustParse(spec);
        ASSERT_TRUE(pipeline.SupportsRegion()) << spec.dump();
        std::vector<std::byte> expected(pipeline.sample_bytes());
        std::vector<std::byte> actual(pipeline.sample_bytes());
        const int items = pipeline.is_random() ? 60 : 2;
        for (int item = 0; item < items; ++item) {
          const uint64_t seed = 1000 + item * 17;
          const uint64_t epoch = item % 3;
          auto window = pipeline.RegionWindow(width, height, seed, epoch, item);
          ASSERT_TRUE(window.ok()) << window.status().ToString();
          auto source = SourceWindow(pipeline, width, height, seed, epoch, item);
          ASSERT_TRUE(source.ok()) << source.status().ToString();
          EXPECT_LE(window->x, source->x);
          EXPECT_LE(window->y, source->y);
          EXPECT_GE(window->x + window->width, source->x + source->width);
          EXPECT_GE(window->y + window->height, source->y + source->height);
          auto region = DecodeRegion(jpeg, DecodeOptions{}, window->x, window->y, window->width,
                                     window->height);
          ASSERT_TRUE(region.ok()) << region.status().ToString();
          ASSERT_TRUE(pipeline.Apply(*full, seed, epoch, item, expected).ok());
          const Status status =
              pipeline.ApplyRegion(region->pixels, region->x, region->y, region->full_width,
                                   region->full_height, seed, epoch, item, actual);
          ASSERT_TRUE(status.ok()) << status.ToString();
          ASSERT_TRUE(actual == expected) << kind.name << " " << width << "x" << height << " "
                                          << spec.dump() << " item " << item;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 2000);
}

TEST(ApplyRegionTest, OnlyPipelinesThatStartWithACropQualify) {
  EXPECT_TRUE(
      MustParse({{"ops", {{{"op", "RandomResizedCrop"}, {"size", {8}}}}}}).SupportsRegion());
  EXPECT_TRUE(
      MustParse(
          {{"ops", {{{"op", "RandomHorizontalFlip"}}, {{"op", "CenterCrop"}, {"size", {8}}}}}})
          .SupportsRegion());
  const TransformPipeline resize_first = MustParse(
      {{"ops",
        {{{"op", "Resize"}, {"size", {16}}}, {{"op", "RandomResizedCrop"}, {"size", {8}}}}}});
  EXPECT_FALSE(resize_first.SupportsRegion());
  const RgbImage image{16, 16, std::vector<uint8_t>(16 * 16 * 3, 100)};
  std::vector<std::byte> dst(resize_first.sample_bytes());
  EXPECT_EQ(resize_first.ApplyRegion(image, 0, 0, 16, 16, 1, 0, 0, dst).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(resize_first.RegionWindow(16, 16, 1, 0, 0).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ApplyRegionTest, RejectsARegionThatMissesTheWindow) {
  const TransformPipeline pipeline = MustParse({{"ops", {{{"op", "CenterCrop"}, {"size", {20}}}}}});
  // The window of a 20-pixel centre crop of 100 x 100 is [40, 60) on both axes.
  const RgbImage region{30, 30, std::vector<uint8_t>(30 * 30 * 3, 7)};
  std::vector<std::byte> dst(pipeline.sample_bytes());
  EXPECT_TRUE(pipeline.ApplyRegion(region, 35, 35, 100, 100, 1, 0, 0, dst).ok());
  EXPECT_EQ(pipeline.ApplyRegion(region, 45, 35, 100, 100, 1, 0, 0, dst).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(pipeline.ApplyRegion(region, 80, 35, 100, 100, 1, 0, 0, dst).code(),
            StatusCode::kInvalidArgument);  // outside the image
}

// A crop after the resize narrows SourceWindow, but the resize still reads
// the whole first crop, so SourceWindow's rectangle alone is not enough.
TEST(ApplyRegionTest, LaterCropsStillNeedTheFirstCropWhole) {
  const TransformPipeline pipeline = MustParse({{"ops",
                                                 {{{"op", "RandomResizedCrop"}, {"size", {256}}},
                                                  {{"op", "CenterCrop"}, {"size", {224}}}}}});
  auto source = SourceWindow(pipeline, 500, 375, 3, 0, 0);
  auto region = pipeline.RegionWindow(500, 375, 3, 0, 0);
  ASSERT_TRUE(source.ok() && region.ok());
  EXPECT_LT(static_cast<int64_t>(source->width) * source->height,
            static_cast<int64_t>(region->width) * region->height);
  const RgbImage pixels{
      source->width, source->height,
      std::vector<uint8_t>(static_cast<size_t>(source->width) * source->height * 3)};
  std::vector<std::byte> dst(pipeline.sample_bytes());
  EXPECT_EQ(pipeline.ApplyRegion(pixels, source->x, source->y, 500, 375, 3, 0, 0, dst).code(),
            StatusCode::kInvalidArgument);
}

TEST(DecodeRegionTest, RotatedImagesFallBack) {
  const std::vector<uint8_t> jpeg = MakeJpeg(64, 48, Kinds()[0], 3);
  for (int orientation = 2; orientation <= 8; ++orientation) {
    const std::vector<uint8_t> rotated = WithOrientation(jpeg, orientation);
    ASSERT_TRUE(Decode(rotated, DecodeOptions{}).ok());
    EXPECT_EQ(DecodeRegion(rotated, DecodeOptions{}, 0, 0, 8, 8).status().code(),
              StatusCode::kInvalidArgument)
        << orientation;
  }
  // Orientation 1 written out explicitly is the plain case.
  EXPECT_TRUE(DecodeRegion(WithOrientation(jpeg, 1), DecodeOptions{}, 0, 0, 8, 8).ok());
}

TEST(DecodeRegionTest, CmykFallsBack) {
  const std::vector<uint8_t> cmyk =
      Compress(PhotoLikePixels(64, 48, 4, 5), 64, 48, TJPF_CMYK, TJSAMP_444, 0);
  ASSERT_TRUE(Decode(cmyk, DecodeOptions{}).ok());
  EXPECT_EQ(DecodeRegion(cmyk, DecodeOptions{}, 0, 0, 8, 8).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(DecodeRegionTest, NonJpegAndBadRectanglesAreInvalid) {
  const std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  EXPECT_EQ(DecodeRegion(png, DecodeOptions{}, 0, 0, 1, 1).status().code(),
            StatusCode::kInvalidArgument);
  const std::vector<uint8_t> jpeg = MakeJpeg(64, 48, Kinds()[0], 3);
  EXPECT_EQ(DecodeRegion(jpeg, DecodeOptions{}, 60, 0, 8, 8).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeRegion(jpeg, DecodeOptions{}, 0, 0, 0, 8).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeRegion(jpeg, DecodeOptions{}, -1, 0, 8, 8).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(DecodeRegionTest, TooManyPixelsIsResourceExhausted) {
  const std::vector<uint8_t> jpeg = MakeJpeg(64, 48, Kinds()[0], 3);
  DecodeOptions options;
  options.max_pixels = 64 * 48 - 1;
  EXPECT_EQ(DecodeRegion(jpeg, options, 0, 0, 8, 8).status().code(),
            StatusCode::kResourceExhausted);
}

// A truncated file fails even when the cut lies far below the rectangle,
// exactly when the full decode fails.
TEST(DecodeRegionTest, TruncatedFilesAreDataLoss) {
  for (const JpegKind& kind : Kinds()) {
    const std::vector<uint8_t> jpeg = MakeJpeg(500, 375, kind, 9);
    for (const double fraction : {0.3, 0.6, 0.9, 0.99}) {
      const std::vector<uint8_t> cut(jpeg.begin(),
                                     jpeg.begin() + static_cast<ptrdiff_t>(jpeg.size() * fraction));
      EXPECT_FALSE(Decode(cut, DecodeOptions{}).ok()) << kind.name << " " << fraction;
      for (const int y : {0, 150, 300}) {
        EXPECT_EQ(DecodeRegion(cut, DecodeOptions{}, 10, y, 64, 64).status().code(),
                  StatusCode::kDataLoss)
            << kind.name << " " << fraction << " y " << y;
      }
    }
    // Missing only the end-of-image marker.
    const std::vector<uint8_t> no_eoi(jpeg.begin(), jpeg.end() - 2);
    EXPECT_EQ(DecodeRegion(no_eoi, DecodeOptions{}, 0, 0, 32, 32).status().code(),
              StatusCode::kDataLoss)
        << kind.name;
  }
}

}  // namespace
}  // namespace galley::image
