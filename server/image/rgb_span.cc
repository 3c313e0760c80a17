#include "galley/image/rgb_span.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace galley::image {
namespace {

// Where coordinate p (possibly outside [0, length)) reads from under a
// mirroring border; -1 never results. With `repeat_edge` the edge pixel is
// mirrored too (symmetric), else the mirror stops short of it (reflect).
int Mirror(int p, int length, bool repeat_edge) {
  if (length == 1) return 0;
  const int shift = repeat_edge ? 1 : 0;
  while (p < 0 || p >= length) {
    p = p < 0 ? -p - shift : 2 * (length - 1) - p + shift;
  }
  return p;
}

// The source index for border-padded coordinate p, or -1 for "fill".
int BorderSource(int p, int length, PadMode mode) {
  if (p >= 0 && p < length) return p;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return std::clamp(p, 0, length - 1);
    case PadMode::kReflect:
      return Mirror(p, length, false);
    case PadMode::kSymmetric:
      return Mirror(p, length, true);
  }
  return -1;
}

// Under a turn that swaps the axes, output pixel (ox, oy) reads source
// pixel (sx, sy) with sx depending on oy alone and sy on ox alone:
// sx = x_sign * oy (+ width - 1 when x_sign < 0), likewise sy with ox.
struct AxisSwap {
  int x_sign;
  int y_sign;
};

}  // namespace

void CopyPixels(const RgbView& src, const RgbSpan& dst) {
  const size_t bytes = static_cast<size_t>(src.width) * 3;
  for (int y = 0; y < src.height; ++y) std::memcpy(dst.row(y), src.row(y), bytes);
}

void FillPixels(const RgbSpan& dst, const Fill& colour) {
  for (int y = 0; y < dst.height; ++y) {
    uint8_t* out = dst.row(y);
    if (colour[0] == colour[1] && colour[1] == colour[2]) {
      std::memset(out, colour[0], static_cast<size_t>(dst.width) * 3);
      continue;
    }
    for (int x = 0; x < dst.width; ++x) std::memcpy(out + x * 3, colour.data(), 3);
  }
}

void PadPixels(const RgbView& src, const RgbSpan& dst, int left, int top, PadMode mode,
               const Fill& fill) {
  std::vector<int> columns(dst.width);
  for (int x = 0; x < dst.width; ++x) columns[x] = BorderSource(x - left, src.width, mode);
  for (int y = 0; y < dst.height; ++y) {
    uint8_t* out = dst.row(y);
    const int source_row = BorderSource(y - top, src.height, mode);
    if (source_row < 0) {
      FillPixels(dst.Window(0, y, dst.width, 1), fill);
      continue;
    }
    const uint8_t* in = src.row(source_row);
    for (int x = 0; x < dst.width; ++x) {
      std::memcpy(out + x * 3, columns[x] < 0 ? fill.data() : in + columns[x] * 3, 3);
    }
  }
}

void ReorientPixels(const RgbView& src, const RgbSpan& dst, int orientation) {
  const int w = src.width, h = src.height;
  if (orientation >= 5 && orientation <= 8) {
    // Output pixel (ox, oy) of a w x h source turned onto h x w.
    static constexpr AxisSwap kSwaps[4] = {
        {1, 1},    // 5: transposed, (oy, ox)
        {1, -1},   // 6: clockwise, (oy, h - 1 - ox)
        {-1, -1},  // 7: other diagonal, (w - 1 - oy, h - 1 - ox)
        {-1, 1},   // 8: counter-clockwise, (w - 1 - oy, ox)
    };
    const AxisSwap& swap = kSwaps[orientation - 5];
    auto source_x = [&](int oy) { return swap.x_sign > 0 ? oy : w - 1 - oy; };
    auto source_y = [&](int ox) { return swap.y_sign > 0 ? ox : h - 1 - ox; };
    // Square tiles keep both the rows read and the rows written in cache.
    // Along an output row the source moves one row down or up per pixel.
    constexpr int kTile = 64;
    const ptrdiff_t step = swap.y_sign * src.stride;
    for (int ty = 0; ty < dst.height; ty += kTile) {
      for (int tx = 0; tx < dst.width; tx += kTile) {
        const int y_end = std::min(ty + kTile, dst.height);
        const int x_end = std::min(tx + kTile, dst.width);
        for (int oy = ty; oy < y_end; ++oy) {
          uint8_t* out = dst.row(oy) + tx * 3;
          const uint8_t* in = src.row(source_y(tx)) + source_x(oy) * 3;
          for (int ox = tx; ox < x_end; ++ox, out += 3, in += step) {
            out[0] = in[0];
            out[1] = in[1];
            out[2] = in[2];
          }
        }
      }
    }
    return;
  }
  const bool mirror = orientation == 2 || orientation == 3;
  const bool upside_down = orientation == 3 || orientation == 4;
  for (int y = 0; y < h; ++y) {
    const uint8_t* in = src.row(upside_down ? h - 1 - y : y);
    uint8_t* out = dst.row(y);
    if (!mirror) {
      std::memcpy(out, in, static_cast<size_t>(w) * 3);
      continue;
    }
    for (int x = 0; x < w; ++x) std::memcpy(out + x * 3, in + (w - 1 - x) * 3, 3);
  }
}

}  // namespace galley::image
