// BMP decoding, written here: the format is simple enough that a reader of
// our own is smaller than any library, and it reads what PIL's BmpImagePlugin
// reads, giving the pixels torchvision's loader gets from convert("RGB").
//
// Accepted: the Windows info headers (40, 52, 56, 108 and 124 bytes, and
// OS/2's 64) and the 12-byte core header; bottom-up and top-down rows;
//   - 1, 4 and 8 bits per pixel through a palette, uncompressed or RLE4/RLE8;
//   - 16 bits as 5-5-5 (the default) or 5-6-5 (bit fields), each field
//     scaled to 8 bits as v * 255 / max, as PIL does;
//   - 24 bits BGR; 32 bits BGRX, or bit fields that put each of R, G and B
//     in a whole byte. Alpha is dropped.
// Refused as DataLoss, with the reason: other depths and compressions (JPEG
// or PNG inside BMP, Huffman, RLE24), bit fields that are not whole bytes
// (other than 5-5-5 / 5-6-5), and truncated headers, palettes or pixel data.
//
// As in PIL: a palette that is the gray ramp 0, 1, 2, ... maps every index to
// its own value (PIL opens such a file as mode "L"); any other palette maps
// indexes past its end to black; pixels an RLE stream never writes (after an
// end-of-line, delta or end-of-bitmap) take index 0.
//
// ReadBmpLayout reads the headers only; DecodeBmp is given its result after
// the caller has checked the pixel count, so no pixel memory is allocated for
// an image over the limit.
//
// Thread-safety: both functions may be called concurrently; they share no
// state.
#ifndef GALLEY_SERVER_IMAGE_BMP_DECODER_H_
#define GALLEY_SERVER_IMAGE_BMP_DECODER_H_

#include <cstdint>
#include <span>

#include "galley/image/decoder.h"
#include "galley/status.h"

namespace galley::image {

// Whether the bytes start with BMP's "BM" signature.
bool IsBmp(std::span<const uint8_t> bytes);

// How a BMP stores its pixels, as read from its headers.
struct BmpLayout {
  enum class Compression { kNone, kRle8, kRle4 };

  int width = 0;   // 1..2^31-1
  int height = 0;  // 1..2^31-1
  bool top_down = false;
  int bits = 0;  // 1, 4, 8, 16, 24 or 32
  Compression compression = Compression::kNone;
  uint64_t pixel_offset = 0;  // where the pixel data starts in the file
  // 16 bits: whether green has 6 bits (5-6-5) rather than 5.
  bool green6 = false;
  // 24 and 32 bits: which byte of a pixel holds red, green and blue.
  int red_byte = 2;
  int green_byte = 1;
  int blue_byte = 0;
  // 1, 4 and 8 bits: the palette's place, its entry size (3 for the core
  // header, else 4) and how many entries it has (at most 256 are read).
  uint64_t palette_offset = 0;
  int palette_entry_bytes = 4;
  uint32_t colors = 0;
};

// Reads and checks the file and info headers (and the bit-field masks).
// DataLoss names what is malformed or unsupported.
Result<BmpLayout> ReadBmpLayout(std::span<const uint8_t> bytes);

// Decodes a whole BMP laid out as `layout` says into RGB.
Result<RgbImage> DecodeBmp(std::span<const uint8_t> bytes, const BmpLayout& layout);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_BMP_DECODER_H_
