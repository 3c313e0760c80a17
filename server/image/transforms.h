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
// A sample's plan (crops, resizes, flips, pixel steps with their drawn
// parameters, erasures) is made first; crops and flips are views, and a
// resize followed only by crops and flips writes straight into the output.
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

#include "galley/status.h"
#include "server/image/decoder.h"
#include "server/image/tensor_ops.h"
#include "server/image/transform_spec.h"

namespace galley::image {

// The part of a source image that a pipeline reads for one sample, in source
// pixel coordinates (clamped to the image), and the size of the first resize
// applied to it (0 x 0 when the pipeline never resizes).
struct CropWindow {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  int resized_width = 0;
  int resized_height = 0;
  // The smallest decode size at which the first resize still shrinks (or
  // keeps) the window, so decoding at that scale loses no detail the output
  // could show. Equal to the source size when nothing is resized.
  int min_decode_width = 0;
  int min_decode_height = 0;
};

// A rectangle of source pixels.
struct SourceRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// The magnitude torchvision's AutoAugment (family kAutoAugment),
// RandAugment or TrivialAugmentWide gives op number `op` (AutoAugment's
// order: Identity, ShearX, ShearY, TranslateX, TranslateY, Rotate,
// Brightness, Color, Contrast, Sharpness, Posterize, Solarize, AutoContrast,
// Equalize, Invert) at `bin` of `num_bins`, for a width x height image: the
// float32 value of its torch.linspace table. Exposed for parity tests.
Result<double> AugmentMagnitude(OpKind family, int op, int num_bins, int bin, int width,
                                int height);

// The magnitude torchvision's AugMix gives `op` at `bin` (of its 10) for a
// width x height image: the float32 value of its table, unsigned.
Result<double> AugMixMagnitude(AugMixOp op, int bin, int width, int height);

class TransformPipeline {
 public:
  // Validates the JSON spec; InvalidArgument names the op and field at fault.
  static Result<TransformPipeline> FromJson(const nlohmann::json& spec);

  // Canonical form, with every default filled in.
  nlohmann::json ToJson() const;
  // Canonical string; equal exactly when two pipelines are identical (so
  // their augmented outputs may be shared).
  std::string Signature() const { return signature_; }

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

  // The random draws of one sample for an image of this size, as the plan
  // the pipeline would run: [{"step": "crop"|"resize"|"flip"|"pixel"|
  // "erase", ...}]. A pixel step names its kind ("brightness", "affine",
  // ...) and parameters (v, sides, interpolation, fill, origin,
  // padding_mode), so that tests can replay the plan op by op. For tests of
  // the draws' distributions and for debugging; Apply does not use it.
  Result<nlohmann::json> DescribeSample(int source_width, int source_height, uint64_t seed,
                                        uint64_t epoch, uint64_t item) const;

  // The source window that Apply would read for an image of this size.
  Result<CropWindow> SourceWindow(int source_width, int source_height, uint64_t seed,
                                  uint64_t epoch, uint64_t item) const;

  // Like Apply, for an image decoded at reduced scale (DecodeScaled) from a
  // source of full_width x full_height: random draws use the full size, so
  // the crop is the same as Apply's, mapped onto the scaled pixels as a
  // fractional box that the first resize samples. InvalidArgument if the
  // pipeline has no resize to absorb the scale.
  Status ApplyScaled(const RgbImage& scaled, int full_width, int full_height, uint64_t seed,
                     uint64_t epoch, uint64_t item, std::span<std::byte> dst) const;

  // Whether the pipeline's first geometric op (flips aside) is a crop
  // (RandomResizedCrop or CenterCrop), so a sample reads only that crop's
  // rectangle and ApplyRegion can run on just that part of the image.
  bool SupportsRegion() const;

  // The part of a source_width x source_height image that ApplyRegion needs
  // for this sample: the first crop's rectangle, clamped to the image. It
  // contains SourceWindow's window, and can be larger (a later crop narrows
  // SourceWindow, but the first resize still reads all of the first crop).
  // InvalidArgument if !SupportsRegion().
  Result<SourceRect> RegionWindow(int source_width, int source_height, uint64_t seed,
                                  uint64_t epoch, uint64_t item) const;

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

  // Runs the plan for a logical_width x logical_height image that `src`
  // holds either whole, shrunk to its size (scaled), or at full scale from
  // (offset_x, offset_y) on.
  Status Run(std::span<const uint8_t> pixels, int width, int height, int logical_width,
             int logical_height, bool scaled, int offset_x, int offset_y, uint64_t seed,
             uint64_t epoch, uint64_t item, std::span<std::byte> dst) const;

  TransformSpec spec_;
  std::string signature_;
  // float32 output per channel and byte value: (float(x) / 255 - mean) / std,
  // computed in float as torchvision does, so output matches it bit for bit.
  std::array<std::array<float, 256>, 3> normalized_{};
};

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_TRANSFORMS_H_
