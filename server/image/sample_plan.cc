#include "galley/image/sample_plan.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "galley/image/augment_policies.h"
#include "galley/image/pixel_ops.h"
#include "galley/image/sample_random.h"

namespace galley::image {
namespace {

// Bounds the memory one sample may take on its way to the output: a Resize
// of the shorter side on a needle-thin image could otherwise ask for gigabytes.
constexpr int64_t kMaxIntermediatePixels = int64_t{1} << 26;

// Python's round(): halves go to the even neighbour (default FE_TONEAREST).
int RoundHalfEven(double value) { return static_cast<int>(std::nearbyint(value)); }

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

// Builds one sample's plan: draws every random parameter in op order,
// following torchvision's rules, and tracks the image size.
class PlanBuilder {
 public:
  PlanBuilder(int width, int height, SampleRandom& random)
      : width_(width), height_(height), random_(random) {}

  Status Add(const TransformOp& op, int output_height, int output_width);
  SamplePlan& plan() { return plan_; }

 private:
  Status Push(const PlanStep& step) {
    if (plan_.count >= kMaxPlanSteps) {
      return Status::ResourceExhausted("transform plan has more than " +
                                       std::to_string(kMaxPlanSteps) + " steps");
    }
    plan_.steps[plan_.count++] = step;
    return Status::Ok();
  }
  Status AddResize(int w, int h, Interpolation interpolation);
  Status AddCrop(const Rect& rect) {
    PlanStep step;
    step.kind = PlanStep::Kind::kCrop;
    step.rect = rect;
    width_ = rect.width;
    height_ = rect.height;
    return Push(step);
  }
  Status AddPixel(const PixelStep& pixel) {
    PlanStep step;
    step.kind = PlanStep::Kind::kPixel;
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
  // One method per op whose draws take more than a line, each following
  // the torchvision op it names.
  Status AddResizeOp(const TransformOp& op);
  Status AddHorizontalFlip(const TransformOp& op);
  Status AddRandomCrop(const TransformOp& op);
  Status AddBlur(const TransformOp& op);
  Status AddRandomAffine(const TransformOp& op);
  Status AddRandomApply(const TransformOp& op, int output_height, int output_width);
  Status AddRandomChoice(const TransformOp& op, int output_height, int output_width);
  Status AddRandomOrder(const TransformOp& op, int output_height, int output_width);
  Status AddColorJitter(const TransformOp& op);
  Status AddAugment(AugmentOp augment, double magnitude, const TransformOp& op);
  Status AddAutoAugment(const TransformOp& op);
  Status AddErasing(const TransformOp& op, int output_height, int output_width);
  Status AddAugMix(const TransformOp& op);

  SamplePlan plan_;
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
  PlanStep step;
  step.kind = PlanStep::Kind::kResize;
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
    erasure.rect.y = static_cast<int>(random_.UniformInt(0, output_height - h));
    erasure.rect.x = static_cast<int>(random_.UniformInt(0, output_width - w));
    erasure.rect.width = w;
    erasure.rect.height = h;
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
      return AddResizeOp(op);
    case OpKind::kCenterCrop:
      return AddCrop(CenterCropRect(width_, height_, op.size[0], op.size[1]));
    case OpKind::kRandomHorizontalFlip:
      return AddHorizontalFlip(op);
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
    case OpKind::kGaussianBlur:
      return AddBlur(op);
    case OpKind::kRandomRotation:
      return AddRotate(UniformF32(random_, op.degrees[0], op.degrees[1]), op);
    case OpKind::kRandomAffine:
      return AddRandomAffine(op);
    case OpKind::kRandomApply:
      return AddRandomApply(op, output_height, output_width);
    case OpKind::kRandomChoice:
      return AddRandomChoice(op, output_height, output_width);
    case OpKind::kRandomOrder:
      return AddRandomOrder(op, output_height, output_width);
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

Status PlanBuilder::AddResizeOp(const TransformOp& op) {
  if (op.size.size() == 2) return AddResize(op.size[1], op.size[0], op.interpolation);
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

Status PlanBuilder::AddHorizontalFlip(const TransformOp& op) {
  // torchvision: flip when torch.rand(1) < p.
  if (!(random_.Uniform(0.0, 1.0) < op.p)) return Status::Ok();
  PlanStep step;
  step.kind = PlanStep::Kind::kFlip;
  return Push(step);
}

Status PlanBuilder::AddBlur(const TransformOp& op) {
  const double sigma = UniformF32(random_, op.sigma[0], op.sigma[1]);
  PixelStep pixel;
  pixel.kind = PixelStep::Kind::kBlur;
  pixel.v[0] = pixel.v[1] = sigma;
  pixel.sides = {op.kernel_size[0], op.kernel_size[1], 0, 0};
  return AddPixel(pixel);
}

Status PlanBuilder::AddRandomAffine(const TransformOp& op) {
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
  const double shear_x = op.shear_x ? UniformF32(random_, (*op.shear_x)[0], (*op.shear_x)[1]) : 0.0;
  const double shear_y = op.shear_y ? UniformF32(random_, (*op.shear_y)[0], (*op.shear_y)[1]) : 0.0;
  return AddAffine(angle, tx, ty, scale, shear_x, shear_y, false, op);
}

Status PlanBuilder::AddRandomApply(const TransformOp& op, int output_height, int output_width) {
  // torchvision: skip when p < torch.rand(1).
  if (op.p < random_.Uniform(0.0, 1.0)) return Status::Ok();
  for (const TransformOp& child : op.children) {
    GALLEY_RETURN_IF_ERROR(Add(child, output_height, output_width));
  }
  return Status::Ok();
}

Status PlanBuilder::AddRandomChoice(const TransformOp& op, int output_height, int output_width) {
  size_t chosen = 0;
  if (op.weights.empty()) {
    chosen =
        static_cast<size_t>(random_.UniformInt(0, static_cast<int64_t>(op.children.size()) - 1));
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

Status PlanBuilder::AddRandomOrder(const TransformOp& op, int output_height, int output_width) {
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

}  // namespace

Result<SamplePlan> MakeSamplePlan(const TransformSpec& spec, int width, int height, uint64_t seed,
                                  uint64_t epoch, uint64_t item) {
  SampleRandom random(seed, epoch, item);
  PlanBuilder builder(width, height, random);
  for (const TransformOp& op : spec.ops) {
    GALLEY_RETURN_IF_ERROR(builder.Add(op, spec.output_height, spec.output_width));
  }
  return builder.plan();
}

}  // namespace galley::image
