#include "galley/image/pixel_codec.h"

#include <xxhash.h>
#include <zstd.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>

namespace galley::image {
namespace {

constexpr uint8_t kMagic[4] = {'G', 'L', 'P', 'K'};
constexpr uint8_t kVersion = 1;
constexpr uint8_t kFilterGreenLeftDelta = 1;
// Level 1: on the demo JPEGs shrunk to 256 px, level 3 packed no smaller and
// took four times as long (bench/README.md, "Packed pixels").
constexpr int kZstdLevel = 1;

struct CompressContextDeleter {
  void operator()(ZSTD_CCtx* context) const { ZSTD_freeCCtx(context); }
};
struct DecompressContextDeleter {
  void operator()(ZSTD_DCtx* context) const { ZSTD_freeDCtx(context); }
};

// One context of each kind per thread: making one costs more than packing a
// small image, and a context is not safe to share.
ZSTD_CCtx* CompressContext() {
  thread_local std::unique_ptr<ZSTD_CCtx, CompressContextDeleter> context(ZSTD_createCCtx());
  return context.get();
}
ZSTD_DCtx* DecompressContext() {
  thread_local std::unique_ptr<ZSTD_DCtx, DecompressContextDeleter> context(ZSTD_createDCtx());
  return context.get();
}

void PutU32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
uint32_t GetU32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{in[i]} << (8 * i);
  return value;
}

// The frame's checksum covers the residuals only; this covers the fields
// that say how to read them, so that no damage can pass as another shape.
uint32_t HeaderCheck(const uint8_t* header) {
  return static_cast<uint32_t>(XXH3_64bits(header, 16));
}

Status Damaged(const std::string& why) {
  return Status::DataLoss("packed pixels are damaged: " + why);
}

}  // namespace

// (G, R-G, B-G) of each pixel minus those of its left neighbour: residuals
// near 0 wherever the image is smooth, which the entropy coder then packs.
void PixelResiduals(const uint8_t* pixels, int width, int height, uint8_t* out) {
  const size_t stride = size_t(width) * 3;
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = pixels + y * stride;
    uint8_t* residual = out + y * stride;
    uint8_t left_g = 0, left_rg = 0, left_bg = 0;
    for (int x = 0; x < width; ++x) {
      const uint8_t g = row[3 * x + 1];
      const auto rg = static_cast<uint8_t>(row[3 * x] - g);
      const auto bg = static_cast<uint8_t>(row[3 * x + 2] - g);
      residual[3 * x] = static_cast<uint8_t>(g - left_g);
      residual[3 * x + 1] = static_cast<uint8_t>(rg - left_rg);
      residual[3 * x + 2] = static_cast<uint8_t>(bg - left_bg);
      left_g = g;
      left_rg = rg;
      left_bg = bg;
    }
  }
}

// The inverse: running sums along each row, then R and B from their
// differences to G.
void RestorePixelsInPlace(uint8_t* data, int width, int height) {
  const size_t stride = size_t(width) * 3;
  for (int y = 0; y < height; ++y) {
    uint8_t* row = data + y * stride;
    uint8_t g = 0, rg = 0, bg = 0;
    for (int x = 0; x < width; ++x) {
      g = static_cast<uint8_t>(g + row[3 * x]);
      rg = static_cast<uint8_t>(rg + row[3 * x + 1]);
      bg = static_cast<uint8_t>(bg + row[3 * x + 2]);
      row[3 * x] = static_cast<uint8_t>(rg + g);
      row[3 * x + 1] = g;
      row[3 * x + 2] = static_cast<uint8_t>(bg + g);
    }
  }
}

Result<std::vector<uint8_t>> PackPixels(std::span<const uint8_t> pixels, int width, int height) {
  if (width <= 0 || height <= 0 || pixels.size() != size_t(width) * size_t(height) * 3) {
    return Status::InvalidArgument("the pixels are not width x height RGB");
  }
  ZSTD_CCtx* context = CompressContext();
  if (context == nullptr) return Status::Internal("cannot make a Zstandard context");
  std::vector<uint8_t> residuals(pixels.size());
  const size_t bound = ZSTD_compressBound(pixels.size());
  std::vector<uint8_t> frame(bound);
  PixelResiduals(pixels.data(), width, height, residuals.data());
  ZSTD_CCtx_reset(context, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 1);
  const size_t written =
      ZSTD_compress2(context, frame.data(), bound, residuals.data(), residuals.size());
  if (ZSTD_isError(written)) {
    return Status::Internal(std::string("Zstandard could not pack the pixels: ") +
                            ZSTD_getErrorName(written));
  }

  // Exactly the packed size: a tier charges a value's capacity.
  std::vector<uint8_t> packed(kPackedHeaderBytes + written);
  std::memcpy(packed.data(), kMagic, sizeof(kMagic));
  packed[4] = kVersion;
  packed[5] = kFilterGreenLeftDelta;
  packed[6] = packed[7] = 0;
  PutU32(packed.data() + 8, static_cast<uint32_t>(width));
  PutU32(packed.data() + 12, static_cast<uint32_t>(height));
  PutU32(packed.data() + 16, HeaderCheck(packed.data()));
  std::memcpy(packed.data() + kPackedHeaderBytes, frame.data(), written);
  return packed;
}

Result<RgbImage> UnpackPixels(std::span<const uint8_t> packed, const DecodeOptions& options) {
  if (packed.size() < kPackedHeaderBytes) return Damaged("shorter than its header");
  if (std::memcmp(packed.data(), kMagic, sizeof(kMagic)) != 0) return Damaged("no GLPK magic");
  if (packed[4] != kVersion) return Damaged("layout version " + std::to_string(packed[4]));
  if (packed[5] != kFilterGreenLeftDelta) return Damaged("filter " + std::to_string(packed[5]));
  if (packed[6] != 0 || packed[7] != 0) return Damaged("reserved bytes set");
  if (GetU32(packed.data() + 16) != HeaderCheck(packed.data())) {
    return Damaged("its header's checksum does not match");
  }
  const uint32_t width = GetU32(packed.data() + 8), height = GetU32(packed.data() + 12);
  if (width == 0 || height == 0 || width > INT_MAX || height > INT_MAX) {
    return Damaged("dimensions " + std::to_string(width) + "x" + std::to_string(height));
  }
  const uint64_t pixel_count = uint64_t{width} * height;
  if (pixel_count > options.max_pixels) {
    return Status::ResourceExhausted("packed image of " + std::to_string(width) + "x" +
                                     std::to_string(height) + " pixels exceeds the limit of " +
                                     std::to_string(options.max_pixels));
  }
  const uint64_t size = pixel_count * 3;
  const std::span<const uint8_t> frame = packed.subspan(kPackedHeaderBytes);
  if (ZSTD_getFrameContentSize(frame.data(), frame.size()) != size) {
    return Damaged("the frame does not hold width x height x 3 bytes");
  }
  // RFC 8878: the byte after the frame's magic number is its header
  // descriptor, whose bit 2 says a checksum ends the frame.
  if ((frame[4] & 0x04) == 0) return Damaged("the frame carries no checksum");
  if (ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size()) {
    return Damaged("the frame is cut short or followed by other bytes");
  }
  ZSTD_DCtx* context = DecompressContext();
  if (context == nullptr) return Status::Internal("cannot make a Zstandard context");
  RgbImage image;
  image.width = static_cast<int>(width);
  image.height = static_cast<int>(height);
  image.pixels.resize(size);
  const size_t read =
      ZSTD_decompressDCtx(context, image.pixels.data(), size, frame.data(), frame.size());
  if (ZSTD_isError(read)) return Damaged(ZSTD_getErrorName(read));
  if (read != size) return Damaged("the frame holds fewer bytes than it declares");
  RestorePixelsInPlace(image.pixels.data(), image.width, image.height);
  return image;
}

}  // namespace galley::image
