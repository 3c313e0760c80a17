// Region decoding: decodes only the rectangle of a JPEG that a crop reads.
//
// A RandomResizedCrop reads on average about half of the source, and the
// inverse DCT, upsampling and colour conversion of the rest is wasted work.
// DecodeRegion uses libjpeg-turbo's jpeg_crop_scanline (whole MCU columns)
// and jpeg_skip_scanlines (rows above the rectangle skip everything but
// entropy decoding) to produce just that rectangle, with pixels identical to
// the same rectangle of Decode's output: same DCT method and upsampling, and
// a margin decoded around the rectangle so that upsampling at the decoded
// edges never reaches the pixels returned.
//
// It handles the common case only: a JPEG (baseline or progressive) stored as
// YCbCr or grayscale, with EXIF orientation 1. Anything else is
// InvalidArgument, meaning "use Decode instead"; the data itself being corrupt
// or truncated anywhere in the file (not only inside the rectangle) is
// DataLoss, and an image over DecodeOptions::max_pixels is ResourceExhausted,
// as with Decode.
//
// Thread-safety: safe to call concurrently; each thread keeps its own libjpeg
// decompressor.
#ifndef GALLEY_SERVER_IMAGE_REGION_DECODER_H_
#define GALLEY_SERVER_IMAGE_REGION_DECODER_H_

#include <cstdint>
#include <span>

#include "galley/image/decoder.h"
#include "galley/status.h"

namespace galley::image {

// A rectangle of a decoded image and where it lies in the full image.
struct ImageRegion {
  RgbImage pixels;  // exactly the requested width x height
  int x = 0;        // top-left corner in the full image
  int y = 0;
  int full_width = 0;  // size of the full (upright) image
  int full_height = 0;
};

// Decodes the rectangle [x, x + width) x [y, y + height) of `jpeg`, which
// must lie inside the image (InvalidArgument otherwise; ReadHeader gives the
// size). The returned pixels equal the same rectangle of Decode(jpeg).
Result<ImageRegion> DecodeRegion(std::span<const uint8_t> jpeg, const DecodeOptions& options, int x,
                                 int y, int width, int height);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_REGION_DECODER_H_
