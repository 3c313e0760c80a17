// TransformPipeline: torchvision-compatible augmentation of one decoded image
// into one output sample (docs/transforms.md).
//
// Supported ops, with torchvision 0.14's names, defaults and parameter
// sampling: RandomResizedCrop, Resize, CenterCrop, RandomCrop, Pad,
// Random{Horizontal,Vertical}Flip, ColorJitter, Grayscale, RandomGrayscale,
// GaussianBlur, RandomRotation, RandomAffine, RandomApply, RandomChoice,
// RandomOrder, AutoAugment, RandAugment, TrivialAugmentWide, AugMix (with
// torchvision's tensor kernels, tensor_ops.h), and RandomErasing on the
// output. The output is uint8 NCHW (default) or NHWC,
// or float32 normalised as ToTensor + Normalize would give. Randomness is a
// pure function of (seed, epoch, item), so a sample's augmentation does not
// depend on scheduling. Bilinear and bicubic resizes go through
// ResizeAntialiased (resample.h), which gives PIL's, hence torchvision's,
// pixels exactly; the other ops are pixel_ops.h's, which repeat Pillow's
// arithmetic.
//
// A sample goes through three phases, each in its own file:
//   - the plan (sample_plan.h, with augment_policies.h): every random
//     parameter drawn up front, as torchvision draws it;
//   - the run (plan_runner.h): the plan's steps over the pixels; crops and
//     flips are views, and a resize followed only by crops and flips writes
//     straight into the output;
//   - the write (sample_writer.h): layout, dtype, normalisation, erasing.
// This class parses the spec and holds what every sample shares.
//
// Thread-safety: immutable after FromJson; Apply and the other const methods
// may run concurrently. Apply allocates nothing per sample beyond per-thread
// scratch buffers that are reused (GaussianBlur aside, which allocates its
// padded copy).
#ifndef GALLEY_SERVER_IMAGE_TRANSFORMS_H_
#define GALLEY_SERVER_IMAGE_TRANSFORMS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "galley/image/decoder.h"
#include "galley/image/rect.h"
#include "galley/image/transform_spec.h"
#include "galley/status.h"

namespace galley::image {

class TransformPipeline {
 public:
  // Validates the JSON spec; InvalidArgument names the op and field at fault.
  static Result<TransformPipeline> FromJson(const nlohmann::json& spec);

  // Canonical form, with every default filled in.
  nlohmann::json ToJson() const;
  // Canonical string; equal exactly when two pipelines are identical (so
  // their augmented outputs may be shared).
  std::string Signature() const { return signature_; }

  // The parsed spec, every default filled in.
  const TransformSpec& spec() const { return spec_; }
  int output_height() const { return spec_.output_height; }
  int output_width() const { return spec_.output_width; }
  Layout layout() const { return spec_.output.layout; }
  DType dtype() const { return spec_.output.dtype; }
  // Bytes of one sample: 3 * H * W * (1 for uint8, 4 for float32).
  size_t sample_bytes() const;
  // Whether samples differ between epochs: a RandomResizedCrop, or a
  // RandomHorizontalFlip with 0 < p < 1.
  bool is_random() const;

  // Writes one sample, exactly sample_bytes() long, into dst. InvalidArgument
  // for an empty source or a dst of the wrong size; ResourceExhausted when an
  // intermediate image would be absurdly large.
  Status Apply(const RgbImage& src, uint64_t seed, uint64_t epoch, uint64_t item,
               std::span<std::byte> dst) const;
  // The same, reading packed RGB pixels the caller keeps alive (a cached
  // decoded image), so they need not be copied into an RgbImage first.
  Status Apply(std::span<const uint8_t> pixels, int width, int height, uint64_t seed,
               uint64_t epoch, uint64_t item, std::span<std::byte> dst) const;

  // Whether the pipeline's first geometric op (flips aside) is a crop
  // (RandomResizedCrop or CenterCrop), so a sample reads only that crop's
  // rectangle and ApplyRegion can run on just that part of the image.
  bool SupportsRegion() const;

  // The part of a source_width x source_height image that ApplyRegion needs
  // for this sample: the first crop's rectangle, clamped to the image (a
  // later crop narrows what the output shows, but the first resize still
  // reads all of the first crop). InvalidArgument if !SupportsRegion().
  Result<Rect> RegionWindow(int source_width, int source_height, uint64_t seed, uint64_t epoch,
                            uint64_t item) const;

  // Like Apply, for the rectangle of a full_width x full_height image whose
  // top-left corner is at (offset_x, offset_y) (DecodeRegion's result): random
  // draws use the full size, so the sample is byte for byte Apply's on the
  // full image. The rectangle must contain RegionWindow's for the same
  // (seed, epoch, item); InvalidArgument if it does not, or if
  // !SupportsRegion().
  Status ApplyRegion(const RgbImage& region, int offset_x, int offset_y, int full_width,
                     int full_height, uint64_t seed, uint64_t epoch, uint64_t item,
                     std::span<std::byte> dst) const;

 private:
  explicit TransformPipeline(TransformSpec spec);

  TransformSpec spec_;
  std::string signature_;
  // MakeNormalizationTable(spec_.output) (sample_writer.h), shared by every
  // sample.
  std::array<std::array<float, 256>, 3> normalized_;
};

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_TRANSFORMS_H_
