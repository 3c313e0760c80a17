// ResizeAntialiased: separable resampling of interleaved RGB uint8 images with
// PIL's antialiased filters: bilinear, bicubic, box, hamming and lanczos
// (docs/transforms.md).
//
// The result equals PIL's `Image.resize(size, filter, box)` (reducing_gap
// None), which is what torchvision 0.14 computes on PIL images: the kernel
// (triangle, or Keys cubic with a = -0.5) is stretched by the scale factor
// when shrinking, so every source pixel contributes and nothing aliases;
// weights are normalised per output pixel, rounded to 22-bit fixed point, and
// the horizontal pass runs first with its result rounded to uint8, as PIL
// does, so the output matches PIL bit for bit.
//
// The source is a view (a crop of a larger image costs nothing), the kernel
// is clipped at the view's edges, and only a window of the output may be
// asked for (a resize followed by a crop computes only the cropped pixels).
// Output rows go to a sink, so the caller can write them in its own layout.
//
// Thread-safety: the functions may run concurrently on different threads;
// each thread keeps its own scratch buffers, which grow to the largest
// request it has seen and are then reused, so steady-state calls allocate
// nothing.
#ifndef GALLEY_SERVER_IMAGE_RESAMPLE_H_
#define GALLEY_SERVER_IMAGE_RESAMPLE_H_

#include <cstddef>
#include <cstdint>

#include "galley/image/rgb_span.h"
#include "galley/status.h"

namespace galley::image {

enum class ResampleFilter {
  kBilinear,  // PIL's BILINEAR: triangle of support 1
  kBicubic,   // PIL's BICUBIC: Keys cubic with a = -0.5, support 2
  kBox,       // PIL's BOX: 1 on (-0.5, 0.5]
  kHamming,   // PIL's HAMMING: sinc times a Hamming window, support 1
  kLanczos,   // PIL's LANCZOS: sinc(x) sinc(x / 3) on [-3, 3)
};

// What to compute. The source rectangle [box_x0, box_x1) x [box_y0, box_y1),
// in pixel-edge coordinates of the view and possibly fractional (PIL's
// `box`), is stretched onto an out_width x out_height image, of which the
// rectangle at (window_x, window_y) of window_width x window_height is
// produced. Source pixels outside the box but inside the view take part near
// the box's edges, as in PIL; pass the crop as the view (not as the box) for
// torchvision's crop-then-resize.
struct ResizeGeometry {
  double box_x0 = 0;
  double box_y0 = 0;
  double box_x1 = 0;
  double box_y1 = 0;
  int out_width = 0;
  int out_height = 0;
  int window_x = 0;
  int window_y = 0;
  int window_width = 0;
  int window_height = 0;

  // The whole view onto the whole out_width x out_height output.
  static ResizeGeometry Whole(const RgbView& source, int out_width, int out_height);
};

// Receives the produced rows top to bottom. Row(y) says where row y of the
// window (window_width * 3 bytes) goes; Done(y) follows once it is written.
class RgbRowSink {
 public:
  virtual ~RgbRowSink() = default;
  virtual uint8_t* Row(int y) = 0;
  virtual void Done(int y) { (void)y; }
};

struct ResampleOptions {
  ResampleFilter filter = ResampleFilter::kBilinear;
  // Use the AVX2 kernels when the CPU has them. Both paths compute the same
  // integers; false forces the portable one (tests compare them).
  bool allow_simd = true;
};

// InvalidArgument for an empty view or output, a box that is empty or leaves
// the view, or a window that leaves the output.
Status ResizeAntialiased(const RgbView& source, const ResizeGeometry& geometry,
                         const ResampleOptions& options, RgbRowSink& sink);

// Writes the window as interleaved RGB rows dst_stride bytes apart.
Status ResizeAntialiased(const RgbView& source, const ResizeGeometry& geometry,
                         const ResampleOptions& options, uint8_t* dst, ptrdiff_t dst_stride);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_RESAMPLE_H_
