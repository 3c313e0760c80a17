#include "galley/image/max_resolution.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace galley::image {

ImageSize MaxResolutionSize(int width, int height, uint32_t max_resolution) {
  const int64_t longer = std::max(width, height);
  if (max_resolution == 0 || longer <= int64_t{max_resolution}) return {width, height};
  // Integer arithmetic: floor(shorter * limit / longer) exactly, where a
  // float ratio could land a hair under an integer and lose a pixel.
  const int64_t limit = max_resolution;
  auto scaled = [&](int side) {
    return static_cast<int>(std::max<int64_t>(1, int64_t{side} * limit / longer));
  };
  return width >= height ? ImageSize{static_cast<int>(limit), scaled(height)}
                         : ImageSize{scaled(width), static_cast<int>(limit)};
}

Status ShrinkToMaxResolution(uint32_t max_resolution, RgbImage* image) {
  const ImageSize size = MaxResolutionSize(image->width, image->height, max_resolution);
  if (size == ImageSize{image->width, image->height}) return Status::Ok();
  if (image->pixels.size() != static_cast<size_t>(image->width) * image->height * 3) {
    return Status::InvalidArgument("the image's pixels are not width x height RGB");
  }
  const RgbView source{image->pixels.data(), image->width, image->height,
                       static_cast<ptrdiff_t>(image->width) * 3};
  std::vector<uint8_t> shrunk(static_cast<size_t>(size.width) * size.height * 3);
  ResampleOptions options;
  options.filter = kMaxResolutionFilter;
  GALLEY_RETURN_IF_ERROR(ResizeAntialiased(source,
                                           ResizeGeometry::Whole(source, size.width, size.height),
                                           options, shrunk.data(), ptrdiff_t{size.width} * 3));
  image->width = size.width;
  image->height = size.height;
  image->pixels = std::move(shrunk);
  return Status::Ok();
}

}  // namespace galley::image
