// Decoder: turns the bytes of one image file into full-resolution RGB pixels.
//
// Formats are behind an allow-list, each with a pixel-count check from its
// header before any pixel memory is allocated: JPEG through TurboJPEG
// (libjpeg-turbo), WebP through libwebp, PNG through libpng
// (png_decoder.h) and BMP through galley's own reader (bmp_decoder.h). Each
// gives the pixels PIL's Image.open(f).convert("RGB") gives, torchvision's
// default loader. Every other format (TIFF, GIF, PGM, ...) is refused as
// DataLoss without reaching a decoder. The EXIF orientation of a JPEG is
// applied, so the result is upright. Every failure is a value: a corrupt, truncated, empty,
// non-image or unsupported input is DataLoss, an image larger than DecodeOptions::max_pixels is
// ResourceExhausted.
//
// Thread-safety: all functions are safe to call concurrently; each thread keeps
// its own TurboJPEG handle.
#ifndef GALLEY_SERVER_IMAGE_DECODER_H_
#define GALLEY_SERVER_IMAGE_DECODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "galley/status.h"

namespace galley::image {

// Interleaved RGB, row-major (HWC), row stride width * 3 bytes.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
};

struct DecodeOptions {
  // Largest accepted width * height. Default: PIL's Image.MAX_IMAGE_PIXELS, so
  // galley refuses the same decompression bombs a PyTorch loader would notice.
  uint64_t max_pixels = 178956970;
};

enum class ImageFormat { kJpeg, kPng, kBmp, kWebp, kOther };

// What the file's header says, without decoding pixels.
struct ImageHeader {
  ImageFormat format = ImageFormat::kOther;
  // Upright dimensions: already swapped for EXIF orientations 5..8.
  int width = 0;
  int height = 0;
  // EXIF orientation 1..8 (1 = as stored); always 1 for non-JPEG input.
  int orientation = 1;
};

// Reads format, dimensions and orientation. Formats other than JPEG, PNG,
// BMP and WebP give kOther with width = height = 0 (not an error here;
// Decode refuses them).
// Malformed headers are DataLoss.
Result<ImageHeader> ReadHeader(std::span<const uint8_t> bytes);

// Decodes a whole image at full resolution.
Result<RgbImage> Decode(std::span<const uint8_t> bytes, const DecodeOptions& options);

// Decodes a JPEG at the smallest scaling factor among 1/8, 1/4, 1/2 and 1
// (the ones libjpeg-turbo decodes faster than full size) whose upright output
// is still at least min_width x min_height; any other
// format, or a request no factor below 1 satisfies, is decoded at full size.
// The result is smaller than ReadHeader's dimensions by the chosen factor
// (rounded up), so a caller that computed a crop rectangle on the full-size
// image must map it to the scaled one (x * scaled.width / header.width, ...);
// ApplyScaled (server/image/testing/transform_test_paths.h) does that.
// max_pixels applies to the full size the header declares. Decode is the
// full-size case of this function.
Result<RgbImage> DecodeScaled(std::span<const uint8_t> bytes, const DecodeOptions& options,
                              int min_width, int min_height);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_DECODER_H_
