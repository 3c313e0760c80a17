// Rect: a rectangle of pixels, as its top-left corner and its size.
//
// Its coordinates are those of the image it is said of: the source image
// (TransformPipeline::RegionWindow), the image as a sample's plan sees it at
// one of its steps (a crop, which may extend past the edges and then reads
// zeros), or the output tensor (RandomErasing's rectangle).
//
// Thread-safety: a plain value.
#ifndef GALLEY_SERVER_IMAGE_RECT_H_
#define GALLEY_SERVER_IMAGE_RECT_H_

namespace galley::image {

struct Rect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;

  friend bool operator==(const Rect&, const Rect&) = default;
};

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_RECT_H_
