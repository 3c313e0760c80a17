// Ways into a TransformPipeline that only tests and benchmarks take: the
// plan of a sample as JSON, the source window a sample reads, and a sample
// from an image decoded at reduced scale. galleyd does not use them, so they
// live in their own library (galley_image_testing), which it does not link.
//
// Thread-safety: pure functions of their arguments; safe from any thread.
#ifndef GALLEY_SERVER_IMAGE_TESTING_TRANSFORM_TEST_PATHS_H_
#define GALLEY_SERVER_IMAGE_TESTING_TRANSFORM_TEST_PATHS_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>

#include "galley/image/decoder.h"
#include "galley/image/transforms.h"
#include "galley/status.h"

namespace galley::image {

// The part of a source image that a pipeline reads for one sample, in source
// pixel coordinates (clamped to the image), and the size of the first resize
// applied to it (0 x 0 when the pipeline never resizes).
struct CropWindow : Rect {
  int resized_width = 0;
  int resized_height = 0;
  // The smallest decode size at which the first resize still shrinks (or
  // keeps) the window, so decoding at that scale loses no detail the output
  // could show. Equal to the source size when nothing is resized.
  int min_decode_width = 0;
  int min_decode_height = 0;
};

// The random draws of one sample for an image of this size, as the plan
// the pipeline would run: [{"step": "crop"|"resize"|"flip"|"pixel"|
// "erase", ...}]. A pixel step names its kind ("brightness", "affine",
// ...) and parameters (v, sides, interpolation, fill, origin,
// padding_mode), so that tests can replay the plan op by op. For tests of
// the draws' distributions and for debugging.
Result<nlohmann::json> DescribeSample(const TransformPipeline& pipeline, int source_width,
                                      int source_height, uint64_t seed, uint64_t epoch,
                                      uint64_t item);

// The source window that Apply would read for an image of this size.
Result<CropWindow> SourceWindow(const TransformPipeline& pipeline, int source_width,
                                int source_height, uint64_t seed, uint64_t epoch, uint64_t item);

// Like Apply, for an image decoded at reduced scale (DecodeScaled) from a
// source of full_width x full_height: random draws use the full size, so
// the crop is the same as Apply's, mapped onto the scaled pixels as a
// fractional box that the first resize samples. InvalidArgument if the
// pipeline has no resize to absorb the scale.
Status ApplyScaled(const TransformPipeline& pipeline, const RgbImage& scaled, int full_width,
                   int full_height, uint64_t seed, uint64_t epoch, uint64_t item,
                   std::span<std::byte> dst);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_TESTING_TRANSFORM_TEST_PATHS_H_
