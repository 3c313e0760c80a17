// RunSamplePlan: the pixel phase of a sample. It draws the sample's plan
// (sample_plan.h) and runs it over the source pixels: crops and horizontal
// flips as views of the pixels (a flip stays pending while the steps after
// it commute with it), resizes through resample.h's PIL-exact resampler,
// pixel steps through the kernels of pixel_ops.h and tensor_ops.h (AugMix),
// trailing per-channel table ops folded into the write, and a last resize
// followed only by crops and flips computed just over the output window and
// written straight into the sample (sample_writer.h).
//
// A new pixel op gets its kernel in pixel_ops.h (PIL arithmetic) or
// tensor_ops.h (torchvision's tensor arithmetic) and its case in
// ApplyPixel (plan_runner.cc).
//
// Thread-safety: safe from any thread; it reuses per-thread scratch buffers
// across samples, so a sample allocates nothing once they have grown
// (GaussianBlur aside, which allocates its padded copy).
#ifndef GALLEY_SERVER_IMAGE_PLAN_RUNNER_H_
#define GALLEY_SERVER_IMAGE_PLAN_RUNNER_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "galley/image/sample_writer.h"
#include "galley/image/transform_spec.h"
#include "galley/status.h"

namespace galley::image {

// The pixels a sample is made from and where they lie in the image the plan
// is drawn for (the logical image): all of it, all of it shrunk to
// width x height (`scaled`, a reduced-scale decode), or a full-scale
// rectangle of it whose top-left corner is (offset_x, offset_y) (a region
// decode).
struct PlanSource {
  std::span<const uint8_t> pixels;  // packed RGB, width x height
  int width = 0;
  int height = 0;
  int logical_width = 0;
  int logical_height = 0;
  bool scaled = false;
  int offset_x = 0;
  int offset_y = 0;
};

// Writes the sample of (seed, epoch, item) under `spec` into dst, which must
// be SampleBytes(spec) long; `normalized` is MakeNormalizationTable of the
// spec's output. InvalidArgument for a malformed source, a dst of the wrong
// size, or a source that is not at full resolution where the plan needs it
// to be; MakeSamplePlan's errors otherwise.
Status RunSamplePlan(const TransformSpec& spec, const NormalizationTable& normalized,
                     const PlanSource& source, uint64_t seed, uint64_t epoch, uint64_t item,
                     std::span<std::byte> dst);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_PLAN_RUNNER_H_
