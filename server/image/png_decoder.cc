#include "galley/image/png_decoder.h"

#include <png.h>

#include <algorithm>
#include <array>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

namespace galley::image {
namespace {

constexpr std::array<uint8_t, 8> kSignature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

// The largest ancillary chunk libpng may allocate for. Every chunk galley
// reads (IHDR, PLTE) is far smaller; this bounds what a hostile file can
// make libpng allocate outside the pixel buffer.
constexpr png_alloc_size_t kMaxChunkBytes = 1 << 20;

// libpng reads the file from this cursor.
struct Input {
  std::span<const uint8_t> bytes;
  size_t offset = 0;
};

// libpng's error handler writes its message here before jumping back to
// ReadRows; the buffer lives in DecodePng's frame.
struct ErrorState {
  char message[160] = "corrupt PNG";
};

[[noreturn]] void OnError(png_structp png, png_const_charp message) {
  auto* state = static_cast<ErrorState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}

void OnRead(png_structp png, png_bytep out, size_t length) {
  auto* input = static_cast<Input*>(png_get_io_ptr(png));
  if (input->bytes.size() - input->offset < length) png_error(png, "truncated PNG");
  std::memcpy(out, input->bytes.data() + input->offset, length);
  input->offset += length;
}

// All libpng calls for one image, from its header to its last row, written
// into `pixels` at a stride of width * 3. libpng reports errors by longjmp
// back to the setjmp here, so this frame holds nothing with a destructor and
// nothing it changes after setjmp is read after the jump.
//
// 16-bit gray without alpha is left as two big-endian bytes per pixel at the
// start of each row (*gray16 set), for ClipGray16 to convert as PIL does;
// every other colour type arrives as RGB.
bool ReadRows(png_structp png, png_infop info, Input* input, PngSize size, uint8_t* pixels,
              bool* gray16) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, input, OnRead);
  // The caller bounded width * height; libpng's own default caps each
  // dimension at 10^6, which PIL does not.
  png_set_user_limits(png, static_cast<png_uint_32>(size.width),
                      static_cast<png_uint_32>(size.height));
  png_set_chunk_malloc_max(png, kMaxChunkBytes);
  // Skip every ancillary chunk unread (text, profiles, gamma, tRNS: none of
  // them changes what convert("RGB") returns), so none can fail the decode
  // or cost memory. IHDR, PLTE, IDAT and IEND are always read.
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  static const png_byte kTrns[] = "tRNS";
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, kTrns, 1);

  png_read_info(png, info);
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, nullptr, nullptr, nullptr);
  if (width != static_cast<png_uint_32>(size.width) ||
      height != static_cast<png_uint_32>(size.height)) {
    png_error(png, "IHDR changed between reads");
  }
  // From here on only IDAT (and IEND) remain: PIL does not check their CRC,
  // so a CRC mismatch there is ignored too (zlib's own checksum still
  // guards the compressed data). IHDR and PLTE were checked above.
  png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_DEFAULT);
  const bool clip = color_type == PNG_COLOR_TYPE_GRAY && bit_depth == 16;
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16 && !clip) png_set_strip_16(png);  // keeps the high byte
  png_set_strip_alpha(png);
  if ((color_type & PNG_COLOR_MASK_COLOR) == 0 && !clip) png_set_gray_to_rgb(png);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const size_t stride = size_t{width} * 3;
  if (png_get_rowbytes(png, info) != (clip ? size_t{width} * 2 : stride)) {
    png_error(png, "unexpected row layout after conversion");
  }
  // An interlaced image is read once per pass, each pass filling in its
  // pixels of every row; no per-row pointer table is needed.
  for (int pass = 0; pass < passes; ++pass) {
    for (png_uint_32 y = 0; y < height; ++y) png_read_row(png, pixels + y * stride, nullptr);
  }
  // The image is complete: png_read_end would only read the chunks after
  // the last IDAT, and PIL decodes a file whose IEND is missing.
  *gray16 = clip;
  return true;
}

// Turns rows of big-endian 16-bit gray (at the start of each RGB row) into
// RGB in place, clipping to 255 as PIL's I;16 to RGB conversion does.
// Right to left: each pixel's two input bytes are read before its three
// output bytes, which lie at or after them, are written.
void ClipGray16(RgbImage& image) {
  const size_t stride = static_cast<size_t>(image.width) * 3;
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = image.pixels.data() + static_cast<size_t>(y) * stride;
    for (int x = image.width - 1; x >= 0; --x) {
      const unsigned value = (unsigned{row[2 * x]} << 8) | row[2 * x + 1];
      const uint8_t clipped = static_cast<uint8_t>(std::min(value, 255u));
      row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = clipped;
    }
  }
}

uint32_t ReadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

bool IsPng(std::span<const uint8_t> bytes) {
  return bytes.size() >= kSignature.size() &&
         std::equal(kSignature.begin(), kSignature.end(), bytes.begin());
}

Result<PngSize> ReadPngSize(std::span<const uint8_t> bytes) {
  // Signature, then the IHDR chunk: length, "IHDR", width, height (big-endian).
  if (!IsPng(bytes) || bytes.size() < 24 || std::memcmp(&bytes[12], "IHDR", 4) != 0) {
    return Status::DataLoss("malformed PNG: missing IHDR chunk");
  }
  const uint32_t width = ReadBigEndian32(&bytes[16]);
  const uint32_t height = ReadBigEndian32(&bytes[20]);
  if (width == 0 || height == 0 || width > 0x7FFFFFFFu || height > 0x7FFFFFFFu) {
    return Status::DataLoss("malformed PNG: invalid dimensions");
  }
  return PngSize{static_cast<int>(width), static_cast<int>(height)};
}

Result<RgbImage> DecodePng(std::span<const uint8_t> bytes, PngSize size) {
  RgbImage image;
  image.width = size.width;
  image.height = size.height;
  image.pixels.resize(static_cast<size_t>(size.width) * static_cast<size_t>(size.height) * 3);

  ErrorState errors;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &errors, OnError, OnWarning);
  if (png == nullptr) return Status::Internal("cannot create a libpng decoder");
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return Status::Internal("cannot create a libpng decoder");
  }
  Input input{bytes, 0};
  bool gray16 = false;
  const bool ok = ReadRows(png, info, &input, size, image.pixels.data(), &gray16);
  png_destroy_read_struct(&png, &info, nullptr);
  if (!ok) return Status::DataLoss(std::string("cannot decode PNG: ") + errors.message);
  if (gray16) ClipGray16(image);
  return image;
}

}  // namespace galley::image
