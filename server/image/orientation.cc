#include "galley/image/orientation.h"

#include <libexif/exif-data.h>

#include <cstring>
#include <memory>
#include <utility>

#include "galley/image/rgb_span.h"

namespace galley::image {
namespace {

constexpr uint8_t kExifHeader[6] = {'E', 'x', 'i', 'f', 0, 0};

// Finds the APP1 segment holding EXIF by walking the marker segments up to
// the start of scan; libexif only ever sees that one segment, so a damaged
// entropy-coded body cannot reach it.
std::span<const uint8_t> FindExifSegment(std::span<const uint8_t> jpeg) {
  if (jpeg.size() < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) return {};
  size_t pos = 2;
  while (pos + 4 <= jpeg.size()) {
    if (jpeg[pos] != 0xFF) return {};
    const uint8_t marker = jpeg[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return {};  // start of scan / end of image
    const size_t length = (size_t{jpeg[pos + 2]} << 8) | jpeg[pos + 3];
    if (length < 2 || pos + 2 + length > jpeg.size()) return {};
    const auto payload = jpeg.subspan(pos + 4, length - 2);
    if (marker == 0xE1 && payload.size() > sizeof(kExifHeader) &&
        std::memcmp(payload.data(), kExifHeader, sizeof(kExifHeader)) == 0) {
      return payload;
    }
    pos += 2 + length;
  }
  return {};
}

struct ExifDataDeleter {
  void operator()(ExifData* data) const { exif_data_unref(data); }
};

}  // namespace

int ReadJpegOrientation(std::span<const uint8_t> jpeg) {
  const auto segment = FindExifSegment(jpeg);
  if (segment.empty()) return 1;
  std::unique_ptr<ExifData, ExifDataDeleter> data(exif_data_new());
  if (!data) return 1;
  // Read the tags as stored: by default libexif also invents mandatory tags.
  exif_data_unset_option(data.get(), EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_load_data(data.get(), segment.data(), static_cast<unsigned int>(segment.size()));
  ExifEntry* entry = exif_content_get_entry(data->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
  if (entry == nullptr || entry->format != EXIF_FORMAT_SHORT || entry->components < 1 ||
      entry->data == nullptr || entry->size < 2) {
    return 1;
  }
  const int value = exif_get_short(entry->data, exif_data_get_byte_order(data.get()));
  return value >= 1 && value <= 8 ? value : 1;
}

void ApplyOrientation(int orientation, RgbImage& image) {
  if (orientation <= 1 || orientation > 8 || image.pixels.empty()) return;
  const bool swap = OrientationSwapsAxes(orientation);
  RgbImage out;
  out.width = swap ? image.height : image.width;
  out.height = swap ? image.width : image.height;
  out.pixels.resize(image.pixels.size());
  ReorientPixels(RgbSpan::Packed(image.pixels.data(), image.width, image.height),
                 RgbSpan::Packed(out.pixels.data(), out.width, out.height), orientation);
  image = std::move(out);
}

}  // namespace galley::image
