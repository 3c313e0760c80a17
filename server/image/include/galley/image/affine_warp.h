// AffineWarp: Pillow's Image.transform(size, AFFINE, matrix, resample,
// fillcolor) on interleaved RGB uint8 images, bit for bit
// (docs/transforms.md). torchvision's affine, rotate and AutoAugment's
// geometric ops on PIL images end here (pixel_ops.h).
//
// Output pixel centre (x + 0.5, y + 0.5) samples the source at
// matrix * (x + 0.5, y + 0.5); outside the source it is `fill`. Nearest
// follows Pillow's three paths (scale-only, 16.16 fixed point, float) so the
// chosen source pixel is the same; bilinear and bicubic are Pillow's
// bilinear_filter32RGB / bicubic_filter32RGB, in double as Pillow computes
// them. A whole-pixel translation, which every filter reduces to a copy, is
// copied. The filters have AVX2 kernels that evaluate the same double
// expressions in the same order (no fused multiply-add), so both paths give
// the same bytes; tests compare them.
//
// Stateless; safe to call from any thread. dst must not alias src.
#ifndef GALLEY_SERVER_IMAGE_AFFINE_WARP_H_
#define GALLEY_SERVER_IMAGE_AFFINE_WARP_H_

#include <array>

#include "galley/image/rgb_span.h"

namespace galley::image {

enum class WarpInterpolation { kNearest, kBilinear, kBicubic };

// allow_simd false forces the plain per-pixel code (no AVX2 kernel, no copy
// for whole-pixel shifts), which tests compare with the fast paths.
void AffineWarp(const RgbView& src, const RgbSpan& dst, const std::array<double, 6>& matrix,
                WarpInterpolation interpolation, const Fill& fill, bool allow_simd = true);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_AFFINE_WARP_H_
