#include "server/image/decoder.h"

#include <turbojpeg.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "server/image/orientation.h"

namespace galley::image {
namespace {

constexpr std::array<uint8_t, 8> kPngSignature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

bool IsJpeg(std::span<const uint8_t> b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}
bool IsPng(std::span<const uint8_t> b) {
  return b.size() >= kPngSignature.size() &&
         std::equal(kPngSignature.begin(), kPngSignature.end(), b.begin());
}
bool IsBmp(std::span<const uint8_t> b) { return b.size() >= 2 && b[0] == 'B' && b[1] == 'M'; }

uint32_t ReadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint32_t ReadLittleEndian32(const uint8_t* p) {
  return (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
}
uint16_t ReadLittleEndian16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

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
bool HasAdobeMarker(std::span<const uint8_t> jpeg) {
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
    if (marker == 0xEE && length >= 7 && std::memcmp(&jpeg[pos + 4], "Adobe", 5) == 0) return true;
    pos += 2 + length;
  }
  return false;
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

Result<JpegHeader> ReadJpegHeader(std::span<const uint8_t> bytes) {
  tjhandle handle = Decompressor();
  if (handle == nullptr) return Status::Internal("cannot create a TurboJPEG decompressor");
  JpegHeader header;
  int subsampling = 0;
  if (tjDecompressHeader3(handle, bytes.data(), static_cast<unsigned long>(bytes.size()),
                          &header.width, &header.height, &subsampling, &header.colorspace) != 0) {
    const std::string reason = tjGetErrorStr2(handle);
    ThisThreadDecompressor().Renew();
    return Status::DataLoss("malformed JPEG header: " + reason);
  }
  return header;
}

// Decodes with OpenCV, ignoring EXIF (the caller applies orientation once).
Result<RgbImage> DecodeWithOpenCv(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  cv::Mat bgr;
  try {
    const cv::Mat input(1, static_cast<int>(bytes.size()), CV_8UC1,
                        const_cast<uint8_t*>(bytes.data()));
    // IMREAD_COLOR gives 8-bit BGR whatever the source: 16-bit samples are
    // scaled down, palettes expanded, gray replicated, alpha dropped.
    bgr = cv::imdecode(input, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    return Status::DataLoss(std::string("cannot decode image: ") + e.what());
  }
  if (bgr.empty() || bgr.type() != CV_8UC3) {
    return Status::DataLoss("not a decodable image (unknown format, corrupt or truncated)");
  }
  GALLEY_RETURN_IF_ERROR(CheckPixels(bgr.cols, bgr.rows, options));
  RgbImage image;
  image.width = bgr.cols;
  image.height = bgr.rows;
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);
  cv::Mat rgb(image.height, image.width, CV_8UC3, image.pixels.data());
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
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
    if (warning) {
      return Status::DataLoss("corrupt or truncated JPEG: " + reason);
    }
    // TurboJPEG refused the stream outright. OpenCV's libjpeg warns and pads
    // a truncated stream instead of failing, so only a complete stream (one
    // that reaches its end-of-image marker) is offered to it.
    const bool complete =
        bytes.size() >= 4 && bytes[bytes.size() - 2] == 0xFF && bytes[bytes.size() - 1] == 0xD9;
    if (!complete) return Status::DataLoss("undecodable JPEG: " + reason);
    auto fallback = DecodeWithOpenCv(bytes, options);
    if (!fallback.ok()) return Status::DataLoss("undecodable JPEG: " + reason);
    ApplyOrientation(orientation, *fallback);
    return fallback;
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

// Reads PNG's IHDR or BMP's info header, so oversized images are refused
// before OpenCV allocates for them. Returns width = height = 0 when the
// format has no parser here.
Result<ImageHeader> ReadNonJpegHeader(std::span<const uint8_t> bytes) {
  ImageHeader header;
  if (IsPng(bytes)) {
    header.format = ImageFormat::kPng;
    // Signature, then the IHDR chunk: length, "IHDR", width, height (big-endian).
    if (bytes.size() < 24 || std::memcmp(&bytes[12], "IHDR", 4) != 0) {
      return Status::DataLoss("malformed PNG: missing IHDR chunk");
    }
    const uint32_t width = ReadBigEndian32(&bytes[16]);
    const uint32_t height = ReadBigEndian32(&bytes[20]);
    if (width == 0 || height == 0 || width > 0x7FFFFFFFu || height > 0x7FFFFFFFu) {
      return Status::DataLoss("malformed PNG: invalid dimensions");
    }
    header.width = static_cast<int>(width);
    header.height = static_cast<int>(height);
  } else if (IsBmp(bytes)) {
    header.format = ImageFormat::kBmp;
    if (bytes.size() < 26) return Status::DataLoss("malformed BMP: header too short");
    const uint32_t info_size = ReadLittleEndian32(&bytes[14]);
    int64_t width = 0;
    int64_t height = 0;
    if (info_size == 12) {  // BITMAPCOREHEADER: 16-bit dimensions
      width = ReadLittleEndian16(&bytes[18]);
      height = ReadLittleEndian16(&bytes[20]);
    } else {  // BITMAPINFOHEADER and later: signed 32-bit, negative height = top-down
      width = static_cast<int32_t>(ReadLittleEndian32(&bytes[18]));
      height = static_cast<int32_t>(ReadLittleEndian32(&bytes[22]));
      if (height < 0) height = -height;
    }
    if (width <= 0 || height <= 0 || width > 0x7FFFFFFF || height > 0x7FFFFFFF) {
      return Status::DataLoss("malformed BMP: invalid dimensions");
    }
    header.width = static_cast<int>(width);
    header.height = static_cast<int>(height);
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
  if (header.width > 0) {
    GALLEY_RETURN_IF_ERROR(CheckPixels(static_cast<uint64_t>(header.width),
                                       static_cast<uint64_t>(header.height), options));
  }
  return DecodeWithOpenCv(bytes, options);
}

Result<RgbImage> Decode(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  // A minimum larger than any JPEG dimension forces scale 1.
  return DecodeScaled(bytes, options, 1 << 30, 1 << 30);
}

}  // namespace galley::image
