// TransformSpec: the validated, canonical form of a transform pipeline's JSON.
//
// The JSON travels on the wire from the Python client (docs/transforms.md):
//   {"ops": [{"op": "RandomResizedCrop", "size": [224, 224], ...}, ...],
//    "output": {"layout": "NCHW", "dtype": "uint8"}}
// Parsing checks every field and fills torchvision's defaults, so two specs
// that mean the same pipeline have the same canonical JSON. Plain values;
// safe to share between threads once built.
#ifndef GALLEY_SERVER_IMAGE_TRANSFORM_SPEC_H_
#define GALLEY_SERVER_IMAGE_TRANSFORM_SPEC_H_

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "galley/status.h"
#include "galley/tensor_format.h"

namespace galley::image {

using ::galley::DType;
using ::galley::Layout;
enum class Interpolation { kNearest, kBilinear, kBicubic, kBox, kHamming, kLanczos };

enum class OpKind {
  kRandomResizedCrop,
  kResize,
  kCenterCrop,
  kRandomHorizontalFlip,
  kRandomCrop,
  kPad,
  kRandomVerticalFlip,
  kColorJitter,
  kGrayscale,
  kRandomGrayscale,
  kGaussianBlur,
  kRandomRotation,
  kRandomAffine,
  kRandomApply,
  kRandomChoice,
  kRandomOrder,
  kAutoAugment,
  kRandAugment,
  kTrivialAugmentWide,
  kRandomErasing,
  kAugMix,
};

// torchvision's padding_mode.
enum class PaddingMode { kConstant, kEdge, kReflect, kSymmetric };

// The spec's names: "bilinear", "reflect", ...
const char* InterpolationName(Interpolation interpolation);
const char* PaddingModeName(PaddingMode mode);
enum class AutoAugmentPolicy { kImageNet, kCifar10, kSvhn };

using Range = std::array<double, 2>;

// One op with every field filled in. Sizes are [h, w], except Resize with a
// single number, which sets the shorter side (size has one element then).
struct TransformOp {
  OpKind kind = OpKind::kResize;
  std::vector<int> size;
  std::array<double, 2> scale = {0.08, 1.0};
  std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};
  Interpolation interpolation = Interpolation::kBilinear;
  double p = 0.5;

  // RandomCrop / Pad: [left, top, right, bottom] (RandomCrop: empty = none).
  std::vector<int> padding;
  bool pad_if_needed = false;
  PaddingMode padding_mode = PaddingMode::kConstant;
  // Pad, RandomCrop, RandomRotation, RandomAffine and the AutoAugment family:
  // the colour of pixels from outside the image, truncated to integers as
  // torchvision does for PIL images.
  std::array<double, 3> fill = {0, 0, 0};
  // ColorJitter factor ranges; absent means torchvision's None (not drawn).
  std::optional<Range> brightness, contrast, saturation, hue;
  // GaussianBlur: kernel [x, y] (odd) and sigma's range.
  std::array<int, 2> kernel_size = {3, 3};
  Range sigma = {0.1, 2.0};
  // RandomRotation / RandomAffine.
  Range degrees = {0, 0};
  std::optional<Range> translate;     // fractions of width and height
  std::optional<Range> affine_scale;  // RandomAffine's scale
  // RandomAffine's shear: x range, then y range when shear_y is set.
  std::optional<Range> shear_x, shear_y;
  // AutoAugment family.
  AutoAugmentPolicy policy = AutoAugmentPolicy::kImageNet;
  int num_ops = 2;
  int magnitude = 9;
  int num_magnitude_bins = 31;
  // AugMix (its interpolation is nearest or bilinear, torchvision's tensor
  // kernels; chain_depth <= 0 draws each chain's depth from 1..3; its fill,
  // absent for torchvision's None, is not rounded).
  int severity = 3;
  int mixture_width = 3;
  int chain_depth = -1;
  double alpha = 1.0;
  bool all_ops = true;
  std::optional<std::array<double, 3>> tensor_fill;
  // RandomErasing's value per channel in the output's units (after
  // Normalize for float32 output); absent means "random" (standard normal).
  std::optional<std::array<double, 3>> erase_value = std::array<double, 3>{0, 0, 0};
  // RandomApply / RandomChoice / RandomOrder: the ops they hold, and
  // RandomChoice's weights (empty = uniform).
  std::vector<TransformOp> children;
  std::vector<double> weights;
};

struct OutputSpec {
  Layout layout = Layout::kNCHW;
  DType dtype = DType::kUInt8;
  // Per-channel Normalize parameters (float32 only): out = (x / 255 - mean) / std.
  std::array<double, 3> mean = {0, 0, 0};
  std::array<double, 3> std = {1, 1, 1};
};

struct TransformSpec {
  std::vector<TransformOp> ops;
  OutputSpec output;
  // The fixed output size every sample has, [h, w].
  int output_height = 0;
  int output_width = 0;
};

// Limits that keep one request from asking for absurd memory.
inline constexpr int kMaxTransformOps = 16;
// Ops inside RandomApply / RandomChoice / RandomOrder, all levels together.
inline constexpr int kMaxNestedOps = 32;
inline constexpr int kMaxNestingDepth = 3;
inline constexpr int kMaxOutputSide = 8192;

// Validates `json` (unknown ops or fields, wrong types, non-positive sizes,
// (min, max) pairs out of order, p outside [0, 1], std == 0, non-finite
// numbers, an output size that depends on the input) and returns the spec, or
// InvalidArgument naming the op and field.
Result<TransformSpec> ParseTransformSpec(const nlohmann::json& json);

// Canonical JSON: every default filled in, fields in a fixed order.
nlohmann::json TransformSpecToJson(const TransformSpec& spec);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_TRANSFORM_SPEC_H_
