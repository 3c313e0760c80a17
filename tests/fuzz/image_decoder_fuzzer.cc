// Fuzz target: every image decoder behind the allow-list (TurboJPEG, libpng,
// libwebp, the BMP reader), through the same entry points the pipeline uses.
// The pixel limit is lowered so a valid large image costs the fuzzer little
// memory; bombs must be refused from the header either way. Besides
// crashes and sanitizer reports, an inconsistent success aborts: a decoded
// image must have the size its header declares and exactly width * height
// * 3 bytes, and a failure must be DataLoss or ResourceExhausted.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "galley/image/decoder.h"

namespace {

using galley::StatusCode;
using galley::image::RgbImage;

void CheckOutcome(const galley::Result<RgbImage>& image) {
  if (!image.ok()) {
    const StatusCode code = image.status().code();
    if (code != StatusCode::kDataLoss && code != StatusCode::kResourceExhausted) std::abort();
    return;
  }
  if (image->width <= 0 || image->height <= 0 ||
      image->pixels.size() != static_cast<size_t>(image->width) * image->height * 3) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galley::image;
  const std::span<const uint8_t> bytes(data, size);
  const auto header = ReadHeader(bytes);
  DecodeOptions options;
  options.max_pixels = 2048 * 2048;
  const auto full = Decode(bytes, options);
  CheckOutcome(full);
  // Whatever decodes had a readable header giving its size.
  if (full.ok() &&
      (!header.ok() || header->width != full->width || header->height != full->height)) {
    std::abort();
  }
  CheckOutcome(DecodeScaled(bytes, options, 16, 16));
  return 0;
}
