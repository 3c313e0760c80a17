#include "server/image/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "server/image/pixel_ops.h"
#include "server/image/resample.h"
#include "server/image/rgb_span.h"
#include "server/image/sample_random.h"
#include "server/image/tensor_ops.h"

namespace galley::image {
namespace {

// Bounds the memory one sample may take on its way to the output: a Resize
// of the shorter side on a needle-thin image could otherwise ask for gigabytes.
constexpr int64_t kMaxIntermediatePixels = int64_t{1} << 26;

// Python's round(): halves go to the even neighbour (default FE_TONEAREST).
int RoundHalfEven(double value) { return static_cast<int>(std::nearbyint(value)); }

struct Rect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// A step that rewrites the pixels (a pixel op, padding, a warp): its
// parameters, already drawn.
struct PixelStep {
  enum class Kind {
    kBrightness,
    kContrast,
    kSaturation,
    kHue,
    kSharpness,
    kGrayscale,
    kPosterize,
    kSolarize,
    kAutoContrast,
    kEqualize,
    kInvert,
    kVerticalFlip,
    kAffine,
    kRotate,
    kBlur,
    kPad,
    kAugMix,  // sides[0]: its entry in Plan::augmixes
  };
  Kind kind = Kind::kInvert;
  // Factor, threshold or bits (v[0]); affine: angle, tx, ty, scale, shear x,
  // shear y; blur: sigma x, sigma y.
  std::array<double, 6> v{};
  std::array<int, 4> sides{};  // pad: left, top, right, bottom; blur: kernel x, y
  bool center_at_origin = false;
  Interpolation interpolation = Interpolation::kNearest;
  PaddingMode padding_mode = PaddingMode::kConstant;
  Fill fill{};
};

// One step of a sample's plan. A crop rectangle is in the coordinates of
// the image as torchvision would see it at that point (after any earlier
// flip) and may extend past its edges, which reads as zeros.
struct Step {
  enum class Kind { kCrop, kResize, kFlip, kPixel };
  Kind kind = Kind::kFlip;
  Rect rect;
  int width = 0;  // resize target
  int height = 0;
  Interpolation interpolation = Interpolation::kBilinear;
  PixelStep pixel;
};

// RandomErasing's rectangle on the output tensor and what it writes.
struct Erasure {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  bool random = false;  // standard normal noise drawn from noise_seed
  std::array<float, 3> value{};
  uint64_t noise_seed = 0;
};

// The steps of one sample. Fixed capacity, so planning allocates nothing.
constexpr int kMaxPlanSteps = 96;
constexpr int kMaxErasures = 8;
constexpr int kMaxAugMixes = 4;

// One AugMix op's draws and how its warps sample.
struct AugMixPlan {
  AugMixDraw draw;
  bool bilinear = true;
  TensorFill fill;
};

struct Plan {
  std::array<Step, kMaxPlanSteps> steps;
  int count = 0;
  std::array<Erasure, kMaxErasures> erasures;
  int erasure_count = 0;
  std::array<AugMixPlan, kMaxAugMixes> augmixes;
  int augmix_count = 0;
};

// torchvision's RandomResizedCrop.get_params: ten tries at a random area and
// log-uniform aspect ratio, then a centred crop clamped to the ratio range.
Rect RandomResizedCropRect(int width, int height, const TransformOp& op, SampleRandom& random) {
  const double area = static_cast<double>(width) * height;
  const double log_ratio_low = std::log(op.ratio[0]);
  const double log_ratio_high = std::log(op.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * random.Uniform(op.scale[0], op.scale[1]);
    const double aspect_ratio = std::exp(random.Uniform(log_ratio_low, log_ratio_high));
    const int w = RoundHalfEven(std::sqrt(target_area * aspect_ratio));
    const int h = RoundHalfEven(std::sqrt(target_area / aspect_ratio));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int y = static_cast<int>(random.UniformInt(0, height - h));
      const int x = static_cast<int>(random.UniformInt(0, width - w));
      return {x, y, w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < op.ratio[0]) {
    h = RoundHalfEven(w / op.ratio[0]);
  } else if (in_ratio > op.ratio[1]) {
    w = RoundHalfEven(h * op.ratio[1]);
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

// torchvision's center_crop, padding included: a side longer than the image
// is padded with zeros, (c - n) // 2 before and the rest after.
Rect CenterCropRect(int width, int height, int crop_height, int crop_width) {
  auto offset = [](int n, int c) { return c > n ? -((c - n) / 2) : RoundHalfEven((n - c) / 2.0); };
  return {offset(width, crop_width), offset(height, crop_height), crop_width, crop_height};
}

// torch.empty(1).uniform_(low, high): torchvision draws these parameters as
// float32, so a degenerate range (a, a) gives float32(a), not a.
double UniformF32(SampleRandom& random, double low, double high) {
  return static_cast<float>(random.Uniform(low, high));
}

Fill FillOf(const std::array<double, 3>& fill) {
  return {static_cast<uint8_t>(fill[0]), static_cast<uint8_t>(fill[1]),
          static_cast<uint8_t>(fill[2])};
}

// The ops of torchvision's AutoAugment, RandAugment and TrivialAugmentWide;
// RandAugment and TrivialAugmentWide draw from the first 14.
enum class AugmentOp {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};
constexpr int kRandAugmentOps = 14;

struct PolicyStep {
  AugmentOp op;
  double p;
  int magnitude;  // bin, -1 for ops without one
};
using SubPolicy = std::array<PolicyStep, 2>;

// The learned policies of Cubuk et al., "AutoAugment: Learning Augmentation
// Strategies from Data" (CVPR 2019), as torchvision 0.14 lists them.
const std::vector<SubPolicy>& Policies(AutoAugmentPolicy policy) {
  using enum AugmentOp;
  static const std::vector<SubPolicy> imagenet = {
      {{{kPosterize, 0.4, 8}, {kRotate, 0.6, 9}}},
      {{{kSolarize, 0.6, 5}, {kAutoContrast, 0.6, -1}}},
      {{{kEqualize, 0.8, -1}, {kEqualize, 0.6, -1}}},
      {{{kPosterize, 0.6, 7}, {kPosterize, 0.6, 6}}},
      {{{kEqualize, 0.4, -1}, {kSolarize, 0.2, 4}}},
      {{{kEqualize, 0.4, -1}, {kRotate, 0.8, 8}}},
      {{{kSolarize, 0.6, 3}, {kEqualize, 0.6, -1}}},
      {{{kPosterize, 0.8, 5}, {kEqualize, 1.0, -1}}},
      {{{kRotate, 0.2, 3}, {kSolarize, 0.6, 8}}},
      {{{kEqualize, 0.6, -1}, {kPosterize, 0.4, 6}}},
      {{{kRotate, 0.8, 8}, {kColor, 0.4, 0}}},
      {{{kRotate, 0.4, 9}, {kEqualize, 0.6, -1}}},
      {{{kEqualize, 0.0, -1}, {kEqualize, 0.8, -1}}},
      {{{kInvert, 0.6, -1}, {kEqualize, 1.0, -1}}},
      {{{kColor, 0.6, 4}, {kContrast, 1.0, 8}}},
      {{{kRotate, 0.8, 8}, {kColor, 1.0, 2}}},
      {{{kColor, 0.8, 8}, {kSolarize, 0.8, 7}}},
      {{{kSharpness, 0.4, 7}, {kInvert, 0.6, -1}}},
      {{{kShearX, 0.6, 5}, {kEqualize, 1.0, -1}}},
      {{{kColor, 0.4, 0}, {kEqualize, 0.6, -1}}},
      {{{kEqualize, 0.4, -1}, {kSolarize, 0.2, 4}}},
      {{{kSolarize, 0.6, 5}, {kAutoContrast, 0.6, -1}}},
      {{{kInvert, 0.6, -1}, {kEqualize, 1.0, -1}}},
      {{{kColor, 0.6, 4}, {kContrast, 1.0, 8}}},
      {{{kEqualize, 0.8, -1}, {kEqualize, 0.6, -1}}},
  };
  static const std::vector<SubPolicy> cifar10 = {
      {{{kInvert, 0.1, -1}, {kContrast, 0.2, 6}}},
      {{{kRotate, 0.7, 2}, {kTranslateX, 0.3, 9}}},
      {{{kSharpness, 0.8, 1}, {kSharpness, 0.9, 3}}},
      {{{kShearY, 0.5, 8}, {kTranslateY, 0.7, 9}}},
      {{{kAutoContrast, 0.5, -1}, {kEqualize, 0.9, -1}}},
      {{{kShearY, 0.2, 7}, {kPosterize, 0.3, 7}}},
      {{{kColor, 0.4, 3}, {kBrightness, 0.6, 7}}},
      {{{kSharpness, 0.3, 9}, {kBrightness, 0.7, 9}}},
      {{{kEqualize, 0.6, -1}, {kEqualize, 0.5, -1}}},
      {{{kContrast, 0.6, 7}, {kSharpness, 0.6, 5}}},
      {{{kColor, 0.7, 7}, {kTranslateX, 0.5, 8}}},
      {{{kEqualize, 0.3, -1}, {kAutoContrast, 0.4, -1}}},
      {{{kTranslateY, 0.4, 3}, {kSharpness, 0.2, 6}}},
      {{{kBrightness, 0.9, 6}, {kColor, 0.2, 8}}},
      {{{kSolarize, 0.5, 2}, {kInvert, 0.0, -1}}},
      {{{kEqualize, 0.2, -1}, {kAutoContrast, 0.6, -1}}},
      {{{kEqualize, 0.2, -1}, {kEqualize, 0.6, -1}}},
      {{{kColor, 0.9, 9}, {kEqualize, 0.6, -1}}},
      {{{kAutoContrast, 0.8, -1}, {kSolarize, 0.2, 8}}},
      {{{kBrightness, 0.1, 3}, {kColor, 0.7, 0}}},
      {{{kSolarize, 0.4, 5}, {kAutoContrast, 0.9, -1}}},
      {{{kTranslateY, 0.9, 9}, {kTranslateY, 0.7, 9}}},
      {{{kAutoContrast, 0.9, -1}, {kSolarize, 0.8, 3}}},
      {{{kEqualize, 0.8, -1}, {kInvert, 0.1, -1}}},
      {{{kTranslateY, 0.7, 9}, {kAutoContrast, 0.9, -1}}},
  };
  static const std::vector<SubPolicy> svhn = {
      {{{kShearX, 0.9, 4}, {kInvert, 0.2, -1}}},
      {{{kShearY, 0.9, 8}, {kInvert, 0.7, -1}}},
      {{{kEqualize, 0.6, -1}, {kSolarize, 0.6, 6}}},
      {{{kInvert, 0.9, -1}, {kEqualize, 0.6, -1}}},
      {{{kEqualize, 0.6, -1}, {kRotate, 0.9, 3}}},
      {{{kShearX, 0.9, 4}, {kAutoContrast, 0.8, -1}}},
      {{{kShearY, 0.9, 8}, {kInvert, 0.4, -1}}},
      {{{kShearY, 0.9, 5}, {kSolarize, 0.2, 6}}},
      {{{kInvert, 0.9, -1}, {kAutoContrast, 0.8, -1}}},
      {{{kEqualize, 0.6, -1}, {kRotate, 0.9, 3}}},
      {{{kShearX, 0.9, 4}, {kSolarize, 0.3, 3}}},
      {{{kShearY, 0.8, 8}, {kInvert, 0.7, -1}}},
      {{{kEqualize, 0.9, -1}, {kTranslateY, 0.6, 6}}},
      {{{kInvert, 0.9, -1}, {kEqualize, 0.6, -1}}},
      {{{kContrast, 0.3, 3}, {kRotate, 0.8, 4}}},
      {{{kInvert, 0.8, -1}, {kTranslateY, 0.0, 2}}},
      {{{kShearY, 0.7, 6}, {kSolarize, 0.4, 8}}},
      {{{kInvert, 0.6, -1}, {kRotate, 0.8, 4}}},
      {{{kShearY, 0.3, 7}, {kTranslateX, 0.9, 3}}},
      {{{kShearX, 0.1, 6}, {kInvert, 0.6, -1}}},
      {{{kSolarize, 0.7, 2}, {kTranslateY, 0.6, 7}}},
      {{{kShearY, 0.8, 4}, {kInvert, 0.8, -1}}},
      {{{kShearX, 0.7, 9}, {kTranslateY, 0.8, 3}}},
      {{{kShearY, 0.8, 5}, {kAutoContrast, 0.7, -1}}},
      {{{kShearX, 0.7, 2}, {kInvert, 0.1, -1}}},
  };
  switch (policy) {
    case AutoAugmentPolicy::kCifar10:
      return cifar10;
    case AutoAugmentPolicy::kSvhn:
      return svhn;
    case AutoAugmentPolicy::kImageNet:
      break;
  }
  return imagenet;
}

// torch.linspace(start, end, steps)[index] in float32: the first half
// counts up from start, the second down from end.
double TorchLinspace(double start, double end, int steps, int index) {
  if (steps == 1) return static_cast<float>(start);
  const float s = static_cast<float>(start);
  const float e = static_cast<float>(end);
  const float step = (e - s) / static_cast<float>(steps - 1);
  if (index < steps / 2) return s + step * static_cast<float>(index);
  return e - step * static_cast<float>(steps - index - 1);
}

}  // namespace

Result<double> AugmentMagnitude(OpKind family, int op, int num_bins, int bin, int width,
                                int height) {
  if (op < 0 || op > static_cast<int>(AugmentOp::kInvert) || bin < 0 || bin >= num_bins) {
    return Status::InvalidArgument("AugmentMagnitude: op or bin out of range");
  }
  const bool wide = family == OpKind::kTrivialAugmentWide;
  switch (static_cast<AugmentOp>(op)) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY:
      return TorchLinspace(0.0, wide ? 0.99 : 0.3, num_bins, bin);
    case AugmentOp::kTranslateX:
      return TorchLinspace(0.0, wide ? 32.0 : 150.0 / 331.0 * width, num_bins, bin);
    case AugmentOp::kTranslateY:
      return TorchLinspace(0.0, wide ? 32.0 : 150.0 / 331.0 * height, num_bins, bin);
    case AugmentOp::kRotate:
      return TorchLinspace(0.0, wide ? 135.0 : 30.0, num_bins, bin);
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness:
      return TorchLinspace(0.0, wide ? 0.99 : 0.9, num_bins, bin);
    case AugmentOp::kPosterize: {
      // 8 - round(arange(bins) / ((bins - 1) / d)) in float32, halves to even.
      const float divisor = static_cast<float>((num_bins - 1) / (wide ? 6.0 : 4.0));
      return 8 - static_cast<int>(std::nearbyint(static_cast<float>(bin) / divisor));
    }
    case AugmentOp::kSolarize:
      return TorchLinspace(255.0, 0.0, num_bins, bin);
    default:
      return 0.0;
  }
}

Result<double> AugMixMagnitude(AugMixOp op, int bin, int width, int height) {
  constexpr int kBins = 10;  // AugMix's _PARAMETER_MAX
  if (bin < 0 || bin >= kBins) return Status::InvalidArgument("AugMixMagnitude: bin out of range");
  switch (op) {
    case AugMixOp::kShearX:
    case AugMixOp::kShearY:
      return TorchLinspace(0.0, 0.3, kBins, bin);
    case AugMixOp::kTranslateX:
      return TorchLinspace(0.0, width / 3.0, kBins, bin);
    case AugMixOp::kTranslateY:
      return TorchLinspace(0.0, height / 3.0, kBins, bin);
    case AugMixOp::kRotate:
      return TorchLinspace(0.0, 30.0, kBins, bin);
    case AugMixOp::kPosterize: {
      // 4 - round(arange(bins) / ((bins - 1) / 4)) in float32, halves to even.
      const auto divisor = static_cast<float>((kBins - 1) / 4.0);
      return 4 - static_cast<int>(std::nearbyint(static_cast<float>(bin) / divisor));
    }
    case AugMixOp::kSolarize:
      return TorchLinspace(255.0, 0.0, kBins, bin);
    case AugMixOp::kBrightness:
    case AugMixOp::kColor:
    case AugMixOp::kContrast:
    case AugMixOp::kSharpness:
      return TorchLinspace(0.0, 0.9, kBins, bin);
    default:
      return 0.0;
  }
}

namespace {

bool SignedAugment(AugmentOp op) { return op >= AugmentOp::kShearX && op <= AugmentOp::kSharpness; }

// Builds one sample's plan: draws every random parameter in op order,
// following torchvision's rules, and tracks the image size.
class PlanBuilder {
 public:
  PlanBuilder(int width, int height, SampleRandom& random)
      : width_(width), height_(height), random_(random) {}

  Status Add(const TransformOp& op, int output_height, int output_width);
  Plan& plan() { return plan_; }

 private:
  Status Push(const Step& step) {
    if (plan_.count >= kMaxPlanSteps) {
      return Status::ResourceExhausted("transform plan has more than " +
                                       std::to_string(kMaxPlanSteps) + " steps");
    }
    plan_.steps[plan_.count++] = step;
    return Status::Ok();
  }
  Status AddResize(int w, int h, Interpolation interpolation);
  Status AddCrop(const Rect& rect) {
    Step step;
    step.kind = Step::Kind::kCrop;
    step.rect = rect;
    width_ = rect.width;
    height_ = rect.height;
    return Push(step);
  }
  Status AddPixel(const PixelStep& pixel) {
    Step step;
    step.kind = Step::Kind::kPixel;
    step.pixel = pixel;
    if (pixel.kind == PixelStep::Kind::kPad) {
      const int64_t w = int64_t{width_} + pixel.sides[0] + pixel.sides[2];
      const int64_t h = int64_t{height_} + pixel.sides[1] + pixel.sides[3];
      if (w * h > kMaxIntermediatePixels) {
        return Status::ResourceExhausted("transform Pad: image too large");
      }
      width_ = static_cast<int>(w);
      height_ = static_cast<int>(h);
    }
    return Push(step);
  }
  Status AddFactor(PixelStep::Kind kind, double value) {
    PixelStep pixel;
    pixel.kind = kind;
    pixel.v[0] = value;
    return AddPixel(pixel);
  }
  Status AddPad(int left, int top, int right, int bottom, const TransformOp& op) {
    PixelStep pixel;
    pixel.kind = PixelStep::Kind::kPad;
    pixel.sides = {left, top, right, bottom};
    pixel.padding_mode = op.padding_mode;
    pixel.fill = FillOf(op.fill);
    return AddPixel(pixel);
  }
  Status AddAffine(double angle, double tx, double ty, double scale, double shear_x, double shear_y,
                   bool center_at_origin, const TransformOp& op) {
    PixelStep pixel;
    pixel.kind = PixelStep::Kind::kAffine;
    pixel.v = {angle, tx, ty, scale, shear_x, shear_y};
    pixel.center_at_origin = center_at_origin;
    pixel.interpolation = op.interpolation;
    pixel.fill = FillOf(op.fill);
    return AddPixel(pixel);
  }
  Status AddRotate(double angle, const TransformOp& op) {
    PixelStep pixel;
    pixel.kind = PixelStep::Kind::kRotate;
    pixel.v[0] = angle;
    pixel.interpolation = op.interpolation;
    pixel.fill = FillOf(op.fill);
    return AddPixel(pixel);
  }
  Status AddRandomCrop(const TransformOp& op);
  Status AddColorJitter(const TransformOp& op);
  Status AddAugment(AugmentOp augment, double magnitude, const TransformOp& op);
  Status AddAutoAugment(const TransformOp& op);
  Status AddErasing(const TransformOp& op, int output_height, int output_width);
  Status AddAugMix(const TransformOp& op);

  Plan plan_;
  int width_;
  int height_;
  SampleRandom& random_;
};

Status PlanBuilder::AddResize(int w, int h, Interpolation interpolation) {
  if (static_cast<int64_t>(w) * h > kMaxIntermediatePixels) {
    return Status::ResourceExhausted("transform would resize a " + std::to_string(width_) + "x" +
                                     std::to_string(height_) + " image to " + std::to_string(w) +
                                     "x" + std::to_string(h));
  }
  Step step;
  step.kind = Step::Kind::kResize;
  step.width = w;
  step.height = h;
  step.interpolation = interpolation;
  width_ = w;
  height_ = h;
  return Push(step);
}

Status PlanBuilder::AddRandomCrop(const TransformOp& op) {
  // torchvision's RandomCrop.forward: padding, then pad_if_needed (both
  // sides of the short axis by the shortfall), then a uniform corner.
  if (!op.padding.empty()) {
    GALLEY_RETURN_IF_ERROR(AddPad(op.padding[0], op.padding[1], op.padding[2], op.padding[3], op));
  }
  const int crop_height = op.size[0];
  const int crop_width = op.size[1];
  if (op.pad_if_needed && width_ < crop_width) {
    const int pad = crop_width - width_;
    GALLEY_RETURN_IF_ERROR(AddPad(pad, 0, pad, 0, op));
  }
  if (op.pad_if_needed && height_ < crop_height) {
    const int pad = crop_height - height_;
    GALLEY_RETURN_IF_ERROR(AddPad(0, pad, 0, pad, op));
  }
  if (height_ < crop_height || width_ < crop_width) {
    return Status::InvalidArgument("transform RandomCrop: required crop size " +
                                   std::to_string(crop_height) + "x" + std::to_string(crop_width) +
                                   " is larger than the input image " + std::to_string(height_) +
                                   "x" + std::to_string(width_) + " (set pad_if_needed)");
  }
  const int y = static_cast<int>(random_.UniformInt(0, height_ - crop_height));
  const int x = static_cast<int>(random_.UniformInt(0, width_ - crop_width));
  return AddCrop({x, y, crop_width, crop_height});
}

Status PlanBuilder::AddColorJitter(const TransformOp& op) {
  // torchvision's ColorJitter.get_params: a uniform permutation of the four
  // adjustments, then each factor uniform in its range.
  std::array<int, 4> order = {0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(order[i], order[random_.UniformInt(0, i)]);
  const std::array<const std::optional<Range>*, 4> ranges = {&op.brightness, &op.contrast,
                                                             &op.saturation, &op.hue};
  std::array<double, 4> factors{};
  for (int i = 0; i < 4; ++i) {
    if (*ranges[i]) factors[i] = UniformF32(random_, (**ranges[i])[0], (**ranges[i])[1]);
  }
  constexpr PixelStep::Kind kKinds[4] = {PixelStep::Kind::kBrightness, PixelStep::Kind::kContrast,
                                         PixelStep::Kind::kSaturation, PixelStep::Kind::kHue};
  for (int i : order) {
    if (*ranges[i]) GALLEY_RETURN_IF_ERROR(AddFactor(kKinds[i], factors[i]));
  }
  return Status::Ok();
}

Status PlanBuilder::AddAugment(AugmentOp augment, double magnitude, const TransformOp& op) {
  switch (augment) {
    case AugmentOp::kIdentity:
      return Status::Ok();
    case AugmentOp::kShearX:
      return AddAffine(0, 0, 0, 1, Degrees(std::atan(magnitude)), 0, true, op);
    case AugmentOp::kShearY:
      return AddAffine(0, 0, 0, 1, 0, Degrees(std::atan(magnitude)), true, op);
    case AugmentOp::kTranslateX:
      return AddAffine(0, std::trunc(magnitude), 0, 1, 0, 0, false, op);
    case AugmentOp::kTranslateY:
      return AddAffine(0, 0, std::trunc(magnitude), 1, 0, 0, false, op);
    case AugmentOp::kRotate:
      return AddRotate(magnitude, op);
    case AugmentOp::kBrightness:
      return AddFactor(PixelStep::Kind::kBrightness, 1.0 + magnitude);
    case AugmentOp::kColor:
      return AddFactor(PixelStep::Kind::kSaturation, 1.0 + magnitude);
    case AugmentOp::kContrast:
      return AddFactor(PixelStep::Kind::kContrast, 1.0 + magnitude);
    case AugmentOp::kSharpness:
      return AddFactor(PixelStep::Kind::kSharpness, 1.0 + magnitude);
    case AugmentOp::kPosterize:
      return AddFactor(PixelStep::Kind::kPosterize, std::trunc(magnitude));
    case AugmentOp::kSolarize:
      return AddFactor(PixelStep::Kind::kSolarize, magnitude);
    case AugmentOp::kAutoContrast:
      return AddFactor(PixelStep::Kind::kAutoContrast, 0);
    case AugmentOp::kEqualize:
      return AddFactor(PixelStep::Kind::kEqualize, 0);
    case AugmentOp::kInvert:
      return AddFactor(PixelStep::Kind::kInvert, 0);
  }
  return Status::Ok();
}

Status PlanBuilder::AddAutoAugment(const TransformOp& op) {
  auto magnitude_of = [&](AugmentOp augment, int bins, int bin) -> Result<double> {
    return AugmentMagnitude(op.kind, static_cast<int>(augment), bins, bin, width_, height_);
  };
  if (op.kind == OpKind::kAutoAugment) {
    // AutoAugment.forward: a uniform sub-policy, two uniform probabilities
    // and two fair signs, drawn up front; step i runs when prob <= p.
    const auto& policies = Policies(op.policy);
    const SubPolicy& sub =
        policies[random_.UniformInt(0, static_cast<int64_t>(policies.size()) - 1)];
    const double probs[2] = {random_.Uniform(0, 1), random_.Uniform(0, 1)};
    const bool negative[2] = {random_.UniformInt(0, 1) == 0, random_.UniformInt(0, 1) == 0};
    for (int i = 0; i < 2; ++i) {
      if (!(probs[i] <= sub[i].p)) continue;
      double magnitude = 0;
      if (sub[i].magnitude >= 0) {
        GALLEY_ASSIGN_OR_RETURN(magnitude, magnitude_of(sub[i].op, 10, sub[i].magnitude));
      }
      if (SignedAugment(sub[i].op) && negative[i]) magnitude = -magnitude;
      GALLEY_RETURN_IF_ERROR(AddAugment(sub[i].op, magnitude, op));
    }
    return Status::Ok();
  }
  const bool wide = op.kind == OpKind::kTrivialAugmentWide;
  const int rounds = wide ? 1 : op.num_ops;
  for (int round = 0; round < rounds; ++round) {
    // RandAugment: a uniform op at the fixed magnitude bin; TrivialAugment:
    // a uniform op at a uniform bin. Signed ops flip sign with chance 1/2.
    const auto augment = static_cast<AugmentOp>(random_.UniformInt(0, kRandAugmentOps - 1));
    const int bin =
        wide ? static_cast<int>(random_.UniformInt(0, op.num_magnitude_bins - 1)) : op.magnitude;
    GALLEY_ASSIGN_OR_RETURN(double magnitude, magnitude_of(augment, op.num_magnitude_bins, bin));
    if (SignedAugment(augment) && random_.UniformInt(0, 1) == 1) magnitude = -magnitude;
    GALLEY_RETURN_IF_ERROR(AddAugment(augment, magnitude, op));
  }
  return Status::Ok();
}

Status PlanBuilder::AddErasing(const TransformOp& op, int output_height, int output_width) {
  // torchvision's RandomErasing: erase with probability p; ten tries at an
  // area fraction U(scale) and log-uniform ratio, h = round(sqrt(area *
  // ratio)), w = round(sqrt(area / ratio)), kept if strictly smaller than
  // the image; otherwise nothing is erased.
  if (!(random_.Uniform(0, 1) < op.p)) return Status::Ok();
  const double area = static_cast<double>(output_height) * output_width;
  const double log_low = std::log(op.ratio[0]);
  const double log_high = std::log(op.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * random_.Uniform(op.scale[0], op.scale[1]);
    const double aspect = std::exp(random_.Uniform(log_low, log_high));
    const int h = RoundHalfEven(std::sqrt(erase_area * aspect));
    const int w = RoundHalfEven(std::sqrt(erase_area / aspect));
    if (!(h < output_height && w < output_width)) continue;
    Erasure erasure;
    erasure.random = !op.erase_value.has_value();
    if (erasure.random) {
      erasure.noise_seed = random_.NextBits();
    } else {
      for (int c = 0; c < 3; ++c) erasure.value[c] = static_cast<float>((*op.erase_value)[c]);
    }
    erasure.y = static_cast<int>(random_.UniformInt(0, output_height - h));
    erasure.x = static_cast<int>(random_.UniformInt(0, output_width - w));
    erasure.width = w;
    erasure.height = h;
    if (plan_.erasure_count >= kMaxErasures) {
      return Status::ResourceExhausted("transform: too many RandomErasing ops");
    }
    plan_.erasures[plan_.erasure_count++] = erasure;
    return Status::Ok();
  }
  return Status::Ok();
}

Status PlanBuilder::AddAugMix(const TransformOp& op) {
  if (plan_.augmix_count >= kMaxAugMixes) {
    return Status::ResourceExhausted("transform: too many AugMix ops in one sample");
  }
  AugMixPlan& entry = plan_.augmixes[plan_.augmix_count];
  entry = AugMixPlan{};
  entry.bilinear = op.interpolation == Interpolation::kBilinear;
  if (op.tensor_fill) {
    entry.fill = std::array<float, 3>{static_cast<float>((*op.tensor_fill)[0]),
                                      static_cast<float>((*op.tensor_fill)[1]),
                                      static_cast<float>((*op.tensor_fill)[2])};
  }
  // AugMix.forward's draws, in its order: m ~ Dirichlet(alpha, alpha) (the
  // original's weight and the chains' share), the chains' Dirichlet(alpha,
  // ..., alpha) weights times m1 in float32, then per chain its depth (1..3
  // unless chain_depth > 0) and per step a uniform op, a uniform magnitude bin
  // below severity and, for signed ops, a fair sign.
  AugMixDraw& draw = entry.draw;
  const double g0 = random_.Gamma(op.alpha), g1 = random_.Gamma(op.alpha);
  draw.original_weight = static_cast<float>(g0 / (g0 + g1));
  const auto share = static_cast<float>(g1 / (g0 + g1));
  draw.width = op.mixture_width;
  std::array<double, kMaxAugMixWidth> gammas{};
  double total = 0;
  for (int i = 0; i < draw.width; ++i) total += gammas[i] = random_.Gamma(op.alpha);
  for (int i = 0; i < draw.width; ++i) {
    draw.weights[i] = static_cast<float>(gammas[i] / total) * share;
  }
  const int ops = op.all_ops ? kAugMixAllOps : kAugMixBasicOps;
  for (int i = 0; i < draw.width; ++i) {
    draw.depths[i] =
        op.chain_depth > 0 ? op.chain_depth : static_cast<int>(random_.UniformInt(1, 3));
    for (int d = 0; d < draw.depths[i]; ++d) {
      AugMixStep& step = draw.steps[i][d];
      step.op = static_cast<AugMixOp>(random_.UniformInt(0, ops - 1));
      step.magnitude = 0;
      if (step.op != AugMixOp::kAutoContrast && step.op != AugMixOp::kEqualize) {
        const int bin = static_cast<int>(random_.UniformInt(0, op.severity - 1));
        GALLEY_ASSIGN_OR_RETURN(step.magnitude, AugMixMagnitude(step.op, bin, width_, height_));
      }
      const bool is_signed = step.op <= AugMixOp::kRotate || step.op >= AugMixOp::kBrightness;
      if (is_signed && random_.UniformInt(0, 1) == 1) step.magnitude = -step.magnitude;
    }
  }
  PixelStep pixel;
  pixel.kind = PixelStep::Kind::kAugMix;
  pixel.sides[0] = plan_.augmix_count++;
  pixel.interpolation = op.interpolation;
  return AddPixel(pixel);
}

Status PlanBuilder::Add(const TransformOp& op, int output_height, int output_width) {
  switch (op.kind) {
    case OpKind::kRandomResizedCrop:
      GALLEY_RETURN_IF_ERROR(AddCrop(RandomResizedCropRect(width_, height_, op, random_)));
      return AddResize(op.size[1], op.size[0], op.interpolation);
    case OpKind::kResize:
      if (op.size.size() == 2) return AddResize(op.size[1], op.size[0], op.interpolation);
      {
        // _compute_resized_output_size: the shorter side becomes size, the
        // longer one int(size * long / short), truncated.
        const int64_t shorter = std::min(width_, height_);
        const int64_t longer = std::max(width_, height_);
        const int new_short = op.size[0];
        const double new_long_exact = static_cast<double>(new_short * longer) / shorter;
        if (new_long_exact > static_cast<double>(kMaxIntermediatePixels)) {
          return Status::ResourceExhausted("transform Resize: image too elongated");
        }
        const int new_long = static_cast<int>(new_long_exact);
        const bool portrait = width_ <= height_;
        return AddResize(portrait ? new_short : new_long, portrait ? new_long : new_short,
                         op.interpolation);
      }
    case OpKind::kCenterCrop:
      return AddCrop(CenterCropRect(width_, height_, op.size[0], op.size[1]));
    case OpKind::kRandomHorizontalFlip:
      // torchvision: flip when torch.rand(1) < p.
      if (random_.Uniform(0.0, 1.0) < op.p) {
        Step step;
        step.kind = Step::Kind::kFlip;
        return Push(step);
      }
      return Status::Ok();
    case OpKind::kRandomVerticalFlip:
      if (random_.Uniform(0.0, 1.0) < op.p) return AddFactor(PixelStep::Kind::kVerticalFlip, 0);
      return Status::Ok();
    case OpKind::kRandomCrop:
      return AddRandomCrop(op);
    case OpKind::kPad:
      return AddPad(op.padding[0], op.padding[1], op.padding[2], op.padding[3], op);
    case OpKind::kColorJitter:
      return AddColorJitter(op);
    case OpKind::kGrayscale:
      return AddFactor(PixelStep::Kind::kGrayscale, 0);
    case OpKind::kRandomGrayscale:
      if (random_.Uniform(0.0, 1.0) < op.p) return AddFactor(PixelStep::Kind::kGrayscale, 0);
      return Status::Ok();
    case OpKind::kGaussianBlur: {
      const double sigma = UniformF32(random_, op.sigma[0], op.sigma[1]);
      PixelStep pixel;
      pixel.kind = PixelStep::Kind::kBlur;
      pixel.v[0] = pixel.v[1] = sigma;
      pixel.sides = {op.kernel_size[0], op.kernel_size[1], 0, 0};
      return AddPixel(pixel);
    }
    case OpKind::kRandomRotation:
      return AddRotate(UniformF32(random_, op.degrees[0], op.degrees[1]), op);
    case OpKind::kRandomAffine: {
      // RandomAffine.get_params: angle, translation (rounded half to even),
      // scale, shear x, shear y, in that order.
      const double angle = UniformF32(random_, op.degrees[0], op.degrees[1]);
      double tx = 0, ty = 0;
      if (op.translate) {
        const double max_dx = (*op.translate)[0] * width_;
        const double max_dy = (*op.translate)[1] * height_;
        tx = RoundHalfEven(UniformF32(random_, -max_dx, max_dx));
        ty = RoundHalfEven(UniformF32(random_, -max_dy, max_dy));
      }
      const double scale =
          op.affine_scale ? UniformF32(random_, (*op.affine_scale)[0], (*op.affine_scale)[1]) : 1.0;
      const double shear_x =
          op.shear_x ? UniformF32(random_, (*op.shear_x)[0], (*op.shear_x)[1]) : 0.0;
      const double shear_y =
          op.shear_y ? UniformF32(random_, (*op.shear_y)[0], (*op.shear_y)[1]) : 0.0;
      return AddAffine(angle, tx, ty, scale, shear_x, shear_y, false, op);
    }
    case OpKind::kRandomApply:
      // torchvision: skip when p < torch.rand(1).
      if (op.p < random_.Uniform(0.0, 1.0)) return Status::Ok();
      for (const TransformOp& child : op.children) {
        GALLEY_RETURN_IF_ERROR(Add(child, output_height, output_width));
      }
      return Status::Ok();
    case OpKind::kRandomChoice: {
      size_t chosen = 0;
      if (op.weights.empty()) {
        chosen = static_cast<size_t>(
            random_.UniformInt(0, static_cast<int64_t>(op.children.size()) - 1));
      } else {
        double total = 0;
        for (double w : op.weights) total += w;
        double target = random_.Uniform(0.0, total);
        chosen = op.weights.size() - 1;
        for (size_t i = 0; i < op.weights.size(); ++i) {
          if (target < op.weights[i]) {
            chosen = i;
            break;
          }
          target -= op.weights[i];
        }
      }
      return Add(op.children[chosen], output_height, output_width);
    }
    case OpKind::kRandomOrder: {
      std::array<size_t, kMaxNestedOps> order{};
      const size_t n = op.children.size();
      for (size_t i = 0; i < n; ++i) order[i] = i;
      for (size_t i = n; i > 1; --i) {
        std::swap(order[i - 1], order[random_.UniformInt(0, static_cast<int64_t>(i) - 1)]);
      }
      for (size_t i = 0; i < n; ++i) {
        GALLEY_RETURN_IF_ERROR(Add(op.children[order[i]], output_height, output_width));
      }
      return Status::Ok();
    }
    case OpKind::kAutoAugment:
    case OpKind::kRandAugment:
    case OpKind::kTrivialAugmentWide:
      return AddAutoAugment(op);
    case OpKind::kRandomErasing:
      return AddErasing(op, output_height, output_width);
    case OpKind::kAugMix:
      return AddAugMix(op);
  }
  return Status::Ok();
}

Result<Plan> MakePlan(const TransformSpec& spec, int width, int height, SampleRandom& random) {
  PlanBuilder builder(width, height, random);
  for (const TransformOp& op : spec.ops) {
    GALLEY_RETURN_IF_ERROR(builder.Add(op, spec.output_height, spec.output_width));
  }
  return builder.plan();
}

// Two reusable HWC buffers per thread, used alternately so a step can read
// from one while writing the other.
class Scratch {
 public:
  RgbSpan Take(int width, int height, int avoid) {
    const int index = avoid == 0 ? 1 : 0;
    auto& buffer = buffers_[index];
    const size_t bytes = static_cast<size_t>(width) * height * 3;
    if (buffer.size() < bytes) buffer.resize(bytes);
    taken_ = index;
    return RgbSpan::Packed(buffer.data(), width, height);
  }
  int taken() const { return taken_; }

 private:
  std::array<std::vector<uint8_t>, 2> buffers_;
  int taken_ = -1;
};

// The image between steps: a view (often a ROI of the source, no copy), the
// pending horizontal flip, and, for scaled decodes and decoded regions, where
// the logical image lies in the stored pixels (origin and pixels per logical
// pixel) until the first crop or resize absorbs the difference.
struct Current {
  RgbSpan pixels;   // the source's pixels are viewed writable but never written
  int buffer = -1;  // scratch buffer holding pixels, or -1 for the source
  bool flipped = false;
  int logical_width = 0;
  int logical_height = 0;
  double origin_x = 0.0;
  double origin_y = 0.0;
  double scale_x = 1.0;
  double scale_y = 1.0;
  bool scaled() const { return scale_x != 1.0 || scale_y != 1.0; }
};

void Crop(Rect rect, Current& current, Scratch& scratch) {
  // A flip is applied at the end, so a crop of the flipped image is the
  // mirrored crop of the unflipped one.
  if (current.flipped) rect.x = current.logical_width - rect.x - rect.width;
  current.logical_width = rect.width;
  current.logical_height = rect.height;
  // A scaled or offset source maps logical coordinates to stored pixels.
  if (current.scaled() || current.origin_x != 0.0 || current.origin_y != 0.0) {
    const double x0 = current.origin_x + rect.x * current.scale_x;
    const double y0 = current.origin_y + rect.y * current.scale_y;
    const double x1 = current.origin_x + (rect.x + rect.width) * current.scale_x;
    const double y1 = current.origin_y + (rect.y + rect.height) * current.scale_y;
    constexpr double kSlack = 1e-6;  // rounding in the scale itself
    if (x0 >= 0 && y0 >= 0 && x1 <= current.pixels.width + kSlack &&
        y1 <= current.pixels.height + kSlack) {
      // Inside the image: keep the fractional crop for the resize's box,
      // which samples exactly the region the full-size crop covers.
      const int ix0 = static_cast<int>(std::floor(x0));
      const int iy0 = static_cast<int>(std::floor(y0));
      const int ix1 = std::clamp(static_cast<int>(std::ceil(x1)), ix0 + 1, current.pixels.width);
      const int iy1 = std::clamp(static_cast<int>(std::ceil(y1)), iy0 + 1, current.pixels.height);
      current.pixels = current.pixels.Window(ix0, iy0, ix1 - ix0, iy1 - iy0);
      current.origin_x = x0 - ix0;
      current.origin_y = y0 - iy0;
      return;
    }
    // Padding on a scaled image or region: whole stored pixels, within one of
    // the crop. (A region reaches the image edge wherever the crop pads.)
    const int ix0 = static_cast<int>(std::lround(x0));
    const int iy0 = static_cast<int>(std::lround(y0));
    rect = {ix0, iy0, std::max(1, static_cast<int>(std::lround(x1)) - ix0),
            std::max(1, static_cast<int>(std::lround(y1)) - iy0)};
    current.origin_x = current.origin_y = 0.0;
    current.scale_x = static_cast<double>(rect.width) / current.logical_width;
    current.scale_y = static_cast<double>(rect.height) / current.logical_height;
  }
  const int inside_x0 = std::max(rect.x, 0);
  const int inside_y0 = std::max(rect.y, 0);
  const int inside_x1 = std::min(rect.x + rect.width, current.pixels.width);
  const int inside_y1 = std::min(rect.y + rect.height, current.pixels.height);
  if (inside_x0 == rect.x && inside_y0 == rect.y && inside_x1 == rect.x + rect.width &&
      inside_y1 == rect.y + rect.height) {
    current.pixels = current.pixels.Window(rect.x, rect.y, rect.width, rect.height);
    return;
  }
  const RgbSpan padded = scratch.Take(rect.width, rect.height, current.buffer);
  FillPixels(padded, Fill{0, 0, 0});
  if (inside_x0 < inside_x1 && inside_y0 < inside_y1) {
    const int width = inside_x1 - inside_x0, height = inside_y1 - inside_y0;
    CopyPixels(current.pixels.Window(inside_x0, inside_y0, width, height),
               padded.Window(inside_x0 - rect.x, inside_y0 - rect.y, width, height));
  }
  current.pixels = padded;
  current.buffer = scratch.taken();
}

// The resampling geometry of resizing the whole logical image to
// width x height: the box is the logical image's place in the stored pixels.
ResizeGeometry ResizeOf(const Current& current, int width, int height) {
  ResizeGeometry geometry = ResizeGeometry::Whole(current.pixels, width, height);
  if (current.scaled() || current.origin_x != 0.0 || current.origin_y != 0.0) {
    geometry.box_x0 = current.origin_x;
    geometry.box_y0 = current.origin_y;
    geometry.box_x1 = std::min<double>(current.pixels.width,
                                       current.origin_x + current.logical_width * current.scale_x);
    geometry.box_y1 = std::min<double>(current.pixels.height,
                                       current.origin_y + current.logical_height * current.scale_y);
  }
  return geometry;
}

ResampleFilter FilterOf(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kBicubic:
      return ResampleFilter::kBicubic;
    case Interpolation::kBox:
      return ResampleFilter::kBox;
    case Interpolation::kHamming:
      return ResampleFilter::kHamming;
    case Interpolation::kLanczos:
      return ResampleFilter::kLanczos;
    default:
      return ResampleFilter::kBilinear;
  }
}

Status Resize(const Step& step, Current& current, Scratch& scratch) {
  ResizeGeometry geometry = ResizeOf(current, step.width, step.height);
  current.logical_width = step.width;
  current.logical_height = step.height;
  current.origin_x = current.origin_y = 0.0;
  current.scale_x = current.scale_y = 1.0;
  const RgbSpan resized = scratch.Take(step.width, step.height, current.buffer);
  // Horizontal flips commute with the symmetric filters, so a pending flip
  // stays pending; Run applies it first for the others.
  if (step.interpolation == Interpolation::kNearest) {
    // PIL's NEAREST resize is its scale-only affine transform: a point
    // sample at box0 + (x + 0.5) * scale, positions accumulated in double.
    const std::array<double, 6> matrix = {(geometry.box_x1 - geometry.box_x0) / step.width,
                                          0.0,
                                          geometry.box_x0,
                                          0.0,
                                          (geometry.box_y1 - geometry.box_y0) / step.height,
                                          geometry.box_y0};
    AffineWarp(current.pixels, resized, matrix, WarpInterpolation::kNearest, Fill{});
  } else {
    ResampleOptions options;
    options.filter = FilterOf(step.interpolation);
    GALLEY_RETURN_IF_ERROR(
        ResizeAntialiased(current.pixels, geometry, options, resized.data, resized.stride));
  }
  current.pixels = resized;
  current.buffer = scratch.taken();
  return Status::Ok();
}

WarpInterpolation WarpOf(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kBilinear:
      return WarpInterpolation::kBilinear;
    case Interpolation::kBicubic:
      return WarpInterpolation::kBicubic;
    default:
      break;
  }
  return WarpInterpolation::kNearest;
}

PadMode PadModeOf(PaddingMode mode) {
  switch (mode) {
    case PaddingMode::kEdge:
      return PadMode::kEdge;
    case PaddingMode::kReflect:
      return PadMode::kReflect;
    case PaddingMode::kSymmetric:
      return PadMode::kSymmetric;
    case PaddingMode::kConstant:
      break;
  }
  return PadMode::kConstant;
}

// Applies a pending horizontal flip to the stored pixels. The logical image
// keeps its place: stored x becomes cols - x, so its origin moves to where
// its right edge was.
void MaterializeFlip(Current& current, Scratch& scratch) {
  if (!current.flipped) return;
  const RgbSpan flipped = scratch.Take(current.pixels.width, current.pixels.height, current.buffer);
  ReorientPixels(current.pixels, flipped, 2);
  current.origin_x =
      current.pixels.width - (current.origin_x + current.logical_width * current.scale_x);
  current.pixels = flipped;
  current.buffer = scratch.taken();
  current.flipped = false;
}

// PIL's nearest is a point sample and its box and lanczos kernels have
// half-open supports: none is mirror-symmetric, so a pending flip must be
// applied before resizing with them.
bool SymmetricFilter(Interpolation interpolation) {
  return interpolation == Interpolation::kBilinear || interpolation == Interpolation::kBicubic ||
         interpolation == Interpolation::kHamming;
}

// Whether an op gives the mirror image for a mirrored input, so a pending
// horizontal flip can stay pending (Pad does, with its sides swapped).
bool CommutesWithFlip(PixelStep::Kind kind) {
  return kind != PixelStep::Kind::kAffine && kind != PixelStep::Kind::kRotate &&
         kind != PixelStep::Kind::kAugMix;
}

// Runs one pixel step on the current image into a scratch buffer.
Status ApplyPixel(PixelStep step, const Plan& plan, Current& current, Scratch& scratch) {
  if (current.scaled() || current.origin_x != 0.0 || current.origin_y != 0.0) {
    return Status::InvalidArgument("pixel ops before the first resize need full-resolution pixels");
  }
  if (!CommutesWithFlip(step.kind)) MaterializeFlip(current, scratch);
  if (step.kind == PixelStep::Kind::kPad && current.flipped) {
    std::swap(step.sides[0], step.sides[2]);
  }
  const RgbSpan src = current.pixels;
  int width = src.width;
  int height = src.height;
  if (step.kind == PixelStep::Kind::kPad) {
    width += step.sides[0] + step.sides[2];
    height += step.sides[1] + step.sides[3];
  }
  const RgbSpan dst = scratch.Take(width, height, current.buffer);
  const double v = step.v[0];
  switch (step.kind) {
    case PixelStep::Kind::kBrightness:
      AdjustBrightness(src, dst, v);
      break;
    case PixelStep::Kind::kContrast:
      AdjustContrast(src, dst, v);
      break;
    case PixelStep::Kind::kSaturation:
      AdjustSaturation(src, dst, v);
      break;
    case PixelStep::Kind::kHue:
      AdjustHue(src, dst, v);
      break;
    case PixelStep::Kind::kSharpness:
      AdjustSharpness(src, dst, v);
      break;
    case PixelStep::Kind::kGrayscale:
      ToGrayscale(src, dst);
      break;
    case PixelStep::Kind::kPosterize:
      Posterize(src, dst, static_cast<int>(v));
      break;
    case PixelStep::Kind::kSolarize:
      Solarize(src, dst, v);
      break;
    case PixelStep::Kind::kAutoContrast:
      AutoContrast(src, dst);
      break;
    case PixelStep::Kind::kEqualize:
      Equalize(src, dst);
      break;
    case PixelStep::Kind::kInvert:
      Invert(src, dst);
      break;
    case PixelStep::Kind::kVerticalFlip:
      VerticalFlip(src, dst);
      break;
    case PixelStep::Kind::kAffine:
      Affine(src, dst, step.v[0], step.v[1], step.v[2], step.v[3], step.v[4], step.v[5],
             WarpOf(step.interpolation), step.fill, step.center_at_origin);
      break;
    case PixelStep::Kind::kRotate:
      Rotate(src, dst, v, WarpOf(step.interpolation), step.fill);
      break;
    case PixelStep::Kind::kBlur:
      GaussianBlur(src, dst, step.sides[0], step.sides[1], step.v[0], step.v[1]);
      break;
    case PixelStep::Kind::kPad:
      PadPixels(src, dst, step.sides[0], step.sides[1], PadModeOf(step.padding_mode), step.fill);
      break;
    case PixelStep::Kind::kAugMix: {
      const AugMixPlan& entry = plan.augmixes[step.sides[0]];
      AugMix(src, dst, entry.draw, entry.bilinear, entry.fill);
      break;
    }
  }
  current.pixels = dst;
  current.buffer = scratch.taken();
  current.logical_width = width;
  current.logical_height = height;
  return Status::Ok();
}

// Writes the plan's erasures into the finished sample.
void Erase(const Plan& plan, const OutputSpec& output, int width, int height, std::byte* dst) {
  const size_t plane = static_cast<size_t>(width) * height;
  const size_t element = output.dtype == DType::kUInt8 ? 1 : sizeof(float);
  for (int e = 0; e < plan.erasure_count; ++e) {
    const Erasure& erasure = plan.erasures[e];
    if (!erasure.random && output.layout == Layout::kNCHW) {
      // A constant per channel: one run of equal elements per row.
      for (int c = 0; c < 3; ++c) {
        const float value = erasure.value[c];
        const auto byte = static_cast<uint8_t>(value);
        for (int y = erasure.y; y < erasure.y + erasure.height; ++y) {
          std::byte* run = dst + (c * plane + static_cast<size_t>(y) * width + erasure.x) * element;
          if (element == 1) {
            std::memset(run, byte, static_cast<size_t>(erasure.width));
            continue;
          }
          for (int x = 0; x < erasure.width; ++x) std::memcpy(run + x * element, &value, element);
        }
      }
      continue;
    }
    SampleRandom noise(erasure.noise_seed, 0, 0);
    // Channel-major like torchvision's tensor, so noise lands per (c, y, x).
    for (int c = 0; c < 3; ++c) {
      for (int y = erasure.y; y < erasure.y + erasure.height; ++y) {
        for (int x = erasure.x; x < erasure.x + erasure.width; ++x) {
          const size_t index = output.layout == Layout::kNCHW
                                   ? c * plane + static_cast<size_t>(y) * width + x
                                   : (static_cast<size_t>(y) * width + x) * 3 + c;
          const float value =
              erasure.random ? static_cast<float>(noise.Normal()) : erasure.value[c];
          if (element == 1) {
            dst[index] = static_cast<std::byte>(static_cast<uint8_t>(value));
          } else {
            std::memcpy(dst + index * element, &value, sizeof(float));
          }
        }
      }
    }
  }
}

// Pixel x of an interleaved row, or pixel width - 1 - x when mirrored, goes
// to planes[c][x].
void SplitChannelsPortable(const uint8_t* rgb, int begin, int width, bool mirrored,
                           const std::array<uint8_t*, 3>& planes) {
  for (int x = begin; x < width; ++x) {
    const uint8_t* pixel = rgb + (mirrored ? width - 1 - x : x) * 3;
    planes[0][x] = pixel[0];
    planes[1][x] = pixel[1];
    planes[2][x] = pixel[2];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// Byte shuffles that gather one channel of 16 pixels (48 bytes, loaded as
// three vectors) into 16 bytes: masks[mirrored][channel][vector].
struct ChannelMasks {
  int8_t masks[2][3][3][16];
};

constexpr ChannelMasks MakeChannelMasks() {
  ChannelMasks result{};
  for (int mirrored = 0; mirrored < 2; ++mirrored) {
    for (int channel = 0; channel < 3; ++channel) {
      for (int part = 0; part < 3; ++part) {
        for (int j = 0; j < 16; ++j) {
          const int pixel = mirrored ? 15 - j : j;
          const int byte = pixel * 3 + channel - part * 16;
          // A mask byte with the top bit set writes zero.
          result.masks[mirrored][channel][part][j] =
              static_cast<int8_t>(byte >= 0 && byte < 16 ? byte : -128);
        }
      }
    }
  }
  return result;
}

constexpr ChannelMasks kChannelMasks = MakeChannelMasks();

[[gnu::target("ssse3")]] void SplitChannelsSsse3(const uint8_t* rgb, int width, bool mirrored,
                                                 const std::array<uint8_t*, 3>& planes) {
  int x = 0;
  for (; x + 16 <= width; x += 16) {
    const uint8_t* src = rgb + (mirrored ? width - 16 - x : x) * 3;
    __m128i parts[3];
    for (int part = 0; part < 3; ++part) {
      parts[part] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * part));
    }
    for (int channel = 0; channel < 3; ++channel) {
      const auto& masks = kChannelMasks.masks[mirrored ? 1 : 0][channel];
      __m128i gathered = _mm_setzero_si128();
      for (int part = 0; part < 3; ++part) {
        const __m128i mask = _mm_loadu_si128(reinterpret_cast<const __m128i*>(masks[part]));
        gathered = _mm_or_si128(gathered, _mm_shuffle_epi8(parts[part], mask));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(planes[channel] + x), gathered);
    }
  }
  SplitChannelsPortable(rgb, x, width, mirrored, planes);
}
#endif

void SplitChannels(const uint8_t* rgb, int width, bool mirrored,
                   const std::array<uint8_t*, 3>& planes) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has_ssse3 = __builtin_cpu_supports("ssse3");
  if (has_ssse3) {
    SplitChannelsSsse3(rgb, width, mirrored, planes);
    return;
  }
#endif
  SplitChannelsPortable(rgb, 0, width, mirrored, planes);
}

#if defined(__x86_64__) && defined(__GNUC__)
// (x / 255 - mean) / std for eight bytes at a time in float32: the same
// operations that built the normalisation table, so the same floats.
[[gnu::target("avx2")]] int NormalizeRowAvx2(const uint8_t* values, int width, float mean,
                                             float std, std::byte* out) {
  const __m256 k255 = _mm256_set1_ps(255.0f), m = _mm256_set1_ps(mean), s = _mm256_set1_ps(std);
  int x = 0;
  for (; x + 8 <= width; x += 8) {
    const __m256 v = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(values + x))));
    _mm256_storeu_ps(reinterpret_cast<float*>(out + x * sizeof(float)),
                     _mm256_div_ps(_mm256_sub_ps(_mm256_div_ps(v, k255), m), s));
  }
  return x;
}
#endif

// Turns interleaved RGB rows of the final image into the sample: NCHW or
// NHWC, uint8 or normalised float32, mirrored when flipped, each byte first
// mapped through `lut` when given (the plan's trailing table ops, folded
// into the write). As a resampler sink it hands out the destination row
// itself when no conversion is needed.
class SampleWriter : public RgbRowSink {
 public:
  SampleWriter(int width, int height, bool flipped, const OutputSpec& output,
               const std::array<std::array<float, 256>, 3>& table, const ChannelLut* lut,
               std::byte* dst, std::vector<uint8_t>& row)
      : width_(width),
        plane_(static_cast<size_t>(width) * height),
        flipped_(flipped),
        layout_(output.layout),
        dtype_(output.dtype),
        table_(&table),
        mean_{static_cast<float>(output.mean[0]), static_cast<float>(output.mean[1]),
              static_cast<float>(output.mean[2])},
        std_{static_cast<float>(output.std[0]), static_cast<float>(output.std[1]),
             static_cast<float>(output.std[2])},
        lut_(lut),
        dst_(dst),
        direct_(!flipped && lut == nullptr && output.layout == Layout::kNHWC &&
                output.dtype == DType::kUInt8) {
    // One interleaved row, then the same row split into channels.
    if (row.size() < static_cast<size_t>(width) * 6) row.resize(static_cast<size_t>(width) * 6);
    row_ = row.data();
    channel_row_ = row_ + static_cast<size_t>(width) * 3;
    if (lut != nullptr && dtype_ == DType::kFloat32) {
      // The normalisation of the looked-up byte: the same floats as writing
      // the table op's output.
      for (int c = 0; c < 3; ++c) {
        for (int v = 0; v < 256; ++v) composed_[c][v] = table[c][(*lut)[c][v]];
      }
      table_ = &composed_;
      lut_ = nullptr;
      computed_ = false;
    }
  }

  uint8_t* Row(int y) override {
    if (direct_) return reinterpret_cast<uint8_t*>(dst_) + static_cast<size_t>(y) * width_ * 3;
    return row_;
  }
  void Done(int y) override {
    if (!direct_) Write(y, row_);
  }

  void Write(int y, const uint8_t* rgb) const {
    if (dtype_ == DType::kUInt8) {
      WriteBytes(y, rgb);
    } else {
      WriteFloats(y, rgb);
    }
  }

 private:
  void WriteBytes(int y, const uint8_t* rgb) const {
    const int w = width_;
    uint8_t* dst = reinterpret_cast<uint8_t*>(dst_);
    if (layout_ == Layout::kNHWC) {
      uint8_t* out = dst + static_cast<size_t>(y) * w * 3;
      if (lut_ != nullptr) {
        const ChannelLut& lut = *lut_;
        for (int x = 0; x < w; ++x) {
          const uint8_t* pixel = rgb + (flipped_ ? w - 1 - x : x) * 3;
          for (int c = 0; c < 3; ++c) out[x * 3 + c] = lut[c][pixel[c]];
        }
      } else if (!flipped_) {
        std::memcpy(out, rgb, static_cast<size_t>(w) * 3);
      } else {
        for (int x = 0; x < w; ++x) std::memcpy(out + x * 3, rgb + (w - 1 - x) * 3, 3);
      }
      return;
    }
    uint8_t* r = dst + static_cast<size_t>(y) * w;
    const std::array<uint8_t*, 3> planes = {r, r + plane_, r + 2 * plane_};
    SplitChannels(rgb, w, flipped_, planes);
    if (lut_ != nullptr) {
      for (int c = 0; c < 3; ++c) {
        const auto& table = (*lut_)[c];
        for (int x = 0; x < w; ++x) planes[c][x] = table[planes[c][x]];
      }
    }
  }

  void WriteFloats(int y, const uint8_t* rgb) const {
    // memcpy per value: dst need not be 4-byte aligned, and compilers turn
    // this into plain stores.
    auto store = [](std::byte* at, float value) { std::memcpy(at, &value, sizeof(float)); };
    const size_t row_start = static_cast<size_t>(y) * width_;
    const int step = flipped_ ? -3 : 3;
    const uint8_t* first = rgb + (flipped_ ? width_ - 1 : 0) * 3;
    if (layout_ == Layout::kNCHW) {
      // Channels split first: each plane is then one table and one run of
      // contiguous stores.
      uint8_t* channels = channel_row_;
      SplitChannels(rgb, width_, flipped_, {channels, channels + width_, channels + 2 * width_});
      for (int c = 0; c < 3; ++c) {
        std::byte* out = dst_ + (c * plane_ + row_start) * sizeof(float);
        const uint8_t* values = channels + c * width_;
        const auto& table = (*table_)[c];
        int x = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        static const bool has_avx2 = __builtin_cpu_supports("avx2");
        if (computed_ && has_avx2) x = NormalizeRowAvx2(values, width_, mean_[c], std_[c], out);
#endif
        for (; x < width_; ++x) store(out + x * sizeof(float), table[values[x]]);
      }
      return;
    }
    std::byte* out = dst_ + row_start * 3 * sizeof(float);
    for (int x = 0; x < width_; ++x, first += step) {
      for (int c = 0; c < 3; ++c) {
        store(out + (x * 3 + c) * sizeof(float), (*table_)[c][first[c]]);
      }
    }
  }

  int width_;
  size_t plane_;
  bool flipped_;
  Layout layout_;
  DType dtype_;
  const std::array<std::array<float, 256>, 3>* table_;
  std::array<float, 3> mean_, std_;
  bool computed_ = true;  // float NCHW without a LUT: computed rather than looked up
  std::array<std::array<float, 256>, 3> composed_{};  // float output through a LUT
  const ChannelLut* lut_;                             // uint8 output only
  std::byte* dst_;
  bool direct_;
  uint8_t* row_ = nullptr;
  uint8_t* channel_row_ = nullptr;  // float NCHW: one row split into channels
};

// Where the output lies in the result of the last resize, when only that
// window needs computing (FuseAfterResize).
struct FusedOutput {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  bool flipped = false;
};

// Whether a plan step is a per-channel table (LUT) op, and whether its table
// depends on the image's statistics.
bool IsTableStep(const Step& step) {
  if (step.kind != Step::Kind::kPixel) return false;
  switch (step.pixel.kind) {
    case PixelStep::Kind::kBrightness:
    case PixelStep::Kind::kContrast:
    case PixelStep::Kind::kPosterize:
    case PixelStep::Kind::kSolarize:
    case PixelStep::Kind::kAutoContrast:
    case PixelStep::Kind::kEqualize:
    case PixelStep::Kind::kInvert:
      return true;
    default:
      return false;
  }
}

bool TableReadsImage(const Step& step) {
  return step.pixel.kind == PixelStep::Kind::kContrast ||
         step.pixel.kind == PixelStep::Kind::kAutoContrast ||
         step.pixel.kind == PixelStep::Kind::kEqualize;
}

// The table a table step applies to `image`.
ChannelLut TableOf(const PixelStep& step, const RgbView& image) {
  switch (step.kind) {
    case PixelStep::Kind::kBrightness:
      return BrightnessLut(step.v[0]);
    case PixelStep::Kind::kContrast:
      return ContrastLut(image, step.v[0]);
    case PixelStep::Kind::kPosterize:
      return PosterizeLut(static_cast<int>(step.v[0]));
    case PixelStep::Kind::kSolarize:
      return SolarizeLut(step.v[0]);
    case PixelStep::Kind::kAutoContrast:
      return AutoContrastLut(image);
    case PixelStep::Kind::kEqualize:
      return EqualizeLut(image);
    default:
      return InvertLut();
  }
}

// The plan's last steps whose tables fold into the output write: the
// longest suffix of table steps and flips (a per-pixel table commutes with a
// flip) in which only the first table step may read the image, since a later
// one would read the image the earlier tables made. Returns where it starts
// (plan.count when there is nothing to fold).
int FoldedTail(const Plan& plan) {
  int start = plan.count;
  while (start > 0 &&
         (IsTableStep(plan.steps[start - 1]) || plan.steps[start - 1].kind == Step::Kind::kFlip)) {
    --start;
  }
  // A table step that reads the image starts the tail; table steps before
  // it run as their own pass.
  for (int i = plan.count - 1; i >= start; --i) {
    if (IsTableStep(plan.steps[i]) && TableReadsImage(plan.steps[i])) return i;
  }
  return start;
}

// The folded tail's tables composed in plan order; `image` is the image
// the tail starts from (read by its first step, if that reads the image).
ChannelLut ComposeTail(const Plan& plan, int tail, const RgbView& image) {
  ChannelLut composed;
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) composed[c][v] = static_cast<uint8_t>(v);
  }
  for (int i = tail; i < plan.count; ++i) {
    if (!IsTableStep(plan.steps[i])) continue;
    const ChannelLut next = TableOf(plan.steps[i].pixel, image);
    for (int c = 0; c < 3; ++c) {
      for (int v = 0; v < 256; ++v) composed[c][v] = next[c][composed[c][v]];
    }
  }
  return composed;
}

// Whether the folded tail has table steps (not only flips), and whether one
// of them reads the image (then the image must exist before the write).
bool TailHasTables(const Plan& plan, int tail) {
  for (int i = tail; i < plan.count; ++i) {
    if (IsTableStep(plan.steps[i])) return true;
  }
  return false;
}
bool TailReadsImage(const Plan& plan, int tail) {
  return tail < plan.count && IsTableStep(plan.steps[tail]) && TableReadsImage(plan.steps[tail]);
}

// Where the output lies in the result of plan step `resize`, when every
// later step is a flip, a crop inside the image or a table step of a folded
// tail starting at `tail` that reads no image: then only that window of the
// resize needs computing, written straight into the sample.
bool FuseAfterResize(const Plan& plan, int resize, int tail, bool flipped, FusedOutput& fused) {
  const Step& step = plan.steps[resize];
  fused = {0, 0, step.width, step.height, flipped};
  if (TailReadsImage(plan, tail)) return false;
  for (int i = resize + 1; i < plan.count; ++i) {
    const Step& next = plan.steps[i];
    if (next.kind == Step::Kind::kFlip) {
      fused.flipped = !fused.flipped;
      continue;
    }
    if (i >= tail) continue;  // a table folded into the write
    if (next.kind != Step::Kind::kCrop) return false;
    Rect rect = next.rect;
    if (fused.flipped) rect.x = fused.width - rect.x - rect.width;
    if (rect.x < 0 || rect.y < 0 || rect.x + rect.width > fused.width ||
        rect.y + rect.height > fused.height) {
      return false;  // padding: take the general path
    }
    fused.x += rect.x;
    fused.y += rect.y;
    fused.width = rect.width;
    fused.height = rect.height;
  }
  return true;
}
}  // namespace

TransformPipeline::TransformPipeline(TransformSpec spec) : spec_(std::move(spec)) {
  signature_ = TransformSpecToJson(spec_).dump();
  for (int c = 0; c < 3; ++c) {
    const float mean = static_cast<float>(spec_.output.mean[c]);
    const float std = static_cast<float>(spec_.output.std[c]);
    for (int v = 0; v < 256; ++v) {
      normalized_[c][v] = (static_cast<float>(v) / 255.0f - mean) / std;
    }
  }
}

Result<TransformPipeline> TransformPipeline::FromJson(const nlohmann::json& spec) {
  GALLEY_ASSIGN_OR_RETURN(TransformSpec parsed, ParseTransformSpec(spec));
  return TransformPipeline(std::move(parsed));
}

nlohmann::json TransformPipeline::ToJson() const { return TransformSpecToJson(spec_); }

size_t TransformPipeline::sample_bytes() const {
  const size_t element = spec_.output.dtype == DType::kUInt8 ? 1 : sizeof(float);
  return size_t{3} * spec_.output_height * spec_.output_width * element;
}

bool TransformPipeline::is_random() const {
  return std::any_of(spec_.ops.begin(), spec_.ops.end(), [](const TransformOp& op) {
    switch (op.kind) {
      case OpKind::kResize:
      case OpKind::kCenterCrop:
      case OpKind::kPad:
      case OpKind::kGrayscale:
        return false;
      case OpKind::kRandomHorizontalFlip:
      case OpKind::kRandomVerticalFlip:
      case OpKind::kRandomGrayscale:
        return op.p > 0 && op.p < 1;
      default:
        return true;
    }
  });
}

Status TransformPipeline::Apply(const RgbImage& src, uint64_t seed, uint64_t epoch, uint64_t item,
                                std::span<std::byte> dst) const {
  return Apply(src.pixels, src.width, src.height, seed, epoch, item, dst);
}

Status TransformPipeline::Apply(std::span<const uint8_t> pixels, int width, int height,
                                uint64_t seed, uint64_t epoch, uint64_t item,
                                std::span<std::byte> dst) const {
  return Run(pixels, width, height, width, height, false, 0, 0, seed, epoch, item, dst);
}

Status TransformPipeline::ApplyScaled(const RgbImage& scaled, int full_width, int full_height,
                                      uint64_t seed, uint64_t epoch, uint64_t item,
                                      std::span<std::byte> dst) const {
  if (full_width <= 0 || full_height <= 0 || full_width < scaled.width ||
      full_height < scaled.height) {
    return Status::InvalidArgument("ApplyScaled: full size must cover the scaled image");
  }
  return Run(scaled.pixels, scaled.width, scaled.height, full_width, full_height, true, 0, 0, seed,
             epoch, item, dst);
}

bool TransformPipeline::SupportsRegion() const {
  for (const TransformOp& op : spec_.ops) {
    if (op.kind == OpKind::kRandomHorizontalFlip) continue;
    return op.kind == OpKind::kRandomResizedCrop || op.kind == OpKind::kCenterCrop;
  }
  return false;
}

Result<SourceRect> TransformPipeline::RegionWindow(int source_width, int source_height,
                                                   uint64_t seed, uint64_t epoch,
                                                   uint64_t item) const {
  if (!SupportsRegion()) {
    return Status::InvalidArgument("RegionWindow: the pipeline does not start with a crop");
  }
  if (source_width <= 0 || source_height <= 0) {
    return Status::InvalidArgument("RegionWindow: source size must be positive");
  }
  SampleRandom random(seed, epoch, item);
  GALLEY_ASSIGN_OR_RETURN(const Plan plan, MakePlan(spec_, source_width, source_height, random));
  bool flipped = false;
  for (int i = 0; i < plan.count; ++i) {
    const Step& step = plan.steps[i];
    if (step.kind == Step::Kind::kFlip) {
      flipped = !flipped;
      continue;
    }
    // SupportsRegion: the first step that is not a flip is the crop.
    const Rect& rect = step.rect;
    const int x = flipped ? source_width - rect.x - rect.width : rect.x;
    const int x0 = std::clamp(x, 0, source_width);
    const int y0 = std::clamp(rect.y, 0, source_height);
    const int x1 = std::clamp(x + rect.width, 0, source_width);
    const int y1 = std::clamp(rect.y + rect.height, 0, source_height);
    return SourceRect{x0, y0, x1 - x0, y1 - y0};
  }
  return Status::Internal("RegionWindow: the plan has no crop");
}

Status TransformPipeline::ApplyRegion(const RgbImage& region, int offset_x, int offset_y,
                                      int full_width, int full_height, uint64_t seed,
                                      uint64_t epoch, uint64_t item,
                                      std::span<std::byte> dst) const {
  if (!SupportsRegion()) {
    return Status::InvalidArgument("ApplyRegion: the pipeline does not start with a crop");
  }
  if (offset_x < 0 || offset_y < 0 || offset_x + region.width > full_width ||
      offset_y + region.height > full_height) {
    return Status::InvalidArgument("ApplyRegion: region lies outside the full image");
  }
  // A crop that strays outside the region would read zeros where the full
  // image has pixels, so the region must hold the whole window.
  GALLEY_ASSIGN_OR_RETURN(const SourceRect window,
                          RegionWindow(full_width, full_height, seed, epoch, item));
  if (window.x < offset_x || window.y < offset_y ||
      window.x + window.width > offset_x + region.width ||
      window.y + window.height > offset_y + region.height) {
    return Status::InvalidArgument("ApplyRegion: region does not contain the sample's window");
  }
  return Run(region.pixels, region.width, region.height, full_width, full_height, false, offset_x,
             offset_y, seed, epoch, item, dst);
}

Status TransformPipeline::Run(std::span<const uint8_t> pixels, int width, int height,
                              int logical_width, int logical_height, bool scaled, int offset_x,
                              int offset_y, uint64_t seed, uint64_t epoch, uint64_t item,
                              std::span<std::byte> dst) const {
  if (width <= 0 || height <= 0 || pixels.size() != static_cast<size_t>(width) * height * 3) {
    return Status::InvalidArgument("transform input is not a well-formed RGB image");
  }
  if (dst.size() != sample_bytes()) {
    return Status::InvalidArgument("transform output buffer has " + std::to_string(dst.size()) +
                                   " bytes, the sample needs " + std::to_string(sample_bytes()));
  }
  SampleRandom random(seed, epoch, item);
  GALLEY_ASSIGN_OR_RETURN(const Plan plan, MakePlan(spec_, logical_width, logical_height, random));

  thread_local Scratch scratch;
  thread_local std::vector<uint8_t> row;
  Current current;
  current.pixels = RgbSpan::Packed(const_cast<uint8_t*>(pixels.data()), width, height);
  current.logical_width = logical_width;
  current.logical_height = logical_height;
  current.scale_x = scaled ? static_cast<double>(width) / logical_width : 1.0;
  current.scale_y = scaled ? static_cast<double>(height) / logical_height : 1.0;
  current.origin_x = -offset_x;
  current.origin_y = -offset_y;
  int last_resize = -1;
  for (int i = 0; i < plan.count; ++i) {
    if (plan.steps[i].kind == Step::Kind::kResize) last_resize = i;
  }
  // Trailing table ops become one table applied while writing the sample.
  const int tail = FoldedTail(plan);
  const bool has_tables = TailHasTables(plan, tail);
  ChannelLut folded;
  if (has_tables && !TailReadsImage(plan, tail)) folded = ComposeTail(plan, tail, {});
  for (int i = 0; i < plan.count; ++i) {
    const Step& step = plan.steps[i];
    if (i >= tail && IsTableStep(step)) continue;
    if (step.kind == Step::Kind::kResize && !SymmetricFilter(step.interpolation)) {
      MaterializeFlip(current, scratch);
    }
    FusedOutput fused;
    if (i == last_resize && step.interpolation != Interpolation::kNearest &&
        FuseAfterResize(plan, i, tail, current.flipped, fused) &&
        fused.width == spec_.output_width && fused.height == spec_.output_height) {
      ResizeGeometry geometry = ResizeOf(current, step.width, step.height);
      geometry.window_x = fused.x;
      geometry.window_y = fused.y;
      geometry.window_width = fused.width;
      geometry.window_height = fused.height;
      ResampleOptions options;
      options.filter = FilterOf(step.interpolation);
      SampleWriter writer(fused.width, fused.height, fused.flipped, spec_.output, normalized_,
                          has_tables ? &folded : nullptr, dst.data(), row);
      GALLEY_RETURN_IF_ERROR(ResizeAntialiased(current.pixels, geometry, options, writer));
      Erase(plan, spec_.output, spec_.output_width, spec_.output_height, dst.data());
      return Status::Ok();
    }
    switch (step.kind) {
      case Step::Kind::kCrop:
        Crop(step.rect, current, scratch);
        break;
      case Step::Kind::kResize:
        GALLEY_RETURN_IF_ERROR(Resize(step, current, scratch));
        break;
      case Step::Kind::kFlip:
        current.flipped = !current.flipped;
        break;
      case Step::Kind::kPixel:
        GALLEY_RETURN_IF_ERROR(ApplyPixel(step.pixel, plan, current, scratch));
        break;
    }
  }
  if (current.scaled() || current.pixels.width != spec_.output_width ||
      current.pixels.height != spec_.output_height) {
    return Status::InvalidArgument(
        "pipeline has no resize after the crop, so it needs full-resolution pixels");
  }
  if (has_tables && TailReadsImage(plan, tail)) folded = ComposeTail(plan, tail, current.pixels);
  const SampleWriter writer(current.pixels.width, current.pixels.height, current.flipped,
                            spec_.output, normalized_, has_tables ? &folded : nullptr, dst.data(),
                            row);
  for (int y = 0; y < current.pixels.height; ++y) writer.Write(y, current.pixels.row(y));
  Erase(plan, spec_.output, spec_.output_width, spec_.output_height, dst.data());
  return Status::Ok();
}

namespace {

constexpr const char* kAugMixOpNames[] = {
    "ShearX",       "ShearY",   "TranslateX", "TranslateY", "Rotate",   "Posterize", "Solarize",
    "AutoContrast", "Equalize", "Brightness", "Color",      "Contrast", "Sharpness"};

// An AugMix op's draws: {"original_weight", "weights": [...], "chains":
// [[{"op", "magnitude"}, ...], ...], "bilinear", "fill"}.
nlohmann::json AugMixJson(const AugMixPlan& entry) {
  const AugMixDraw& draw = entry.draw;
  nlohmann::json chains = nlohmann::json::array();
  nlohmann::json weights = nlohmann::json::array();
  for (int i = 0; i < draw.width; ++i) {
    weights.push_back(draw.weights[i]);
    nlohmann::json chain = nlohmann::json::array();
    for (int d = 0; d < draw.depths[i]; ++d) {
      const AugMixStep& step = draw.steps[i][d];
      chain.push_back(
          {{"op", kAugMixOpNames[static_cast<int>(step.op)]}, {"magnitude", step.magnitude}});
    }
    chains.push_back(std::move(chain));
  }
  return {{"original_weight", draw.original_weight},
          {"weights", std::move(weights)},
          {"chains", std::move(chains)},
          {"bilinear", entry.bilinear},
          {"fill", entry.fill ? nlohmann::json(*entry.fill) : nlohmann::json(nullptr)}};
}

}  // namespace

Result<nlohmann::json> TransformPipeline::DescribeSample(int source_width, int source_height,
                                                         uint64_t seed, uint64_t epoch,
                                                         uint64_t item) const {
  if (source_width <= 0 || source_height <= 0) {
    return Status::InvalidArgument("DescribeSample: source size must be positive");
  }
  static constexpr const char* kPixelNames[] = {
      "brightness", "contrast", "saturation",   "hue",      "sharpness", "grayscale",
      "posterize",  "solarize", "autocontrast", "equalize", "invert",    "vflip",
      "affine",     "rotate",   "blur",         "pad",      "augmix"};
  SampleRandom random(seed, epoch, item);
  GALLEY_ASSIGN_OR_RETURN(const Plan plan, MakePlan(spec_, source_width, source_height, random));
  nlohmann::json steps = nlohmann::json::array();
  for (int i = 0; i < plan.count; ++i) {
    const Step& step = plan.steps[i];
    switch (step.kind) {
      case Step::Kind::kCrop:
        steps.push_back({{"step", "crop"},
                         {"x", step.rect.x},
                         {"y", step.rect.y},
                         {"width", step.rect.width},
                         {"height", step.rect.height}});
        break;
      case Step::Kind::kResize:
        steps.push_back({{"step", "resize"},
                         {"width", step.width},
                         {"height", step.height},
                         {"interpolation", InterpolationName(step.interpolation)}});
        break;
      case Step::Kind::kFlip:
        steps.push_back({{"step", "flip"}});
        break;
      case Step::Kind::kPixel:
        steps.push_back({{"step", "pixel"},
                         {"kind", kPixelNames[static_cast<int>(step.pixel.kind)]},
                         {"v", step.pixel.v},
                         {"sides", step.pixel.sides},
                         {"interpolation", InterpolationName(step.pixel.interpolation)},
                         {"fill", step.pixel.fill},
                         {"origin", step.pixel.center_at_origin},
                         {"padding_mode", PaddingModeName(step.pixel.padding_mode)}});
        if (step.pixel.kind == PixelStep::Kind::kAugMix) {
          steps.back()["augmix"] = AugMixJson(plan.augmixes[step.pixel.sides[0]]);
        }
        break;
    }
  }
  for (int e = 0; e < plan.erasure_count; ++e) {
    const Erasure& erasure = plan.erasures[e];
    steps.push_back({{"step", "erase"},
                     {"x", erasure.x},
                     {"y", erasure.y},
                     {"width", erasure.width},
                     {"height", erasure.height},
                     {"random", erasure.random},
                     {"value", erasure.value}});
  }
  return steps;
}

Result<CropWindow> TransformPipeline::SourceWindow(int source_width, int source_height,
                                                   uint64_t seed, uint64_t epoch,
                                                   uint64_t item) const {
  if (source_width <= 0 || source_height <= 0) {
    return Status::InvalidArgument("SourceWindow: source size must be positive");
  }
  SampleRandom random(seed, epoch, item);
  GALLEY_ASSIGN_OR_RETURN(const Plan plan, MakePlan(spec_, source_width, source_height, random));
  // source = origin + pitch * current, per axis, in unflipped coordinates.
  double origin_x = 0, origin_y = 0, pitch_x = 1, pitch_y = 1;
  int width = source_width;
  int height = source_height;
  bool flipped = false;
  CropWindow window;
  window.min_decode_width = source_width;
  window.min_decode_height = source_height;
  bool resized = false;
  bool opaque = false;
  for (int i = 0; i < plan.count; ++i) {
    const Step& step = plan.steps[i];
    switch (step.kind) {
      case Step::Kind::kCrop: {
        const int x = flipped ? width - step.rect.x - step.rect.width : step.rect.x;
        origin_x += pitch_x * x;
        origin_y += pitch_y * step.rect.y;
        width = step.rect.width;
        height = step.rect.height;
        break;
      }
      case Step::Kind::kResize:
        if (!resized && (width != step.width || height != step.height)) {
          resized = true;
          window.resized_width = step.width;
          window.resized_height = step.height;
          const double region_width = pitch_x * width;  // in source pixels
          const double region_height = pitch_y * height;
          window.min_decode_width = std::min(
              source_width,
              static_cast<int>(std::ceil(source_width * step.width / region_width - 1e-9)));
          window.min_decode_height = std::min(
              source_height,
              static_cast<int>(std::ceil(source_height * step.height / region_height - 1e-9)));
        }
        pitch_x *= static_cast<double>(width) / step.width;
        pitch_y *= static_cast<double>(height) / step.height;
        width = step.width;
        height = step.height;
        break;
      case Step::Kind::kFlip:
        flipped = !flipped;
        break;
      case Step::Kind::kPixel:
        // Later steps see only what this one made of the current region,
        // so the window stops narrowing here; before any resize, the op
        // needs full-resolution pixels.
        if (!resized) {
          window.min_decode_width = source_width;
          window.min_decode_height = source_height;
        }
        opaque = true;
        break;
    }
    if (opaque) break;
  }
  const int x0 = std::clamp(static_cast<int>(std::floor(origin_x)), 0, source_width);
  const int y0 = std::clamp(static_cast<int>(std::floor(origin_y)), 0, source_height);
  const int x1 =
      std::clamp(static_cast<int>(std::ceil(origin_x + pitch_x * width)), 0, source_width);
  const int y1 =
      std::clamp(static_cast<int>(std::ceil(origin_y + pitch_y * height)), 0, source_height);
  window.x = x0;
  window.y = y0;
  window.width = x1 - x0;
  window.height = y1 - y0;
  return window;
}

}  // namespace galley::image
