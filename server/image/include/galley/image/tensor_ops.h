// torchvision 0.14's tensor kernels (transforms.functional_tensor) on
// interleaved RGB uint8 images, for the ops AugMix chains, and AugMix's
// mixing itself (docs/transforms.md).
//
// torchvision's AugMix converts even a PIL image to a uint8 tensor before it
// runs its chains, so its ops are torchvision's tensor arithmetic, not
// Pillow's: colour blends in float32 (ratio * img + (1 - ratio) *
// degenerate, clamped and truncated), the grayscale 0.2989 R + 0.587 G +
// 0.114 B truncated, sharpness through a float32 3x3 convolution rounded to
// nearest even, autocontrast with a float32 scale, and the geometric ops as
// torch.nn.functional.grid_sample (align_corners=False, zeros outside, a fill
// through an extra mask channel) rounded to nearest even. This code repeats
// that float32 arithmetic. Where torch 1.13's AVX2 kernels fuse a multiply and
// an add (the affine grid's matrix product, grid_sample's unnormalisation
// and interpolation) so does this code, so its bytes equal that build's (a
// torch build without FMA kernels may round a value differently).
// Posterize, solarize and equalize compute what the PIL versions compute
// (pixel_ops.h).
//
// Stateless apart from per-thread scratch buffers; safe from any thread.
// dst must not alias src.
#ifndef GALLEY_SERVER_IMAGE_TENSOR_OPS_H_
#define GALLEY_SERVER_IMAGE_TENSOR_OPS_H_

#include <array>
#include <optional>

#include "galley/image/rgb_span.h"

namespace galley::image {

// torchvision's tensor adjust_brightness / adjust_saturation /
// adjust_contrast / adjust_sharpness and autocontrast.
void TensorAdjustBrightness(const RgbView& src, const RgbSpan& dst, double factor);
void TensorAdjustSaturation(const RgbView& src, const RgbSpan& dst, double factor);
void TensorAdjustContrast(const RgbView& src, const RgbSpan& dst, double factor);
void TensorAdjustSharpness(const RgbView& src, const RgbSpan& dst, double factor);
void TensorAutoContrast(const RgbView& src, const RgbSpan& dst);

// The fill of the tensor warps: absent is torchvision's fill=None (zeros
// outside, no mask), present a colour per channel (not rounded).
using TensorFill = std::optional<std::array<float, 3>>;

// F.affine / F.rotate on a tensor: `matrix` is torchvision's inverse affine
// matrix for tensors (_get_inverse_affine_matrix with coordinates centred on
// the image), sampled through _gen_affine_grid and grid_sample with nearest
// or bilinear interpolation. dst has src's size. allow_simd false forces
// the one-pixel-at-a-time code (the same bytes; tests compare them).
void TensorAffineWarp(const RgbView& src, const RgbSpan& dst, const std::array<double, 6>& matrix,
                      bool bilinear, const TensorFill& fill, bool allow_simd = true);

// AugMix's operations, in the order of torchvision's augmentation space
// (all_ops adds the last four).
enum class AugMixOp {
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
};
inline constexpr int kAugMixBasicOps = 9;
inline constexpr int kAugMixAllOps = 13;
inline constexpr int kMaxAugMixWidth = 8;
inline constexpr int kMaxAugMixDepth = 8;

struct AugMixStep {
  AugMixOp op = AugMixOp::kAutoContrast;
  double magnitude = 0;  // signed, as torchvision's _apply_op receives it
};

// One sample's AugMix draws: the original image's weight m0, each chain's
// weight (the Dirichlet draw times m1, in float32 as torchvision multiplies
// them) and steps.
struct AugMixDraw {
  float original_weight = 1;
  int width = 0;
  std::array<float, kMaxAugMixWidth> weights{};
  std::array<int, kMaxAugMixWidth> depths{};
  std::array<std::array<AugMixStep, kMaxAugMixDepth>, kMaxAugMixWidth> steps{};
};

// torchvision's _apply_op for one step of a chain, on a tensor.
void AugMixApplyStep(const RgbView& src, const RgbSpan& dst, const AugMixStep& step, bool bilinear,
                     const TensorFill& fill);

// AugMix.forward with its draws given: m0 * image plus each chain's weight
// times the chain's result, in float32, truncated to uint8.
void AugMix(const RgbView& src, const RgbSpan& dst, const AugMixDraw& draw, bool bilinear,
            const TensorFill& fill);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_TENSOR_OPS_H_
