#include "galley/image/bmp_decoder.h"

#include <algorithm>
#include <array>
#include <string>

namespace galley::image {
namespace {

constexpr size_t kFileHeaderBytes = 14;

// BITMAPINFOHEADER's biCompression values galley reads.
constexpr uint32_t kBiRgb = 0;
constexpr uint32_t kBiRle8 = 1;
constexpr uint32_t kBiRle4 = 2;
constexpr uint32_t kBiBitfields = 3;

uint32_t Le32(std::span<const uint8_t> b, size_t at) {
  return (uint32_t{b[at + 3]} << 24) | (uint32_t{b[at + 2]} << 16) | (uint32_t{b[at + 1]} << 8) |
         b[at];
}
uint16_t Le16(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint16_t>(b[at] | (b[at + 1] << 8));
}

// The byte (0..3) a 32-bit mask selects whole, or -1.
int WholeByte(uint32_t mask) {
  for (int i = 0; i < 4; ++i) {
    if (mask == 0xFFu << (8 * i)) return i;
  }
  return -1;
}

Status Unsupported(const std::string& what) {
  return Status::DataLoss("unsupported BMP: " + what + "; convert the file to PNG");
}

// Reads the bit-field masks of a 16-, 24- or 32-bit image into `layout`.
Status ReadMasks(uint32_t red, uint32_t green, uint32_t blue, uint32_t alpha, BmpLayout& layout) {
  if (layout.bits == 16) {
    if (red == 0xF800 && green == 0x7E0 && blue == 0x1F) {
      layout.green6 = true;
      return Status::Ok();
    }
    if (red == 0x7C00 && green == 0x3E0 && blue == 0x1F) return Status::Ok();
    return Unsupported("16-bit bit fields other than 5-5-5 and 5-6-5");
  }
  if (layout.bits == 24) {
    if (red == 0xFF0000 && green == 0xFF00 && blue == 0xFF) return Status::Ok();
    return Unsupported("24-bit bit fields other than BGR");
  }
  if (layout.bits == 32) {
    if (red == 0 && green == 0 && blue == 0 && alpha == 0) return Status::Ok();  // PIL: BGRA
    const int r = WholeByte(red), g = WholeByte(green), b = WholeByte(blue);
    if (r < 0 || g < 0 || b < 0 || r == g || g == b || r == b) {
      return Unsupported("32-bit bit fields that are not whole bytes");
    }
    layout.red_byte = r;
    layout.green_byte = g;
    layout.blue_byte = b;
    return Status::Ok();
  }
  return Unsupported("bit fields at " + std::to_string(layout.bits) + " bits per pixel");
}

// The 256 colours indexes map to (see the header: gray ramps map every
// index to itself, other palettes map missing entries to black).
std::array<uint8_t, 256 * 3> PaletteTable(std::span<const uint8_t> bytes, const BmpLayout& layout) {
  std::array<uint8_t, 256 * 3> table{};
  const uint32_t entries = std::min<uint32_t>(layout.colors, 256);
  bool ramp = layout.colors != 2;  // PIL treats a 2-entry palette as black and white instead
  for (uint32_t i = 0; i < entries; ++i) {
    const uint8_t* entry = &bytes[layout.palette_offset + i * layout.palette_entry_bytes];
    table[i * 3] = entry[2];  // stored blue, green, red
    table[i * 3 + 1] = entry[1];
    table[i * 3 + 2] = entry[0];
    ramp = ramp && entry[0] == i && entry[1] == i && entry[2] == i;
  }
  if (ramp) {
    for (int i = 0; i < 256; ++i) table[i * 3] = table[i * 3 + 1] = table[i * 3 + 2] = i;
  }
  return table;
}

// The 8-bit value of a 5- or 6-bit field, as PIL's BGR;15 and BGR;16
// unpackers compute it.
std::array<uint8_t, 64> FieldTable(int max) {
  std::array<uint8_t, 64> table{};
  for (int v = 0; v <= max; ++v) table[v] = static_cast<uint8_t>(v * 255 / max);
  return table;
}

// Converts one stored row of an uncompressed image to RGB.
void ConvertRow(const uint8_t* in, const BmpLayout& layout, const std::array<uint8_t, 768>& palette,
                uint8_t* out) {
  const int width = layout.width;
  switch (layout.bits) {
    case 1:
    case 4:
    case 8: {
      const int per_byte = 8 / layout.bits;
      const int mask = (1 << layout.bits) - 1;
      for (int x = 0; x < width; ++x) {
        const int shift = 8 - layout.bits * (x % per_byte + 1);
        const int index = (in[x / per_byte] >> shift) & mask;
        std::copy_n(&palette[index * 3], 3, out + x * 3);
      }
      break;
    }
    case 16: {
      static const std::array<uint8_t, 64> k5 = FieldTable(31);
      static const std::array<uint8_t, 64> k6 = FieldTable(63);
      for (int x = 0; x < width; ++x) {
        const unsigned v = in[2 * x] | (in[2 * x + 1] << 8);
        if (layout.green6) {
          out[x * 3] = k5[(v >> 11) & 31];
          out[x * 3 + 1] = k6[(v >> 5) & 63];
        } else {
          out[x * 3] = k5[(v >> 10) & 31];
          out[x * 3 + 1] = k5[(v >> 5) & 31];
        }
        out[x * 3 + 2] = k5[v & 31];
      }
      break;
    }
    default: {  // 24 or 32
      const int step = layout.bits / 8;
      for (int x = 0; x < width; ++x) {
        const uint8_t* pixel = in + x * step;
        out[x * 3] = pixel[layout.red_byte];
        out[x * 3 + 1] = pixel[layout.green_byte];
        out[x * 3 + 2] = pixel[layout.blue_byte];
      }
      break;
    }
  }
}

// Where stored row `row` (0 = first in the file) goes in the upright image.
size_t OutputRow(const BmpLayout& layout, uint64_t row) {
  return layout.top_down ? row : layout.height - 1 - row;
}

// Expands an RLE4/RLE8 stream into palette indexes, one byte each, written
// at the start of each output row; pixels it never reaches keep index 0.
// Follows PIL's reader: the stream fills the image as one run of
// width * height pixels in stored order; an encoded run stops at the end of
// its row, an absolute run does not; end-of-line moves to the next row
// start; a delta skips right + up * width pixels.
Status ExpandRle(std::span<const uint8_t> bytes, const BmpLayout& layout, RgbImage& image) {
  const bool rle4 = layout.compression == BmpLayout::Compression::kRle4;
  const uint64_t width = static_cast<uint64_t>(layout.width);
  const uint64_t total = width * static_cast<uint64_t>(layout.height);
  const size_t stride = static_cast<size_t>(width) * 3;
  uint64_t written = 0;  // pixels so far, in stored order
  uint64_t x = 0;        // column as PIL counts it
  size_t at = layout.pixel_offset;
  auto put = [&](uint8_t index) {
    image.pixels[OutputRow(layout, written / width) * stride + written % width] = index;
    ++written;
  };
  auto truncated = [] { return Status::DataLoss("truncated BMP: RLE data ends early"); };
  while (written < total) {
    if (at + 2 > bytes.size()) return truncated();
    const uint8_t count = bytes[at];
    const uint8_t value = bytes[at + 1];
    at += 2;
    if (count > 0) {  // encoded run
      const uint64_t n = x + count > width ? (x < width ? width - x : 0) : count;
      for (uint64_t i = 0; i < n && written < total; ++i) {
        put(rle4 ? (i % 2 == 0 ? value >> 4 : value & 0x0F) : value);
      }
      x += n;
    } else if (value == 0) {  // end of line
      if (written % width != 0) written += width - written % width;
      x = 0;
    } else if (value == 1) {  // end of bitmap
      break;
    } else if (value == 2) {  // delta
      if (at + 2 > bytes.size()) return truncated();
      written = std::min(total, written + bytes[at] + bytes[at + 1] * width);
      at += 2;
      x = written % width;
    } else {  // absolute run of `value` pixels, padded to a 16-bit boundary
      const uint64_t n = std::min<uint64_t>(value, total - written);
      const size_t run_bytes = rle4 ? (n + 1) / 2 : n;
      if (at + run_bytes > bytes.size()) return truncated();
      for (uint64_t i = 0; i < n; ++i) {
        const uint8_t packed = bytes[at + (rle4 ? i / 2 : i)];
        put(rle4 ? (i % 2 == 0 ? packed >> 4 : packed & 0x0F) : packed);
      }
      at += run_bytes;
      if (at % 2 != 0) ++at;  // PIL aligns the file position, not the run
      x += value;
    }
  }
  return Status::Ok();
}

}  // namespace

bool IsBmp(std::span<const uint8_t> bytes) {
  return bytes.size() >= 2 && bytes[0] == 'B' && bytes[1] == 'M';
}

Result<BmpLayout> ReadBmpLayout(std::span<const uint8_t> bytes) {
  if (!IsBmp(bytes) || bytes.size() < kFileHeaderBytes + 4) {
    return Status::DataLoss("malformed BMP: header too short");
  }
  const uint32_t header_bytes = Le32(bytes, 14);
  const bool core = header_bytes == 12;
  if (!core && header_bytes != 40 && header_bytes != 52 && header_bytes != 56 &&
      header_bytes != 64 && header_bytes != 108 && header_bytes != 124) {
    return Unsupported("info header of " + std::to_string(header_bytes) + " bytes");
  }
  if (bytes.size() < kFileHeaderBytes + header_bytes) {
    return Status::DataLoss("malformed BMP: header too short");
  }
  BmpLayout layout;
  int64_t width = 0, height = 0;
  uint32_t compression = kBiRgb;
  uint32_t colors = 0;
  if (core) {  // BITMAPCOREHEADER: 16-bit dimensions, 3-byte palette entries
    width = Le16(bytes, 18);
    height = Le16(bytes, 20);
    layout.bits = Le16(bytes, 24);
    layout.palette_entry_bytes = 3;
  } else {  // signed 32-bit dimensions; a negative height means top-down rows
    width = static_cast<int32_t>(Le32(bytes, 18));
    height = static_cast<int32_t>(Le32(bytes, 22));
    layout.bits = Le16(bytes, 28);
    compression = Le32(bytes, 30);
    colors = Le32(bytes, 46);
  }
  if (height < 0) {
    layout.top_down = true;
    height = -height;
  }
  if (width <= 0 || height <= 0 || width > 0x7FFFFFFF || height > 0x7FFFFFFF) {
    return Status::DataLoss("malformed BMP: invalid dimensions");
  }
  layout.width = static_cast<int>(width);
  layout.height = static_cast<int>(height);
  const int bits = layout.bits;
  if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32) {
    return Unsupported(std::to_string(bits) + " bits per pixel");
  }

  // The palette (or a 40-byte header's masks) follows the info header.
  uint64_t after_header = kFileHeaderBytes + header_bytes;
  if (compression == kBiRle8 || compression == kBiRle4) {
    const int wanted = compression == kBiRle8 ? 8 : 4;
    if (bits != wanted) {
      return Status::DataLoss("malformed BMP: RLE" + std::to_string(wanted) + " at " +
                              std::to_string(bits) + " bits per pixel");
    }
    layout.compression =
        compression == kBiRle8 ? BmpLayout::Compression::kRle8 : BmpLayout::Compression::kRle4;
  } else if (compression == kBiBitfields) {
    uint32_t masks[4] = {0, 0, 0, 0};
    if (header_bytes >= 52) {  // the masks are part of the header
      for (int i = 0; i < (header_bytes >= 56 ? 4 : 3); ++i) masks[i] = Le32(bytes, 54 + 4 * i);
    } else {
      if (bytes.size() < after_header + 12) return Status::DataLoss("truncated BMP: masks");
      for (int i = 0; i < 3; ++i) masks[i] = Le32(bytes, after_header + 4 * i);
      after_header += 12;
    }
    GALLEY_RETURN_IF_ERROR(ReadMasks(masks[0], masks[1], masks[2], masks[3], layout));
  } else if (compression != kBiRgb) {
    return Unsupported("compression " + std::to_string(compression));
  }

  uint64_t palette_end = after_header;
  if (bits <= 8) {
    layout.colors = colors != 0 ? colors : 1u << bits;
    if (layout.colors > 65536) return Status::DataLoss("malformed BMP: palette too large");
    layout.palette_offset = after_header;
    const uint64_t read = std::min<uint32_t>(layout.colors, 256);
    palette_end = after_header + read * layout.palette_entry_bytes;
    if (bytes.size() < palette_end) return Status::DataLoss("truncated BMP: palette");
  }
  layout.pixel_offset = Le32(bytes, 10);
  // As PIL: an offset of 0 means "right after the palette", and an offset
  // that points at the palette (a known writer bug) is moved past it.
  if (layout.pixel_offset == 0) {
    layout.pixel_offset = bits <= 8
                              ? after_header + uint64_t{layout.colors} * layout.palette_entry_bytes
                              : palette_end;
  } else if (bits <= 8 && layout.pixel_offset == kFileHeaderBytes + header_bytes) {
    layout.pixel_offset += uint64_t{layout.colors} * layout.palette_entry_bytes;
  }
  if (layout.pixel_offset > bytes.size()) return Status::DataLoss("truncated BMP: no pixel data");
  return layout;
}

Result<RgbImage> DecodeBmp(std::span<const uint8_t> bytes, const BmpLayout& layout) {
  const uint64_t width = static_cast<uint64_t>(layout.width);
  const uint64_t height = static_cast<uint64_t>(layout.height);
  const uint64_t row_bytes = ((width * layout.bits + 31) / 32) * 4;  // rows pad to 4 bytes
  if (layout.pixel_offset > bytes.size()) return Status::DataLoss("truncated BMP: no pixel data");
  const uint64_t available = bytes.size() - layout.pixel_offset;
  if (layout.compression == BmpLayout::Compression::kNone && available / row_bytes < height) {
    return Status::DataLoss("truncated BMP: pixel data ends early");
  }
  std::array<uint8_t, 768> palette{};
  if (layout.bits <= 8) palette = PaletteTable(bytes, layout);

  RgbImage image;
  image.width = layout.width;
  image.height = layout.height;
  const size_t stride = static_cast<size_t>(width) * 3;
  image.pixels.resize(stride * height);
  if (layout.compression == BmpLayout::Compression::kNone) {
    for (uint64_t row = 0; row < height; ++row) {
      ConvertRow(&bytes[layout.pixel_offset + row * row_bytes], layout, palette,
                 &image.pixels[OutputRow(layout, row) * stride]);
    }
    return image;
  }
  GALLEY_RETURN_IF_ERROR(ExpandRle(bytes, layout, image));
  // Each row holds one index byte per pixel at its start: expand right to
  // left, so every index is read before its three output bytes cover it.
  for (uint64_t y = 0; y < height; ++y) {
    uint8_t* row = &image.pixels[y * stride];
    for (int64_t x = layout.width - 1; x >= 0; --x) {
      const uint8_t index = row[x];
      std::copy_n(&palette[index * 3], 3, row + x * 3);
    }
  }
  return image;
}

}  // namespace galley::image
