#include "galley/image/testing/transform_test_paths.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "galley/image/plan_runner.h"
#include "galley/image/sample_plan.h"

namespace galley::image {
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

Result<nlohmann::json> DescribeSample(const TransformPipeline& pipeline, int source_width,
                                      int source_height, uint64_t seed, uint64_t epoch,
                                      uint64_t item) {
  if (source_width <= 0 || source_height <= 0) {
    return Status::InvalidArgument("DescribeSample: source size must be positive");
  }
  static constexpr const char* kPixelNames[] = {
      "brightness", "contrast", "saturation",   "hue",      "sharpness", "grayscale",
      "posterize",  "solarize", "autocontrast", "equalize", "invert",    "vflip",
      "affine",     "rotate",   "blur",         "pad",      "augmix"};
  GALLEY_ASSIGN_OR_RETURN(const SamplePlan plan, MakeSamplePlan(pipeline.spec(), source_width,
                                                                source_height, seed, epoch, item));
  nlohmann::json steps = nlohmann::json::array();
  for (int i = 0; i < plan.count; ++i) {
    const PlanStep& step = plan.steps[i];
    switch (step.kind) {
      case PlanStep::Kind::kCrop:
        steps.push_back({{"step", "crop"},
                         {"x", step.rect.x},
                         {"y", step.rect.y},
                         {"width", step.rect.width},
                         {"height", step.rect.height}});
        break;
      case PlanStep::Kind::kResize:
        steps.push_back({{"step", "resize"},
                         {"width", step.width},
                         {"height", step.height},
                         {"interpolation", InterpolationName(step.interpolation)}});
        break;
      case PlanStep::Kind::kFlip:
        steps.push_back({{"step", "flip"}});
        break;
      case PlanStep::Kind::kPixel:
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
                     {"x", erasure.rect.x},
                     {"y", erasure.rect.y},
                     {"width", erasure.rect.width},
                     {"height", erasure.rect.height},
                     {"random", erasure.random},
                     {"value", erasure.value}});
  }
  return steps;
}

Result<CropWindow> SourceWindow(const TransformPipeline& pipeline, int source_width,
                                int source_height, uint64_t seed, uint64_t epoch, uint64_t item) {
  if (source_width <= 0 || source_height <= 0) {
    return Status::InvalidArgument("SourceWindow: source size must be positive");
  }
  GALLEY_ASSIGN_OR_RETURN(const SamplePlan plan, MakeSamplePlan(pipeline.spec(), source_width,
                                                                source_height, seed, epoch, item));
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
    const PlanStep& step = plan.steps[i];
    switch (step.kind) {
      case PlanStep::Kind::kCrop: {
        const int x = flipped ? width - step.rect.x - step.rect.width : step.rect.x;
        origin_x += pitch_x * x;
        origin_y += pitch_y * step.rect.y;
        width = step.rect.width;
        height = step.rect.height;
        break;
      }
      case PlanStep::Kind::kResize:
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
      case PlanStep::Kind::kFlip:
        flipped = !flipped;
        break;
      case PlanStep::Kind::kPixel:
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

Status ApplyScaled(const TransformPipeline& pipeline, const RgbImage& scaled, int full_width,
                   int full_height, uint64_t seed, uint64_t epoch, uint64_t item,
                   std::span<std::byte> dst) {
  if (full_width <= 0 || full_height <= 0 || full_width < scaled.width ||
      full_height < scaled.height) {
    return Status::InvalidArgument("ApplyScaled: full size must cover the scaled image");
  }
  PlanSource source;
  source.pixels = scaled.pixels;
  source.width = scaled.width;
  source.height = scaled.height;
  source.logical_width = full_width;
  source.logical_height = full_height;
  source.scaled = true;
  return RunSamplePlan(pipeline.spec(), MakeNormalizationTable(pipeline.spec().output), source,
                       seed, epoch, item, dst);
}

}  // namespace galley::image
