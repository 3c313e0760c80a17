#include "galley/image/transforms.h"

#include <algorithm>
#include <utility>

#include "galley/image/plan_runner.h"
#include "galley/image/sample_plan.h"
#include "galley/image/sample_writer.h"

namespace galley::image {

TransformPipeline::TransformPipeline(TransformSpec spec)
    : spec_(std::move(spec)),
      signature_(TransformSpecToJson(spec_).dump()),
      normalized_(MakeNormalizationTable(spec_.output)) {}

Result<TransformPipeline> TransformPipeline::FromJson(const nlohmann::json& spec) {
  GALLEY_ASSIGN_OR_RETURN(TransformSpec parsed, ParseTransformSpec(spec));
  return TransformPipeline(std::move(parsed));
}

nlohmann::json TransformPipeline::ToJson() const { return TransformSpecToJson(spec_); }

size_t TransformPipeline::sample_bytes() const { return SampleBytes(spec_); }

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
  PlanSource source;
  source.pixels = pixels;
  source.width = source.logical_width = width;
  source.height = source.logical_height = height;
  return RunSamplePlan(spec_, normalized_, source, seed, epoch, item, dst);
}

bool TransformPipeline::SupportsRegion() const {
  for (const TransformOp& op : spec_.ops) {
    if (op.kind == OpKind::kRandomHorizontalFlip) continue;
    return op.kind == OpKind::kRandomResizedCrop || op.kind == OpKind::kCenterCrop;
  }
  return false;
}

Result<Rect> TransformPipeline::RegionWindow(int source_width, int source_height, uint64_t seed,
                                             uint64_t epoch, uint64_t item) const {
  if (!SupportsRegion()) {
    return Status::InvalidArgument("RegionWindow: the pipeline does not start with a crop");
  }
  if (source_width <= 0 || source_height <= 0) {
    return Status::InvalidArgument("RegionWindow: source size must be positive");
  }
  GALLEY_ASSIGN_OR_RETURN(const SamplePlan plan,
                          MakeSamplePlan(spec_, source_width, source_height, seed, epoch, item));
  bool flipped = false;
  for (int i = 0; i < plan.count; ++i) {
    const PlanStep& step = plan.steps[i];
    if (step.kind == PlanStep::Kind::kFlip) {
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
    return Rect{x0, y0, x1 - x0, y1 - y0};
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
  GALLEY_ASSIGN_OR_RETURN(const Rect window,
                          RegionWindow(full_width, full_height, seed, epoch, item));
  if (window.x < offset_x || window.y < offset_y ||
      window.x + window.width > offset_x + region.width ||
      window.y + window.height > offset_y + region.height) {
    return Status::InvalidArgument("ApplyRegion: region does not contain the sample's window");
  }
  PlanSource source;
  source.pixels = region.pixels;
  source.width = region.width;
  source.height = region.height;
  source.logical_width = full_width;
  source.logical_height = full_height;
  source.offset_x = offset_x;
  source.offset_y = offset_y;
  return RunSamplePlan(spec_, normalized_, source, seed, epoch, item, dst);
}

}  // namespace galley::image
