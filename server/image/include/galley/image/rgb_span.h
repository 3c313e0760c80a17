// RgbView and RgbSpan: non-owning views of interleaved RGB uint8 pixels
// (HWC, row-major, rows `stride` bytes apart), read-only and writable, and
// the copies the transform pipeline makes between them: copy, fill, border
// padding, and the eight flips and quarter turns.
//
// A view never owns its pixels: whoever made it keeps the memory alive for
// as long as the view is used. A window of a view (a crop) shares its
// pixels. These are plain values; the functions are stateless and safe from
// any thread, as long as no two threads write the same pixels.
#ifndef GALLEY_SERVER_IMAGE_RGB_SPAN_H_
#define GALLEY_SERVER_IMAGE_RGB_SPAN_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace galley::image {

// Read-only interleaved RGB pixels: pixel (x, y) channel c is at
// data[y * stride + x * 3 + c].
struct RgbView {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  ptrdiff_t stride = 0;  // bytes from one row to the next, at least width * 3

  const uint8_t* row(int y) const { return data + y * stride; }
};

// Writable interleaved RGB pixels, laid out as RgbView's.
struct RgbSpan {
  uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  ptrdiff_t stride = 0;

  // A packed image: rows width * 3 bytes apart.
  static RgbSpan Packed(uint8_t* data, int width, int height) {
    return {data, width, height, static_cast<ptrdiff_t>(width) * 3};
  }
  uint8_t* row(int y) const { return data + y * stride; }
  // The width x height rectangle at (x, y), which must lie inside.
  RgbSpan Window(int x, int y, int window_width, int window_height) const {
    return {row(y) + static_cast<ptrdiff_t>(x) * 3, window_width, window_height, stride};
  }
  operator RgbView() const { return {data, width, height, stride}; }  // NOLINT: a view of it
};

using Fill = std::array<uint8_t, 3>;

// Copies src into dst, which has the same size.
void CopyPixels(const RgbView& src, const RgbSpan& dst);

// Sets every pixel of dst to `colour`.
void FillPixels(const RgbSpan& dst, const Fill& colour);

// How PadPixels fills the border, as torchvision's pad modes name them:
// kReflect mirrors without repeating the edge pixel (d c b | a b c d | c b a),
// kSymmetric repeats it (c b a | a b c d | d c b); both fold again when the
// border is wider than the image.
enum class PadMode { kConstant, kEdge, kReflect, kSymmetric };

// Writes src at (left, top) of the larger dst and fills the border around
// it as `mode` says (`fill` for kConstant).
void PadPixels(const RgbView& src, const RgbSpan& dst, int left, int top, PadMode mode,
               const Fill& fill);

// Writes src turned by one of the eight flips and quarter turns, numbered
// as EXIF orientations number them (1: as is, 2: mirrored left-right,
// 3: turned 180 degrees, 4: mirrored top-bottom, 5: transposed, 6: turned
// 90 degrees clockwise, 7: transposed across the other diagonal, 8: turned
// 90 degrees counter-clockwise). dst is src's size, with width and height
// swapped for 5..8; it must not overlap src.
void ReorientPixels(const RgbView& src, const RgbSpan& dst, int orientation);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_RGB_SPAN_H_
