// PNG (libpng) and BMP (galley's reader) against PIL: every colour type, bit
// depth and layout tests/fixtures/make_fixtures.py writes must decode to
// exactly the pixels PIL's convert("RGB") gives (its `.ref.png`), and every
// file PIL refuses must be refused with a Status, bombs from the header.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "galley/image/bmp_decoder.h"
#include "galley/image/decoder.h"
#include "galley/image/png_decoder.h"
#include "tests/unit/image_fixture.h"

namespace galley::image {
namespace {

void ExpectMatchesPil(const std::string& name) {
  SCOPED_TRACE(name);
  const RgbImage ours = DecodeFixture(name);
  const RgbImage pil = DecodeFixture(name + ".ref.png");
  ASSERT_GT(ours.width, 0);
  EXPECT_EQ(ours.width, pil.width);
  EXPECT_EQ(ours.height, pil.height);
  EXPECT_EQ(MaxAbsDiff(ours, pil), 0);
}

TEST(PngTest, EveryColourTypeAndDepthMatchesPil) {
  for (const char* name :
       {"png_rgb8.png", "png_rgba8.png", "png_gray8.png", "png_gray_alpha8.png", "png_gray1.png",
        "png_gray2.png", "png_gray4.png", "png_palette1.png", "png_palette2.png",
        "png_palette4.png", "png_palette8.png", "png_palette_trns.png", "png_rgb_trns.png",
        "png_rgb16.png", "png_rgba16.png", "png_gray16.png", "png_gray_alpha16.png"}) {
    ExpectMatchesPil(name);
  }
}

TEST(PngTest, InterlacedImagesMatchPilAndTheirProgressiveTwins) {
  for (const std::string base : {"png_rgb16", "png_rgba16", "png_gray16", "png_gray_alpha16",
                                 "png_gray2", "png_gray4", "png_rgba8"}) {
    ExpectMatchesPil(base + "_adam7.png");
    EXPECT_EQ(MaxAbsDiff(DecodeFixture(base + "_adam7.png"), DecodeFixture(base + ".png")), 0)
        << base;
  }
}

// PIL opens 16-bit gray as "I;16" and clips it to 255 in convert("RGB"):
// the fixture holds 0, 1, 77, 255, 256, 300, 4095 and 65535.
TEST(PngTest, SixteenBitGrayClipsLikePil) {
  const RgbImage image = DecodeFixture("png_gray16.png");
  bool saw_clipped = false;
  for (uint8_t v : image.pixels) {
    EXPECT_TRUE(v == 0 || v == 1 || v == 77 || v == 255) << int{v};
    saw_clipped = saw_clipped || v == 255;
  }
  EXPECT_TRUE(saw_clipped);
}

TEST(PngTest, MissingIendAndIdatCrcDecodeAsInPil) {
  ExpectMatchesPil("png_no_iend.png");
  ExpectMatchesPil("png_idat_crc.png");
}

TEST(PngTest, BrokenFilesAreDataLossAndBombsAreRefusedFromTheHeader) {
  for (const char* name : {"png_ihdr_crc.png", "png_truncated_idat.png", "png_zero_width.png"}) {
    const Status status = DecodeStatus(name);
    EXPECT_EQ(status.code(), StatusCode::kDataLoss) << name << ": " << status.ToString();
  }
  const Status bomb = DecodeStatus("png_bomb_max.png");
  EXPECT_EQ(bomb.code(), StatusCode::kResourceExhausted) << bomb.ToString();
  EXPECT_NE(bomb.message().find("2147483647x2147483647"), std::string::npos) << bomb.message();
  // A limit of one pixel less than the image refuses it; an exact one decodes.
  DecodeOptions options;
  options.max_pixels = 37 * 23 - 1;
  EXPECT_EQ(Decode(ReadFixture("png_rgb8.png"), options).status().code(),
            StatusCode::kResourceExhausted);
  options.max_pixels = 37 * 23;
  EXPECT_TRUE(Decode(ReadFixture("png_rgb8.png"), options).ok());
}

TEST(PngTest, HeaderGivesFormatAndSizeWithoutDecoding) {
  auto header = ReadHeader(ReadFixture("png_rgba16_adam7.png"));
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->format, ImageFormat::kPng);
  EXPECT_EQ(header->width, 37);
  EXPECT_EQ(header->height, 23);
}

TEST(BmpTest, EveryLayoutMatchesPil) {
  for (const char* name : {"bmp_pil_1.bmp",
                           "bmp_pil_L.bmp",
                           "bmp_pil_P.bmp",
                           "bmp_pil_RGB.bmp",
                           "bmp_pil_RGBA.bmp",
                           "bmp_1bit_colour.bmp",
                           "bmp_4bit.bmp",
                           "bmp_8bit.bmp",
                           "bmp_8bit_short_palette.bmp",
                           "bmp_8bit_gray_ramp.bmp",
                           "bmp_16bit_555.bmp",
                           "bmp_16bit_565.bmp",
                           "bmp_24bit.bmp",
                           "bmp_24bit_top_down.bmp",
                           "bmp_32bit_bgrx.bmp",
                           "bmp_32bit_fields_bgrx.bmp",
                           "bmp_32bit_fields_rgba_v4.bmp",
                           "bmp_32bit_fields_abgr_v5.bmp",
                           "bmp_core_8bit.bmp",
                           "bmp_core_24bit.bmp",
                           "bmp_rle8.bmp",
                           "bmp_rle4.bmp"}) {
    ExpectMatchesPil(name);
  }
  // The same pixels stored bottom-up and top-down.
  EXPECT_EQ(MaxAbsDiff(DecodeFixture("bmp_24bit.bmp"), DecodeFixture("bmp_24bit_top_down.bmp")), 0);
}

TEST(BmpTest, UnsupportedTruncatedAndOversizedFilesAreRefused) {
  const Status fields = DecodeStatus("bmp_16bit_444.bmp");
  EXPECT_EQ(fields.code(), StatusCode::kDataLoss);
  EXPECT_NE(fields.message().find("unsupported BMP"), std::string::npos) << fields.message();
  EXPECT_EQ(DecodeStatus("bmp_truncated.bmp").code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeStatus("bmp_bomb.bmp").code(), StatusCode::kResourceExhausted);

  std::vector<uint8_t> bytes = ReadFixture("bmp_24bit.bmp");
  bytes[30] = 4;  // compression: JPEG inside BMP
  const Status jpeg = Decode(bytes, DecodeOptions{}).status();
  EXPECT_EQ(jpeg.code(), StatusCode::kDataLoss);
  EXPECT_NE(jpeg.message().find("compression 4"), std::string::npos) << jpeg.message();
  bytes = ReadFixture("bmp_24bit.bmp");
  bytes[14] = 20;  // an info header size no BMP writer uses
  EXPECT_EQ(ReadHeader(bytes).status().code(), StatusCode::kDataLoss);
  bytes = ReadFixture("bmp_24bit.bmp");
  bytes[28] = 2;  // 2 bits per pixel (Windows CE only)
  EXPECT_EQ(Decode(bytes, DecodeOptions{}).status().code(), StatusCode::kDataLoss);
}

// A 4 x 3 RLE8 image written here: two pixels of index 1, a delta of one
// pixel right and one row up, one pixel of index 3, end of bitmap. Every
// pixel the stream skips keeps index 0.
TEST(BmpTest, RleDeltaAndEarlyEndLeaveIndexZero) {
  const std::vector<uint8_t> stream = {2, 1, 0, 2, 1, 1, 1, 3, 0, 1};
  const std::vector<uint8_t> palette = {30, 20, 10, 0, 60, 50, 40, 0,
                                        0,  0,  0,  0, 90, 80, 70, 0};  // BGRX
  const uint32_t offset = 14 + 40 + static_cast<uint32_t>(palette.size());
  std::vector<uint8_t> bmp(14 + 40, 0);
  auto put32 = [&bmp](size_t at, uint32_t value) {
    for (int i = 0; i < 4; ++i) bmp[at + i] = static_cast<uint8_t>(value >> (8 * i));
  };
  bmp[0] = 'B';
  bmp[1] = 'M';
  put32(10, offset);
  put32(14, 40);  // BITMAPINFOHEADER
  put32(18, 4);   // width
  put32(22, 3);   // height, bottom-up
  bmp[26] = 1;    // planes
  bmp[28] = 8;    // bits per pixel
  put32(30, 1);   // BI_RLE8
  put32(46, 4);   // colours in the palette
  bmp.insert(bmp.end(), palette.begin(), palette.end());
  bmp.insert(bmp.end(), stream.begin(), stream.end());

  auto image = Decode(bmp, DecodeOptions{});
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->width, 4);
  ASSERT_EQ(image->height, 3);
  const std::vector<int> upright_indexes = {0, 0, 0, 0,   // stored row 2: never reached
                                            0, 0, 0, 3,   // stored row 1: after the delta
                                            1, 1, 0, 0};  // stored row 0: the first run
  const uint8_t colours[4][3] = {{10, 20, 30}, {40, 50, 60}, {0, 0, 0}, {70, 80, 90}};
  for (size_t i = 0; i < upright_indexes.size(); ++i) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(image->pixels[i * 3 + c], colours[upright_indexes[i]][c]) << "pixel " << i;
    }
  }
  // Cut inside the stream, before its end-of-bitmap: truncated.
  bmp.resize(bmp.size() - 4);
  EXPECT_EQ(Decode(bmp, DecodeOptions{}).status().code(), StatusCode::kDataLoss);
}

TEST(BmpTest, HeaderGivesFormatAndUprightSize) {
  for (const char* name : {"bmp_24bit_top_down.bmp", "bmp_core_8bit.bmp", "bmp_rle4.bmp"}) {
    auto header = ReadHeader(ReadFixture(name));
    ASSERT_TRUE(header.ok()) << name << ": " << header.status().ToString();
    EXPECT_EQ(header->format, ImageFormat::kBmp);
    EXPECT_EQ(header->width, 37);
    EXPECT_EQ(header->height, 23);
  }
}

// Flipped bytes and cuts anywhere in every variant: each decode either
// succeeds with a whole image or fails with DataLoss, never crashes (the
// fuzz target, tests/fuzz, explores further).
TEST(PngBmpTest, CorruptedVariantsNeverCrashOrSucceedPartially) {
  std::mt19937 random(99);
  for (const char* name : {"png_palette4.png", "png_gray16_adam7.png", "png_rgba16.png",
                           "bmp_rle4.bmp", "bmp_rle8.bmp", "bmp_4bit.bmp", "bmp_16bit_565.bmp",
                           "bmp_32bit_fields_rgba_v4.bmp", "bmp_core_8bit.bmp"}) {
    const std::vector<uint8_t> original = ReadFixture(name);
    for (int round = 0; round < 200; ++round) {
      ExpectDamageHandled(original, 2, 3, round, random, name);
    }
  }
}

}  // namespace
}  // namespace galley::image
