#include "galley/image/decoder.h"

#include <turbojpeg.h>
#include <webp/decode.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "galley/image/bmp_decoder.h"
#include "galley/image/orientation.h"
#include "galley/image/png_decoder.h"

namespace galley::image {
namespace {

bool IsJpeg(std::span<const uint8_t> b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}
bool IsWebp(std::span<const uint8_t> b) {
  return b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 &&
         std::memcmp(b.data() + 8, "WEBP", 4) == 0;
}

// One TurboJPEG decompressor per thread: handles are not thread-safe, and
// creating one per image would cost more than decoding a thumbnail.
class ThreadDecompressor {
 public:
  ThreadDecompressor() : handle_(tjInitDecompress()) {}
  ~ThreadDecompressor() {
    if (handle_ != nullptr) tjDestroy(handle_);
  }
  ThreadDecompressor(const ThreadDecompressor&) = delete;
  ThreadDecompressor& operator=(const ThreadDecompressor&) = delete;

  tjhandle get() const { return handle_; }
  // A handle that failed on a stream can keep that stream's state (the next
  // header then reads as 0x0), so a failure gets a fresh one.
  void Renew() {
    if (handle_ != nullptr) tjDestroy(handle_);
    handle_ = tjInitDecompress();
  }

 private:
  tjhandle handle_;
};

ThreadDecompressor& ThisThreadDecompressor() {
  thread_local ThreadDecompressor decompressor;
  return decompressor;
}
tjhandle Decompressor() { return ThisThreadDecompressor().get(); }

// Whether the JPEG carries Adobe's APP14 marker, which means its CMYK samples
// are stored inverted (Adobe Photoshop's convention, followed by PIL).
// Calls visit(marker, payload) for each marker segment before the first
// scan, in file order, until visit returns true; returns whether one did.
template <typename Visit>
bool FindJpegSegment(std::span<const uint8_t> jpeg, Visit visit) {
  size_t pos = 2;
  while (pos + 4 <= jpeg.size()) {
    if (jpeg[pos] != 0xFF) return false;
    const uint8_t marker = jpeg[pos + 1];
    if (marker == 0xFF) {
      ++pos;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return false;
    const size_t length = (size_t{jpeg[pos + 2]} << 8) | jpeg[pos + 3];
    if (length < 2 || pos + 2 + length > jpeg.size()) return false;
    if (visit(marker, jpeg.subspan(pos + 4, length - 2))) return true;
    pos += 2 + length;
  }
  return false;
}

bool HasAdobeMarker(std::span<const uint8_t> jpeg) {
  return FindJpegSegment(jpeg, [](uint8_t marker, std::span<const uint8_t> payload) {
    return marker == 0xEE && payload.size() >= 5 && std::memcmp(payload.data(), "Adobe", 5) == 0;
  });
}

// (a * b) / 255 rounded, exactly as PIL's MULDIV255.
inline uint8_t MulDiv255(int a, int b) {
  const int t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

// CMYK to RGB with PIL's formula (R = (255 - C) * (255 - K) / 255, rounded
// the same way), so CMYK JPEGs match torchvision's PIL loader.
void CmykToRgb(const std::vector<uint8_t>& cmyk, bool inverted, std::vector<uint8_t>& rgb) {
  const size_t pixels = cmyk.size() / 4;
  rgb.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    const uint8_t* in = &cmyk[i * 4];
    const int nk = inverted ? in[3] : 255 - in[3];
    for (int c = 0; c < 3; ++c) {
      const int ink = inverted ? 255 - in[c] : in[c];
      rgb[i * 3 + c] = static_cast<uint8_t>(nk - MulDiv255(ink, nk));
    }
  }
}

Status CheckPixels(uint64_t width, uint64_t height, const DecodeOptions& options) {
  if (width == 0 || height == 0) return Status::DataLoss("image declares a zero dimension");
  if (width * height > options.max_pixels) {
    return Status::ResourceExhausted("image of " + std::to_string(width) + "x" +
                                     std::to_string(height) + " pixels exceeds max_pixels " +
                                     std::to_string(options.max_pixels));
  }
  return Status::Ok();
}

struct JpegHeader {
  int width = 0;  // as stored, before orientation
  int height = 0;
  int colorspace = 0;
};

// The frame header (SOFn) of a JPEG: dimensions and component count.
// TurboJPEG 2.1's header reader refuses chroma sampling it has no name for
// (4x2, 1x4, 3x1, ...) although its decoder, and PIL, read such files; this
// reads what the decoder needs instead.
std::optional<JpegHeader> ReadJpegFrame(std::span<const uint8_t> bytes) {
  JpegHeader header;
  const bool found =
      FindJpegSegment(bytes, [&header](uint8_t marker, std::span<const uint8_t> payload) {
        // SOF0..SOF15 less DHT (C4), JPG (C8) and DAC (CC).
        if (marker < 0xC0 || marker > 0xCF || marker == 0xC4 || marker == 0xC8 || marker == 0xCC ||
            payload.size() < 6) {
          return false;
        }
        header.height = (payload[1] << 8) | payload[2];
        header.width = (payload[3] << 8) | payload[4];
        const int components = payload[5];
        header.colorspace = components == 1   ? TJCS_GRAY
                            : components == 3 ? TJCS_YCbCr
                            : components == 4 ? TJCS_CMYK
                                              : -1;
        return true;
      });
  if (!found || header.width == 0 || header.height == 0 || header.colorspace < 0) {
    return std::nullopt;
  }
  return header;
}

Result<JpegHeader> ReadJpegHeader(std::span<const uint8_t> bytes) {
  tjhandle handle = Decompressor();
  if (handle == nullptr) return Status::Internal("cannot create a TurboJPEG decompressor");
  JpegHeader header;
  int subsampling = 0;
  if (tjDecompressHeader3(handle, bytes.data(), static_cast<unsigned long>(bytes.size()),
                          &header.width, &header.height, &subsampling, &header.colorspace) != 0) {
    const std::string reason = tjGetErrorStr2(handle);
    ThisThreadDecompressor().Renew();
    if (auto frame = ReadJpegFrame(bytes)) return *frame;
    return Status::DataLoss("malformed JPEG header: " + reason);
  }
  return header;
}

// Decodes a WebP whose header has passed the pixel check: straight into
// the RGB buffer (alpha, if any, dropped as PIL's convert("RGB") does).
Result<RgbImage> DecodeWebp(std::span<const uint8_t> bytes, const ImageHeader& header) {
  RgbImage image;
  image.width = header.width;
  image.height = header.height;
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);
  if (WebPDecodeRGBInto(bytes.data(), bytes.size(), image.pixels.data(), image.pixels.size(),
                        image.width * 3) == nullptr) {
    return Status::DataLoss("cannot decode WebP (corrupt or truncated)");
  }
  return image;
}

// The scaling factor to decode with: the smallest one whose output still
// covers min_width x min_height (compared in upright orientation).
tjscalingfactor ChooseScale(const JpegHeader& header, int orientation, int min_width,
                            int min_height) {
  tjscalingfactor best{1, 1};
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  if (factors == nullptr) return best;
  const bool swap = OrientationSwapsAxes(orientation);
  const int need_stored_width = swap ? min_height : min_width;
  const int need_stored_height = swap ? min_width : min_height;
  for (int i = 0; i < count; ++i) {
    const tjscalingfactor f = factors[i];
    // Only 1/2, 1/4 and 1/8 have fast reduced IDCTs in libjpeg-turbo; the
    // other factors measured slower than a full-size decode.
    if (f.num != 1 || (f.denom != 2 && f.denom != 4 && f.denom != 8)) continue;
    if (f.num * best.denom >= best.num * f.denom) continue;  // not smaller than best
    if (TJSCALED(header.width, f) >= need_stored_width &&
        TJSCALED(header.height, f) >= need_stored_height) {
      best = f;
    }
  }
  return best;
}

Result<RgbImage> DecodeJpeg(std::span<const uint8_t> bytes, const DecodeOptions& options,
                            int min_width, int min_height) {
  GALLEY_ASSIGN_OR_RETURN(const JpegHeader header, ReadJpegHeader(bytes));
  GALLEY_RETURN_IF_ERROR(CheckPixels(static_cast<uint64_t>(header.width),
                                     static_cast<uint64_t>(header.height), options));
  const int orientation = ReadJpegOrientation(bytes);
  const tjscalingfactor scale = ChooseScale(header, orientation, min_width, min_height);
  const int width = TJSCALED(header.width, scale);
  const int height = TJSCALED(header.height, scale);
  const bool cmyk = header.colorspace == TJCS_CMYK || header.colorspace == TJCS_YCCK;
  const int pixel_format = cmyk ? TJPF_CMYK : TJPF_RGB;
  const int pixel_size = tjPixelSize[pixel_format];

  tjhandle handle = Decompressor();
  std::vector<uint8_t> decoded(static_cast<size_t>(width) * height * pixel_size);
  // STOPONWARNING: libjpeg reports a truncated or corrupt stream as a warning
  // and fills the rest with grey; galley never serves such a partial image.
  if (tjDecompress2(handle, bytes.data(), static_cast<unsigned long>(bytes.size()), decoded.data(),
                    width, width * pixel_size, height, pixel_format, TJFLAG_STOPONWARNING) != 0) {
    const std::string reason = tjGetErrorStr2(handle);
    const bool warning = tjGetErrorCode(handle) == TJERR_WARNING;
    ThisThreadDecompressor().Renew();
    return Status::DataLoss((warning ? "corrupt or truncated JPEG: " : "undecodable JPEG: ") +
                            reason);
  }

  RgbImage image;
  image.width = width;
  image.height = height;
  if (cmyk) {
    CmykToRgb(decoded, HasAdobeMarker(bytes), image.pixels);
  } else {
    image.pixels = std::move(decoded);
  }
  ApplyOrientation(orientation, image);
  return image;
}

// Reads PNG's IHDR, WebP's frame header or BMP's headers, so oversized
// images are refused before anything allocates for them. Returns kOther
// with width = height = 0 for any other format.
Result<ImageHeader> ReadNonJpegHeader(std::span<const uint8_t> bytes) {
  ImageHeader header;
  if (IsPng(bytes)) {
    GALLEY_ASSIGN_OR_RETURN(const PngSize size, ReadPngSize(bytes));
    header.format = ImageFormat::kPng;
    header.width = size.width;
    header.height = size.height;
  } else if (IsWebp(bytes)) {
    header.format = ImageFormat::kWebp;
    int width = 0, height = 0;
    // Reads only the VP8/VP8L/VP8X header: no pixel memory.
    if (!WebPGetInfo(bytes.data(), bytes.size(), &width, &height) || width <= 0 || height <= 0) {
      return Status::DataLoss("malformed WebP header");
    }
    header.width = width;
    header.height = height;
  } else if (IsBmp(bytes)) {
    GALLEY_ASSIGN_OR_RETURN(const BmpLayout layout, ReadBmpLayout(bytes));
    header.format = ImageFormat::kBmp;
    header.width = layout.width;
    header.height = layout.height;
  }
  return header;
}

}  // namespace

Result<ImageHeader> ReadHeader(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return Status::DataLoss("empty file");
  if (!IsJpeg(bytes)) return ReadNonJpegHeader(bytes);
  GALLEY_ASSIGN_OR_RETURN(const JpegHeader jpeg, ReadJpegHeader(bytes));
  ImageHeader header;
  header.format = ImageFormat::kJpeg;
  header.orientation = ReadJpegOrientation(bytes);
  const bool swap = OrientationSwapsAxes(header.orientation);
  header.width = swap ? jpeg.height : jpeg.width;
  header.height = swap ? jpeg.width : jpeg.height;
  return header;
}

Result<RgbImage> DecodeScaled(std::span<const uint8_t> bytes, const DecodeOptions& options,
                              int min_width, int min_height) {
  if (bytes.empty()) return Status::DataLoss("empty file");
  if (IsJpeg(bytes)) return DecodeJpeg(bytes, options, min_width, min_height);
  GALLEY_ASSIGN_OR_RETURN(const ImageHeader header, ReadNonJpegHeader(bytes));
  if (header.format == ImageFormat::kOther) {
    return Status::DataLoss(
        "unsupported image format (galley decodes JPEG, PNG, BMP and WebP); convert the file");
  }
  GALLEY_RETURN_IF_ERROR(CheckPixels(static_cast<uint64_t>(header.width),
                                     static_cast<uint64_t>(header.height), options));
  switch (header.format) {
    case ImageFormat::kPng:
      return DecodePng(bytes, PngSize{header.width, header.height});
    case ImageFormat::kWebp:
      return DecodeWebp(bytes, header);
    default: {
      GALLEY_ASSIGN_OR_RETURN(const BmpLayout layout, ReadBmpLayout(bytes));
      return DecodeBmp(bytes, layout);
    }
  }
}

Result<RgbImage> Decode(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  // A minimum larger than any JPEG dimension forces scale 1.
  return DecodeScaled(bytes, options, 1 << 30, 1 << 30);
}

}  // namespace galley::image
