// The shrink JobSpec::max_resolution asks for: an image whose longer side is
// over the limit is resized once, on first read, so that side is the limit.
//
// The filter is PIL's BOX (resample.h), the antialiased form of area
// averaging: each output pixel is the mean of the source pixels under it,
// which is what the ImageNet conversions at a maximum side do (OpenCV's
// INTER_AREA) and what loses least to aliasing among the cheap filters when
// the factor is large. The result equals
// `PIL.Image.resize(MaxResolutionSize(...), Image.BOX)` bit for bit, so a
// dataset shrunk by galleyd is the same as one shrunk with Pillow beforehand.
//
// The shorter side is scaled by the same factor and rounded down, as
// torchvision's Resize(max_size=) does, and is at least 1 pixel.
//
// Thread-safety: the functions are stateless; see resample.h for scratch.
#ifndef GALLEY_SERVER_IMAGE_MAX_RESOLUTION_H_
#define GALLEY_SERVER_IMAGE_MAX_RESOLUTION_H_

#include <cstdint>

#include "galley/image/decoder.h"
#include "galley/image/resample.h"
#include "galley/status.h"

namespace galley::image {

inline constexpr ResampleFilter kMaxResolutionFilter = ResampleFilter::kBox;

struct ImageSize {
  int width = 0;
  int height = 0;
  bool operator==(const ImageSize&) const = default;
};

// The size a width x height image is kept at under `max_resolution` (0: no
// limit, the size itself).
ImageSize MaxResolutionSize(int width, int height, uint32_t max_resolution);

// Replaces `*image` by its shrunk form when its longer side is over
// `max_resolution`; leaves it untouched (the same buffer) otherwise, and for
// 0. InvalidArgument when its pixels are not width x height RGB.
Status ShrinkToMaxResolution(uint32_t max_resolution, RgbImage* image);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_MAX_RESOLUTION_H_
