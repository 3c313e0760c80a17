#include "galley/image/plan_runner.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "galley/image/pixel_ops.h"
#include "galley/image/resample.h"
#include "galley/image/rgb_span.h"
#include "galley/image/sample_plan.h"
#include "galley/image/tensor_ops.h"

namespace galley::image {
namespace {

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

Status Resize(const PlanStep& step, Current& current, Scratch& scratch) {
  ResizeGeometry geometry = ResizeOf(current, step.width, step.height);
  current.logical_width = step.width;
  current.logical_height = step.height;
  current.origin_x = current.origin_y = 0.0;
  current.scale_x = current.scale_y = 1.0;
  const RgbSpan resized = scratch.Take(step.width, step.height, current.buffer);
  // Horizontal flips commute with the symmetric filters, so a pending flip
  // stays pending; RunSamplePlan applies it first for the others.
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
Status ApplyPixel(PixelStep step, const SamplePlan& plan, Current& current, Scratch& scratch) {
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
bool IsTableStep(const PlanStep& step) {
  if (step.kind != PlanStep::Kind::kPixel) return false;
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

bool TableReadsImage(const PlanStep& step) {
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
int FoldedTail(const SamplePlan& plan) {
  int start = plan.count;
  while (start > 0 && (IsTableStep(plan.steps[start - 1]) ||
                       plan.steps[start - 1].kind == PlanStep::Kind::kFlip)) {
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
ChannelLut ComposeTail(const SamplePlan& plan, int tail, const RgbView& image) {
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
bool TailHasTables(const SamplePlan& plan, int tail) {
  for (int i = tail; i < plan.count; ++i) {
    if (IsTableStep(plan.steps[i])) return true;
  }
  return false;
}
bool TailReadsImage(const SamplePlan& plan, int tail) {
  return tail < plan.count && IsTableStep(plan.steps[tail]) && TableReadsImage(plan.steps[tail]);
}

// Where the output lies in the result of plan step `resize`, when every
// later step is a flip, a crop inside the image or a table step of a folded
// tail starting at `tail` that reads no image: then only that window of the
// resize needs computing, written straight into the sample.
bool FuseAfterResize(const SamplePlan& plan, int resize, int tail, bool flipped,
                     FusedOutput& fused) {
  const PlanStep& step = plan.steps[resize];
  fused = {0, 0, step.width, step.height, flipped};
  if (TailReadsImage(plan, tail)) return false;
  for (int i = resize + 1; i < plan.count; ++i) {
    const PlanStep& next = plan.steps[i];
    if (next.kind == PlanStep::Kind::kFlip) {
      fused.flipped = !fused.flipped;
      continue;
    }
    if (i >= tail) continue;  // a table folded into the write
    if (next.kind != PlanStep::Kind::kCrop) return false;
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

// The source as the image before the plan's first step: a view of its
// pixels (never written) with the logical image's place in them.
Current ViewOf(const PlanSource& source) {
  Current current;
  current.pixels =
      RgbSpan::Packed(const_cast<uint8_t*>(source.pixels.data()), source.width, source.height);
  current.logical_width = source.logical_width;
  current.logical_height = source.logical_height;
  current.scale_x = source.scaled ? static_cast<double>(source.width) / source.logical_width : 1.0;
  current.scale_y =
      source.scaled ? static_cast<double>(source.height) / source.logical_height : 1.0;
  current.origin_x = -source.offset_x;
  current.origin_y = -source.offset_y;
  return current;
}

int LastResize(const SamplePlan& plan) {
  int last_resize = -1;
  for (int i = 0; i < plan.count; ++i) {
    if (plan.steps[i].kind == PlanStep::Kind::kResize) last_resize = i;
  }
  return last_resize;
}

// Resizes the current image as `step` says, computing only the output's
// window of the result (FuseAfterResize) and writing it straight into the
// sample.
Status ResizeIntoSample(const PlanStep& step, const Current& current, const FusedOutput& fused,
                        const OutputSpec& output, const NormalizationTable& normalized,
                        const ChannelLut* folded, std::byte* dst, std::vector<uint8_t>& row) {
  ResizeGeometry geometry = ResizeOf(current, step.width, step.height);
  geometry.window_x = fused.x;
  geometry.window_y = fused.y;
  geometry.window_width = fused.width;
  geometry.window_height = fused.height;
  ResampleOptions options;
  options.filter = FilterOf(step.interpolation);
  SampleWriter writer(fused.width, fused.height, fused.flipped, output, normalized, folded, dst,
                      row);
  return ResizeAntialiased(current.pixels, geometry, options, writer);
}

// Runs one step that is not folded into the write.
Status RunStep(const PlanStep& step, const SamplePlan& plan, Current& current, Scratch& scratch) {
  switch (step.kind) {
    case PlanStep::Kind::kCrop:
      Crop(step.rect, current, scratch);
      break;
    case PlanStep::Kind::kResize:
      return Resize(step, current, scratch);
    case PlanStep::Kind::kFlip:
      current.flipped = !current.flipped;
      break;
    case PlanStep::Kind::kPixel:
      return ApplyPixel(step.pixel, plan, current, scratch);
  }
  return Status::Ok();
}

}  // namespace

Status RunSamplePlan(const TransformSpec& spec, const NormalizationTable& normalized,
                     const PlanSource& source, uint64_t seed, uint64_t epoch, uint64_t item,
                     std::span<std::byte> dst) {
  if (source.width <= 0 || source.height <= 0 ||
      source.pixels.size() != static_cast<size_t>(source.width) * source.height * 3) {
    return Status::InvalidArgument("transform input is not a well-formed RGB image");
  }
  const size_t sample_bytes = SampleBytes(spec);
  if (dst.size() != sample_bytes) {
    return Status::InvalidArgument("transform output buffer has " + std::to_string(dst.size()) +
                                   " bytes, the sample needs " + std::to_string(sample_bytes));
  }
  GALLEY_ASSIGN_OR_RETURN(
      const SamplePlan plan,
      MakeSamplePlan(spec, source.logical_width, source.logical_height, seed, epoch, item));

  thread_local Scratch scratch;
  thread_local std::vector<uint8_t> row;
  Current current = ViewOf(source);
  const int last_resize = LastResize(plan);
  // Trailing table ops become one table applied while writing the sample.
  const int tail = FoldedTail(plan);
  const bool has_tables = TailHasTables(plan, tail);
  ChannelLut folded;
  if (has_tables && !TailReadsImage(plan, tail)) folded = ComposeTail(plan, tail, {});
  for (int i = 0; i < plan.count; ++i) {
    const PlanStep& step = plan.steps[i];
    if (i >= tail && IsTableStep(step)) continue;
    if (step.kind == PlanStep::Kind::kResize && !SymmetricFilter(step.interpolation)) {
      MaterializeFlip(current, scratch);
    }
    FusedOutput fused;
    if (i == last_resize && step.interpolation != Interpolation::kNearest &&
        FuseAfterResize(plan, i, tail, current.flipped, fused) &&
        fused.width == spec.output_width && fused.height == spec.output_height) {
      GALLEY_RETURN_IF_ERROR(ResizeIntoSample(step, current, fused, spec.output, normalized,
                                              has_tables ? &folded : nullptr, dst.data(), row));
      WriteErasures(plan.drawn_erasures(), spec.output, spec.output_width, spec.output_height,
                    dst.data());
      return Status::Ok();
    }
    GALLEY_RETURN_IF_ERROR(RunStep(step, plan, current, scratch));
  }
  if (current.scaled() || current.pixels.width != spec.output_width ||
      current.pixels.height != spec.output_height) {
    return Status::InvalidArgument(
        "pipeline has no resize after the crop, so it needs full-resolution pixels");
  }
  if (has_tables && TailReadsImage(plan, tail)) folded = ComposeTail(plan, tail, current.pixels);
  const SampleWriter writer(current.pixels.width, current.pixels.height, current.flipped,
                            spec.output, normalized, has_tables ? &folded : nullptr, dst.data(),
                            row);
  for (int y = 0; y < current.pixels.height; ++y) writer.Write(y, current.pixels.row(y));
  WriteErasures(plan.drawn_erasures(), spec.output, spec.output_width, spec.output_height,
                dst.data());
  return Status::Ok();
}

}  // namespace galley::image
