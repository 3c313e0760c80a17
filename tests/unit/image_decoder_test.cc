// Decoder tests over the fixtures written by tests/fixtures/make_fixtures.py
// (tests/unit/image_fixture.h); PNG and BMP in depth are in
// image_png_bmp_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>
#include <webp/encode.h>

// jpeglib.h uses FILE and size_t without including their headers.
#include <cstddef>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
// clang-format on

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "galley/image/decoder.h"
#include "galley/image/region_decoder.h"
#include "tests/unit/image_fixture.h"

namespace galley::image {
namespace {

double MeanAbsDiff(const RgbImage& a, const RgbImage& b) {
  double sum = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) sum += std::abs(int{a.pixels[i]} - int{b.pixels[i]});
  return sum / static_cast<double>(a.pixels.size());
}

const uint8_t* PixelAt(const RgbImage& image, int x, int y) {
  return &image.pixels[(static_cast<size_t>(y) * image.width + x) * 3];
}

// Both sides use libjpeg-turbo's accurate integer IDCT and fancy upsampling,
// so JPEG decodes are expected to be identical to PIL's; the tolerance of 1
// only leaves room for a different SIMD path on another CPU.
constexpr int kJpegParityTolerance = 1;

TEST(DecoderTest, BaselineJpegMatchesPil) {
  const RgbImage image = DecodeFixture("baseline.jpg");
  EXPECT_EQ(image.width, 160);
  EXPECT_EQ(image.height, 120);
  EXPECT_LE(MaxAbsDiff(image, DecodeFixture("baseline.jpg.ref.png")), kJpegParityTolerance);
  EXPECT_GE(MaxAbsDiff(image, DecodeFixture("baseline.jpg.ref.png")), 0);
}

TEST(DecoderTest, ProgressiveJpegMatchesPil) {
  const RgbImage image = DecodeFixture("progressive.jpg");
  const int diff = MaxAbsDiff(image, DecodeFixture("progressive.jpg.ref.png"));
  EXPECT_GE(diff, 0);
  EXPECT_LE(diff, kJpegParityTolerance);
}

TEST(DecoderTest, GrayscaleJpegBecomesRgbMatchingPil) {
  const RgbImage image = DecodeFixture("gray.jpg");
  ASSERT_EQ(image.pixels.size(), size_t{160} * 120 * 3);
  for (size_t i = 0; i < image.pixels.size(); i += 3) {
    ASSERT_EQ(image.pixels[i], image.pixels[i + 1]);
    ASSERT_EQ(image.pixels[i], image.pixels[i + 2]);
  }
  const int diff = MaxAbsDiff(image, DecodeFixture("gray.jpg.ref.png"));
  EXPECT_GE(diff, 0);
  EXPECT_LE(diff, kJpegParityTolerance);
}

TEST(DecoderTest, CmykJpegMatchesPil) {
  const RgbImage image = DecodeFixture("cmyk.jpg");
  EXPECT_EQ(image.width, 160);
  const int diff = MaxAbsDiff(image, DecodeFixture("cmyk.jpg.ref.png"));
  EXPECT_GE(diff, 0);
  EXPECT_LE(diff, kJpegParityTolerance);
}

TEST(DecoderTest, EveryExifOrientationDecodesUpright) {
  const RgbImage upright = DecodeFixture("upright.png");
  ASSERT_EQ(upright.width, 64);
  ASSERT_EQ(upright.height, 48);
  for (int orientation = 1; orientation <= 8; ++orientation) {
    SCOPED_TRACE("orientation " + std::to_string(orientation));
    const std::string name = "orientation_" + std::to_string(orientation) + ".jpg";
    const RgbImage image = DecodeFixture(name);
    ASSERT_EQ(image.width, 64);
    ASSERT_EQ(image.height, 48);
    // Recompression at quality 95 moves samples a little; a wrong orientation
    // would put whole quadrants in the wrong place (mean error ~100).
    EXPECT_LT(MeanAbsDiff(image, upright), 3.0);
    const uint8_t* marker = PixelAt(image, 2, 2);
    EXPECT_GT(marker[0], 230);
    EXPECT_GT(marker[1], 230);
    const uint8_t* top_right = PixelAt(image, 48, 12);
    EXPECT_NEAR(top_right[1], 200, 12);
    EXPECT_NEAR(top_right[0], 30, 12);

    auto header = ReadHeader(ReadFixture(name));
    ASSERT_TRUE(header.ok());
    EXPECT_EQ(header->orientation, orientation);
    EXPECT_EQ(header->width, 64);
    EXPECT_EQ(header->height, 48);
  }
}

TEST(DecoderTest, PngVariantsDecodeToTheSameRgb) {
  const RgbImage rgb = DecodeFixture("rgb.png");
  ASSERT_EQ(rgb.width, 160);
  ASSERT_EQ(rgb.height, 120);
  // 16-bit samples are v * 257: keeping the high byte gives v exactly.
  EXPECT_EQ(MaxAbsDiff(DecodeFixture("rgb16.png"), rgb), 0);
  // Alpha is dropped, colour untouched (PIL's convert("RGB") does the same).
  EXPECT_EQ(MaxAbsDiff(DecodeFixture("rgba.png"), rgb), 0);
  EXPECT_EQ(MaxAbsDiff(DecodeFixture("palette.png"), DecodeFixture("palette.png.ref.png")), 0);
  const RgbImage gray = DecodeFixture("gray.png");
  ASSERT_EQ(gray.pixels.size(), rgb.pixels.size());
  for (size_t i = 0; i < gray.pixels.size(); i += 3) {
    ASSERT_EQ(gray.pixels[i], gray.pixels[i + 1]);
    ASSERT_EQ(gray.pixels[i], gray.pixels[i + 2]);
  }
}

TEST(DecoderTest, BrokenInputsAreDataLoss) {
  for (const char* name : {"truncated.jpg", "truncated.png", "empty.jpg", "text.jpg"}) {
    SCOPED_TRACE(name);
    const Status status = DecodeStatus(name);
    EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status.ToString();
    EXPECT_FALSE(status.message().empty());
  }
}

TEST(DecoderTest, DecompressionBombsAreRefusedFromTheHeader) {
  for (const char* name : {"bomb.jpg", "bomb.png"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(DecodeStatus(name).code(), StatusCode::kResourceExhausted);
  }
  DecodeOptions tiny;
  tiny.max_pixels = 160 * 120 - 1;
  EXPECT_EQ(Decode(ReadFixture("baseline.jpg"), tiny).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(Decode(ReadFixture("rgb.png"), tiny).status().code(), StatusCode::kResourceExhausted);
  tiny.max_pixels = 160 * 120;
  EXPECT_TRUE(Decode(ReadFixture("baseline.jpg"), tiny).ok());
}

// A lossless WebP round trip, a WebP that declares 16383 x 16383 pixels in
// 34 bytes (once decoded in full by OpenCV before any size check), and a
// TIFF, which is not on the allow-list.
TEST(DecoderTest, WebpDecodesThroughLibwebpAndOtherFormatsAreRefused) {
  const int width = 37, height = 23;
  std::vector<uint8_t> rgb(width * height * 3);
  std::mt19937 rng(3);
  for (auto& v : rgb) v = static_cast<uint8_t>(rng());
  uint8_t* encoded = nullptr;
  const size_t size = WebPEncodeLosslessRGB(rgb.data(), width, height, width * 3, &encoded);
  ASSERT_GT(size, 0u);
  const std::vector<uint8_t> webp(encoded, encoded + size);
  WebPFree(encoded);
  auto header = ReadHeader(webp);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->format, ImageFormat::kWebp);
  EXPECT_EQ(header->width, width);
  auto decoded = Decode(webp, DecodeOptions{});
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->width, width);
  EXPECT_EQ(decoded->height, height);
  EXPECT_EQ(decoded->pixels, rgb);

  // VP8L: signature 0x2f, then 14-bit width-1 and height-1, alpha, version.
  std::vector<uint8_t> bomb = {'R', 'I', 'F', 'F', 26,  0,  0, 0, 'W', 'E', 'B',
                               'P', 'V', 'P', '8', 'L', 14, 0, 0, 0,   0x2f};
  const uint32_t bits = 16382u | (16382u << 14);
  for (int i = 0; i < 4; ++i) bomb.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  bomb.resize(34, 0);
  EXPECT_EQ(Decode(bomb, DecodeOptions{}).status().code(), StatusCode::kResourceExhausted)
      << Decode(bomb, DecodeOptions{}).status().ToString();

  const std::vector<uint8_t> tiff = {'I', 'I', 42, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const Status refused = Decode(tiff, DecodeOptions{}).status();
  EXPECT_EQ(refused.code(), StatusCode::kDataLoss);
  EXPECT_NE(refused.message().find("unsupported image format"), std::string::npos);
}

TEST(DecoderTest, ScaledDecodePicksTheSmallestSufficientFactor) {
  const auto bytes = ReadFixture("baseline.jpg");  // 160 x 120
  auto quarter = DecodeScaled(bytes, DecodeOptions{}, 40, 30);
  ASSERT_TRUE(quarter.ok());
  EXPECT_EQ(quarter->width, 40);
  EXPECT_EQ(quarter->height, 30);
  auto half = DecodeScaled(bytes, DecodeOptions{}, 41, 30);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->width, 80);
  EXPECT_EQ(half->height, 60);
  auto eighth = DecodeScaled(bytes, DecodeOptions{}, 20, 15);
  ASSERT_TRUE(eighth.ok());
  EXPECT_EQ(eighth->width, 20);
  EXPECT_EQ(eighth->height, 15);
  auto full = DecodeScaled(bytes, DecodeOptions{}, 161, 1);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->width, 160);
  // A scaled decode approximates the full one shrunk: compare a smooth area.
  const RgbImage reference = DecodeFixture("baseline.jpg");
  const uint8_t* scaled_pixel = PixelAt(*quarter, 20, 15);
  const uint8_t* full_pixel = PixelAt(reference, 81, 61);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(scaled_pixel[c], full_pixel[c], 6);
}

TEST(DecoderTest, ScaledDecodeComparesMinimumsInUprightOrientation) {
  // Stored 48 x 64, displayed 64 x 48 after a quarter turn.
  const auto bytes = ReadFixture("orientation_6.jpg");
  auto image = DecodeScaled(bytes, DecodeOptions{}, 16, 12);
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->width, 16);
  EXPECT_EQ(image->height, 12);
}

TEST(DecoderTest, RandomGarbageNeverCrashesOrSucceedsSilently) {
  std::mt19937 random(1234);
  const auto jpeg = ReadFixture("baseline.jpg");
  const auto png = ReadFixture("rgb.png");
  // Corrupt a few bytes after the signature.
  for (int round = 0; round < 300; ++round) {
    ExpectDamageHandled(round % 2 == 0 ? jpeg : png, 8, 4, round, random,
                        round % 2 == 0 ? "baseline.jpg" : "rgb.png");
  }
}

// A JPEG with luma sampled h_samp x v_samp against 1 x 1 chroma, written
// with libjpeg (PIL can only write 4:4:4, 4:2:2 and 4:2:0).
std::vector<uint8_t> JpegWithSampling(int h_samp, int v_samp, int width, int height) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  std::mt19937 rng(h_samp * 10 + v_samp);
  for (size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<uint8_t>((i / 3 % width) * 3 + (i / 3 / width) * 2 + rng() % 40);
  }
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr error{};
  cinfo.err = jpeg_std_error(&error);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  cinfo.comp_info[0].h_samp_factor = h_samp;
  cinfo.comp_info[0].v_samp_factor = v_samp;
  for (int c = 1; c < 3; ++c)
    cinfo.comp_info[c].h_samp_factor = cinfo.comp_info[c].v_samp_factor = 1;
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = &pixels[static_cast<size_t>(cinfo.next_scanline) * width * 3];
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> jpeg(buffer, buffer + size);
  std::free(buffer);
  return jpeg;
}

// TurboJPEG 2.1's header reader has no name for these samplings and refuses
// them; PIL reads them, and so must galley, with PIL's pixels.
TEST(DecoderTest, UnusualChromaSamplingDecodesLikePil) {
  namespace fs = std::filesystem;
  const fs::path work = fs::temp_directory_path() / ("galley_sampling_" + std::to_string(getpid()));
  fs::create_directories(work);
  const std::vector<std::pair<int, int>> samplings = {{4, 2}, {1, 4}, {3, 1}};
  for (size_t i = 0; i < samplings.size(); ++i) {
    const auto jpeg = JpegWithSampling(samplings[i].first, samplings[i].second, 53, 37);
    std::ofstream(work / (std::to_string(i) + ".jpg"), std::ios::binary)
        .write(reinterpret_cast<const char*>(jpeg.data()),
               static_cast<std::streamsize>(jpeg.size()));
  }
  const std::string command =
      std::string(GALLEY_TEST_PYTHON) + " -c \"import sys, glob; from PIL import Image; [" +
      "open(p + '.raw', 'wb').write(Image.open(p).convert('RGB').tobytes()) for p in " +
      "glob.glob(sys.argv[1] + '/*.jpg')]\" " + work.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  for (size_t i = 0; i < samplings.size(); ++i) {
    SCOPED_TRACE(std::to_string(samplings[i].first) + "x" + std::to_string(samplings[i].second));
    std::ifstream in(work / (std::to_string(i) + ".jpg"), std::ios::binary);
    const std::vector<uint8_t> jpeg{std::istreambuf_iterator<char>(in),
                                    std::istreambuf_iterator<char>()};
    std::ifstream raw(work / (std::to_string(i) + ".jpg.raw"), std::ios::binary);
    const std::vector<uint8_t> pil{std::istreambuf_iterator<char>(raw),
                                   std::istreambuf_iterator<char>()};
    auto header = ReadHeader(jpeg);
    ASSERT_TRUE(header.ok()) << header.status().ToString();
    EXPECT_EQ(header->width, 53);
    EXPECT_EQ(header->height, 37);
    auto image = Decode(jpeg, DecodeOptions{});
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    EXPECT_EQ(image->pixels, pil);
    // The crop path (libjpeg directly) gives the same rectangle.
    auto region = DecodeRegion(jpeg, DecodeOptions{}, 9, 5, 30, 20);
    ASSERT_TRUE(region.ok()) << region.status().ToString();
    for (int y = 0; y < 20; ++y) {
      for (int x = 0; x < 30 * 3; ++x) {
        ASSERT_EQ(region->pixels.pixels[y * 30 * 3 + x], pil[((5 + y) * 53 + 9) * 3 + x])
            << "row " << y << " byte " << x;
      }
    }
  }
  fs::remove_all(work);
}

}  // namespace
}  // namespace galley::image
