// SamplePlan: everything random about one sample, drawn before any pixel is
// touched: crops, resizes and flips, the pixel steps with their drawn
// parameters, AugMix's draws and RandomErasing's rectangles.
//
// MakeSamplePlan draws them in op order with torchvision 0.14's rules
// (RandomResizedCrop.get_params, ColorJitter's permutation,
// RandomAffine.get_params, AutoAugment's sub-policies, AugMix's Dirichlet
// weights, ...) from SampleRandom(seed, epoch, item), tracking the image size
// from op to op. A plan is thus a pure function of the spec, the source size
// and (seed, epoch, item), so a sample's augmentation does not depend on
// scheduling. This is where randomness and the parity of the draws with
// torchvision live; plan_runner.h runs a plan over pixels, and the op
// tables of the AutoAugment family are augment_policies.h's.
//
// A new op draws its parameters in PlanBuilder::Add (sample_plan.cc); if it
// rewrites pixels it gets a PixelStep::Kind, which plan_runner.cc dispatches
// to its kernel.
//
// Thread-safety: plain values; MakeSamplePlan is a pure function, safe from
// any thread.
#ifndef GALLEY_SERVER_IMAGE_SAMPLE_PLAN_H_
#define GALLEY_SERVER_IMAGE_SAMPLE_PLAN_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "galley/image/rect.h"
#include "galley/image/rgb_span.h"
#include "galley/image/tensor_ops.h"
#include "galley/image/transform_spec.h"
#include "galley/status.h"

namespace galley::image {

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
    kAugMix,  // sides[0]: its entry in SamplePlan::augmixes
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
struct PlanStep {
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
  Rect rect;
  bool random = false;  // standard normal noise drawn from noise_seed
  std::array<float, 3> value{};
  uint64_t noise_seed = 0;
};

// Capacities of a plan, fixed so that planning allocates nothing.
inline constexpr int kMaxPlanSteps = 96;
inline constexpr int kMaxErasures = 8;
inline constexpr int kMaxAugMixes = 4;

// One AugMix op's draws and how its warps sample.
struct AugMixPlan {
  AugMixDraw draw;
  bool bilinear = true;
  TensorFill fill;
};

// The steps of one sample in order, then the erasures on its output; a
// PixelStep of kind kAugMix refers to its entry in `augmixes`.
struct SamplePlan {
  std::array<PlanStep, kMaxPlanSteps> steps;
  int count = 0;
  std::array<Erasure, kMaxErasures> erasures;
  int erasure_count = 0;
  std::array<AugMixPlan, kMaxAugMixes> augmixes;
  int augmix_count = 0;

  // The first erasure_count erasures, those drawn.
  std::span<const Erasure> drawn_erasures() const {
    return {erasures.data(), static_cast<size_t>(erasure_count)};
  }
};

// The plan of one sample of a `width` x `height` source under `spec`, drawn
// from SampleRandom(seed, epoch, item). InvalidArgument when an op cannot
// apply (a RandomCrop larger than its padded input); ResourceExhausted when
// an intermediate image would be absurdly large or the plan exceeds its
// fixed capacity.
Result<SamplePlan> MakeSamplePlan(const TransformSpec& spec, int width, int height, uint64_t seed,
                                  uint64_t epoch, uint64_t item);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_SAMPLE_PLAN_H_
