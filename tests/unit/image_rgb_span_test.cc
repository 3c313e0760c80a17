// The pixel-copying primitives under the transform pipeline, against values
// written out by hand: border padding as numpy's np.pad (which torchvision's
// pad uses on PIL images) computes it, including borders wider than the
// image, and the eight flips and quarter turns, on windows of a larger
// image so that strides other than width * 3 are exercised.
#include <gtest/gtest.h>

#include <vector>

#include "galley/image/rgb_span.h"

namespace galley::image {
namespace {

// A width x height image whose pixel (x, y) is (10 * y + x, 100 + x, 200 + y),
// placed at (1, 1) inside a larger buffer filled with 255.
struct Framed {
  std::vector<uint8_t> buffer;
  RgbSpan image;
  Framed(int width, int height) : buffer(static_cast<size_t>(width + 3) * (height + 2) * 3, 255) {
    image = RgbSpan::Packed(buffer.data(), width + 3, height + 2).Window(1, 1, width, height);
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        uint8_t* p = image.row(y) + x * 3;
        p[0] = static_cast<uint8_t>(10 * y + x);
        p[1] = static_cast<uint8_t>(100 + x);
        p[2] = static_cast<uint8_t>(200 + y);
      }
    }
  }
};

// The first channel of every pixel, row by row.
std::vector<int> FirstChannel(const RgbSpan& image) {
  std::vector<int> out;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) out.push_back(image.row(y)[x * 3]);
  }
  return out;
}

TEST(RgbSpanTest, PaddingFoldsLikeNumpyEvenWhenWiderThanTheImage) {
  Framed source(3, 1);  // first channel 0, 1, 2
  std::vector<uint8_t> pixels(14 * 1 * 3);
  const RgbSpan padded = RgbSpan::Packed(pixels.data(), 14, 1);
  // np.pad([0, 1, 2], (5, 6), mode=...)
  PadPixels(source.image, padded, 5, 0, PadMode::kReflect, Fill{});
  EXPECT_EQ(FirstChannel(padded), (std::vector<int>{1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0}));
  PadPixels(source.image, padded, 5, 0, PadMode::kSymmetric, Fill{});
  EXPECT_EQ(FirstChannel(padded), (std::vector<int>{1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0, 0, 1, 2}));
  PadPixels(source.image, padded, 5, 0, PadMode::kEdge, Fill{});
  EXPECT_EQ(FirstChannel(padded), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2, 2}));
  PadPixels(source.image, padded, 5, 0, PadMode::kConstant, Fill{9, 8, 7});
  EXPECT_EQ(FirstChannel(padded), (std::vector<int>{9, 9, 9, 9, 9, 0, 1, 2, 9, 9, 9, 9, 9, 9}));
  EXPECT_EQ(padded.row(0)[1], 8);
  EXPECT_EQ(padded.row(0)[2], 7);
  EXPECT_EQ(padded.row(0)[5 * 3 + 1], 100);  // the source's own pixels keep every channel
}

TEST(RgbSpanTest, PaddingASingleRowRepeatsItInEveryMode) {
  Framed source(2, 1);
  std::vector<uint8_t> pixels(2 * 4 * 3);
  const RgbSpan padded = RgbSpan::Packed(pixels.data(), 2, 4);
  for (PadMode mode : {PadMode::kReflect, PadMode::kSymmetric, PadMode::kEdge}) {
    PadPixels(source.image, padded, 0, 2, mode, Fill{});
    EXPECT_EQ(FirstChannel(padded), (std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1}));
  }
}

TEST(RgbSpanTest, EveryOrientationTurnsAsExifSays) {
  // Source first channel, 3 x 2:  0  1  2
  //                              10 11 12
  const std::vector<std::vector<int>> expected = {
      {},
      {0, 1, 2, 10, 11, 12},  // 1: as is
      {2, 1, 0, 12, 11, 10},  // 2: mirrored left-right
      {12, 11, 10, 2, 1, 0},  // 3: turned 180 degrees
      {10, 11, 12, 0, 1, 2},  // 4: mirrored top-bottom
      {0, 10, 1, 11, 2, 12},  // 5: transposed (2 x 3)
      {10, 0, 11, 1, 12, 2},  // 6: turned clockwise
      {12, 2, 11, 1, 10, 0},  // 7: transposed across the other diagonal
      {2, 12, 1, 11, 0, 10},  // 8: turned counter-clockwise
  };
  Framed source(3, 2);
  for (int orientation = 1; orientation <= 8; ++orientation) {
    SCOPED_TRACE(orientation);
    const bool swap = orientation >= 5;
    Framed target(swap ? 2 : 3, swap ? 3 : 2);
    ReorientPixels(source.image, target.image, orientation);
    EXPECT_EQ(FirstChannel(target.image), expected[orientation]);
    // The frame around the window is untouched.
    EXPECT_EQ(target.buffer[0], 255);
    EXPECT_EQ(target.buffer.back(), 255);
  }
}

TEST(RgbSpanTest, CopyAndFillStayInsideTheirWindows) {
  Framed source(3, 2);
  Framed target(3, 2);
  FillPixels(target.image, Fill{1, 2, 3});
  EXPECT_EQ(FirstChannel(target.image), (std::vector<int>(6, 1)));
  CopyPixels(source.image, target.image);
  EXPECT_EQ(FirstChannel(target.image), FirstChannel(source.image));
  EXPECT_EQ(target.buffer, source.buffer);  // frame included: nothing outside was written
}

}  // namespace
}  // namespace galley::image
