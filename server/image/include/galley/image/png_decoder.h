// PNG decoding through libpng, to the 8-bit RGB that torchvision's loader
// (PIL's Image.open(f).convert("RGB")) gives for the same file.
//
// What PIL does, and so what this does: palettes are expanded, 1/2/4-bit
// gray is scaled to 8 bits (0..255), gray is replicated to three channels,
// alpha and tRNS transparency are dropped without compositing, and gamma,
// colour profiles and sBIT are ignored. 16-bit samples keep their high byte,
// except 16-bit gray without alpha, which PIL opens as mode "I;16" and clips
// to 255 when converting (a sample of 1000 gives 255, not 3); galley clips
// too, so both loaders see the same pixels. Ancillary chunks other than tRNS
// are skipped unread, decoding stops after the last image row, and IDAT
// CRCs are not checked, so a file whose IEND is missing or whose IDAT CRC is
// wrong decodes as it does in PIL.
//
// ReadPngHeader reads only the IHDR chunk; DecodePng is given its result
// after the caller has checked the pixel count, so no pixel memory is
// allocated for an image over the limit. Every failure (corrupt, truncated,
// CRC error in IHDR or PLTE, IHDR that libpng rejects) is DataLoss;
// libpng's errors never escape past DecodePng.
//
// Thread-safety: both functions may be called concurrently; they share no
// state.
#ifndef GALLEY_SERVER_IMAGE_PNG_DECODER_H_
#define GALLEY_SERVER_IMAGE_PNG_DECODER_H_

#include <cstdint>
#include <span>

#include "galley/image/decoder.h"
#include "galley/status.h"

namespace galley::image {

// Whether the bytes start with PNG's 8-byte signature.
bool IsPng(std::span<const uint8_t> bytes);

// What a PNG's IHDR chunk declares: both dimensions in 1..2^31-1.
struct PngSize {
  int width = 0;
  int height = 0;
};

// Reads the dimensions from the IHDR chunk, which must directly follow the
// signature. DataLoss when it is missing or declares a zero or out-of-range
// dimension.
Result<PngSize> ReadPngSize(std::span<const uint8_t> bytes);

// Decodes a whole PNG of the given (already checked) size into RGB.
Result<RgbImage> DecodePng(std::span<const uint8_t> bytes, PngSize size);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_PNG_DECODER_H_
