// Packed pixels: RGB pixels stored losslessly in a form that reads back an
// order of magnitude faster than a JPEG decodes. The encoded cache tiers keep
// a max_resolution dataset's shrunk images this way (docs/datasets.md,
// "Training resolution"), so an item is the same pixels whichever tier
// serves it, and a decoded-tier miss costs an unpack instead of a decode of
// the full-size original and its shrink.
//
// The form: each row's pixels as (G, R-G, B-G), each of the three minus the
// same value of the pixel to its left (the row's first pixel minus 0), all
// modulo 256; those residuals, small for natural images, go through Zstandard
// at level 1 (Huffman-coded literals; LZ4, which has no entropy coder, does
// not shrink them). bench/pixel_codec_bench.cc compares the candidates on the
// demo JPEGs; bench/README.md has the figures.
//
// Layout, integers little-endian:
//    0  magic "GLPK"     4  version (1)      5  filter (1: the one above)
//    6  reserved (0, 2 B) 8  width (u32)     12  height (u32)
//   16  header check (u32): the low half of XXH3-64 of bytes 0..15
//   20  one Zstandard frame that declares its content size, exactly
//       width * height * 3 bytes of residuals, and carries their XXH64
//       checksum; nothing after it
// Unpacking checks all of it and refuses anything else as DataLoss, so a
// damaged or foreign value is an error, never wrong pixels or a crash.
//
// Thread-safety: the functions are safe to call concurrently; each thread
// keeps its own Zstandard contexts.
#ifndef GALLEY_SERVER_IMAGE_PIXEL_CODEC_H_
#define GALLEY_SERVER_IMAGE_PIXEL_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "galley/image/decoder.h"
#include "galley/status.h"

namespace galley::image {

inline constexpr size_t kPackedHeaderBytes = 20;

// Packs `width` x `height` interleaved RGB pixels (`pixels` holds exactly
// width * height * 3 bytes). InvalidArgument for other sizes; Internal when
// the compressor fails.
Result<std::vector<uint8_t>> PackPixels(std::span<const uint8_t> pixels, int width, int height);

// The pixels `packed` holds. DataLoss, saying what is wrong, for a value that
// is not packed pixels of this layout or is damaged; ResourceExhausted when
// its width x height exceeds options.max_pixels (checked before any pixel
// memory is allocated).
Result<RgbImage> UnpackPixels(std::span<const uint8_t> packed, const DecodeOptions& options);

// The filter alone, for benchmarks that try other compressors on it:
// writes the residuals of `width` x `height` RGB `pixels` into `out` (as many
// bytes), and turns residuals back into the pixels in place.
void PixelResiduals(const uint8_t* pixels, int width, int height, uint8_t* out);
void RestorePixelsInPlace(uint8_t* residuals, int width, int height);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_PIXEL_CODEC_H_
