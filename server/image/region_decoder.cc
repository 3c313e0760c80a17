#include "galley/image/region_decoder.h"

// jpeglib.h uses FILE and size_t without including their headers.
#include <cstddef>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "galley/image/orientation.h"

namespace galley::image {
namespace {

// Pixels decoded beyond the requested rectangle on each side that is not an
// image edge. Fancy (triangle) upsampling of a chroma sample reads its
// neighbours, which a cropped or skipped decode does not have at its edges;
// the margin keeps those edge pixels out of the result.
constexpr int kMargin = 2;

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void ExitOnError(j_common_ptr cinfo) {
  auto* error = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, error->message);
  std::longjmp(error->jump, 1);
}

// libjpeg reports corrupt or truncated data as a warning (level -1) and
// carries on with grey pixels; galley never serves such a partial image, so a
// warning ends the decode like an error. Trace messages (level >= 0) are
// ignored.
void StopOnWarning(j_common_ptr cinfo, int level) {
  if (level < 0) ExitOnError(cinfo);
}

// One libjpeg decompressor per thread, reused across images: creating one
// allocates its memory pools.
class ThreadDecompressor {
 public:
  ThreadDecompressor() {
    cinfo_.err = jpeg_std_error(&error_.pub);
    error_.pub.error_exit = ExitOnError;
    error_.pub.emit_message = StopOnWarning;
    error_.message[0] = '\0';
    if (setjmp(error_.jump) != 0) return;  // out of memory: created_ stays false
    jpeg_create_decompress(&cinfo_);
    created_ = true;
  }
  ~ThreadDecompressor() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }
  ThreadDecompressor(const ThreadDecompressor&) = delete;
  ThreadDecompressor& operator=(const ThreadDecompressor&) = delete;

  bool created() const { return created_; }
  jpeg_decompress_struct* cinfo() { return &cinfo_; }
  ErrorManager& error() { return error_; }

 private:
  jpeg_decompress_struct cinfo_{};
  ErrorManager error_{};
  bool created_ = false;
};

enum class Outcome { kDecoded, kUnsupported, kTooLarge, kFailed };

struct Request {
  int x, y, width, height;
  uint64_t max_pixels;
};

// Everything DecodeWithLibjpeg reports back; it lives in the caller's frame,
// so it stays valid across a longjmp.
struct Output {
  std::vector<uint8_t>* pixels = nullptr;  // requested rectangle, RGB
  std::vector<uint8_t>* rows = nullptr;    // scratch: decoded rows at the cropped width
  int full_width = 0;
  int full_height = 0;
  const char* unsupported = nullptr;
};

// All libjpeg calls for one region. A libjpeg error longjmps back to the
// setjmp here; this frame holds nothing with a destructor, and everything
// read after the jump lives in `out` or the decompressor.
Outcome DecodeWithLibjpeg(ThreadDecompressor& decompressor, std::span<const uint8_t> jpeg,
                          const Request& request, Output& out) {
  jpeg_decompress_struct* cinfo = decompressor.cinfo();
  if (setjmp(decompressor.error().jump) != 0) {
    jpeg_abort_decompress(cinfo);
    return Outcome::kFailed;
  }
  jpeg_mem_src(cinfo, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(cinfo, TRUE);
  if (cinfo->jpeg_color_space != JCS_YCbCr && cinfo->jpeg_color_space != JCS_GRAYSCALE) {
    out.unsupported = "colour space is neither YCbCr nor grayscale";
    jpeg_abort_decompress(cinfo);
    return Outcome::kUnsupported;
  }
  out.full_width = static_cast<int>(cinfo->image_width);
  out.full_height = static_cast<int>(cinfo->image_height);
  if (out.full_width == 0 || out.full_height == 0 ||
      uint64_t{cinfo->image_width} * cinfo->image_height > request.max_pixels) {
    jpeg_abort_decompress(cinfo);
    return Outcome::kTooLarge;
  }
  if (request.x + request.width > out.full_width || request.y + request.height > out.full_height) {
    out.unsupported = "rectangle outside the image";
    jpeg_abort_decompress(cinfo);
    return Outcome::kUnsupported;
  }
  // What TurboJPEG's tjDecompress2 sets for TJPF_RGB with no flags, so the
  // pixels match Decode's.
  cinfo->out_color_space = JCS_EXT_RGB;
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->scale_num = cinfo->scale_denom = 1;
  jpeg_start_decompress(cinfo);

  const int x0 = std::max(0, request.x - kMargin);
  const int x1 = std::min(out.full_width, request.x + request.width + kMargin);
  const int y0 = std::max(0, request.y - kMargin);
  const int y1 = std::min(out.full_height, request.y + request.height + kMargin);
  // Widened to whole MCU columns; xoffset and width come back adjusted.
  JDIMENSION crop_x = static_cast<JDIMENSION>(x0);
  JDIMENSION crop_width = static_cast<JDIMENSION>(x1 - x0);
  jpeg_crop_scanline(cinfo, &crop_x, &crop_width);
  const size_t row_bytes = size_t{crop_width} * 3;
  const size_t skip_bytes = static_cast<size_t>(request.x - static_cast<int>(crop_x)) * 3;
  const size_t copy_bytes = static_cast<size_t>(request.width) * 3;

  if (y0 > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y0));
  // Up to one iMCU row per call: libjpeg hands out a whole row group at a
  // time (two rows for 4:2:0) when given room for it, and asking for single
  // rows costs an extra copy through its spare row.
  constexpr int kBatchRows = 16;
  out.rows->resize(row_bytes * kBatchRows);
  JSAMPROW row_pointers[kBatchRows];
  for (int i = 0; i < kBatchRows; ++i) row_pointers[i] = out.rows->data() + row_bytes * i;
  out.pixels->resize(static_cast<size_t>(request.width) * request.height * 3);
  while (static_cast<int>(cinfo->output_scanline) < y1) {
    const int first = static_cast<int>(cinfo->output_scanline);
    const int wanted = std::min(kBatchRows, y1 - first);
    const int got =
        static_cast<int>(jpeg_read_scanlines(cinfo, row_pointers, static_cast<JDIMENSION>(wanted)));
    if (got == 0) {  // a memory source never suspends; stop rather than spin
      std::snprintf(decompressor.error().message, JMSG_LENGTH_MAX, "decoder returned no rows");
      jpeg_abort_decompress(cinfo);
      return Outcome::kFailed;
    }
    for (int i = 0; i < got; ++i) {
      const int row = first + i - request.y;
      if (row < 0 || row >= request.height) continue;  // margin row
      std::memcpy(out.pixels->data() + static_cast<size_t>(row) * copy_bytes,
                  row_pointers[i] + skip_bytes, copy_bytes);
    }
  }
  // The rest of the file is still entropy-decoded (skipping does that much)
  // and read to its end, so corruption or truncation below the rectangle is
  // an error as it is for Decode. The last row is read rather than skipped:
  // skipping to the very end would stop without decoding anything.
  const int last = out.full_height - 1;
  if (static_cast<int>(cinfo->output_scanline) < last) {
    jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(last - cinfo->output_scanline));
  }
  if (static_cast<int>(cinfo->output_scanline) < out.full_height) {
    jpeg_read_scanlines(cinfo, row_pointers, 1);
  }
  jpeg_finish_decompress(cinfo);
  return Outcome::kDecoded;
}

}  // namespace

Result<ImageRegion> DecodeRegion(std::span<const uint8_t> jpeg, const DecodeOptions& options, int x,
                                 int y, int width, int height) {
  if (jpeg.size() < 3 || jpeg[0] != 0xFF || jpeg[1] != 0xD8 || jpeg[2] != 0xFF) {
    return Status::InvalidArgument("region decode: not a JPEG");
  }
  if (x < 0 || y < 0 || width <= 0 || height <= 0) {
    return Status::InvalidArgument("region decode: empty or negative rectangle");
  }
  if (ReadJpegOrientation(jpeg) != 1) {
    return Status::InvalidArgument("region decode: EXIF orientation is not 1");
  }
  thread_local ThreadDecompressor decompressor;
  if (!decompressor.created()) return Status::Internal("cannot create a libjpeg decompressor");
  thread_local std::vector<uint8_t> rows;
  ImageRegion region;
  Output out{&region.pixels.pixels, &rows};
  const Request request{x, y, width, height, options.max_pixels};
  switch (DecodeWithLibjpeg(decompressor, jpeg, request, out)) {
    case Outcome::kDecoded:
      break;
    case Outcome::kUnsupported:
      return Status::InvalidArgument(std::string("region decode: ") + out.unsupported);
    case Outcome::kTooLarge:
      if (out.full_width == 0 || out.full_height == 0) {
        return Status::DataLoss("image declares a zero dimension");
      }
      return Status::ResourceExhausted(
          "image of " + std::to_string(out.full_width) + "x" + std::to_string(out.full_height) +
          " pixels exceeds max_pixels " + std::to_string(options.max_pixels));
    case Outcome::kFailed:
      return Status::DataLoss(std::string("corrupt or truncated JPEG: ") +
                              decompressor.error().message);
  }
  region.pixels.width = width;
  region.pixels.height = height;
  region.x = x;
  region.y = y;
  region.full_width = out.full_width;
  region.full_height = out.full_height;
  return region;
}

}  // namespace galley::image
