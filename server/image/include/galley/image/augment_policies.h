// The augmentation spaces of torchvision 0.14's AutoAugment, RandAugment,
// TrivialAugmentWide and AugMix: the ops each one draws from, AutoAugment's
// learned sub-policies, and the magnitude an op takes at each bin (the
// float32 values of torchvision's torch.linspace tables).
//
// The plan builder (sample_plan.h) draws from these; the parity tests compare
// the magnitudes with torchvision's own tables. A new AutoAugment-family op
// is added here (its enumerator and magnitude) and drawn in sample_plan.cc.
//
// Thread-safety: constant tables and pure functions; safe from any thread.
#ifndef GALLEY_SERVER_IMAGE_AUGMENT_POLICIES_H_
#define GALLEY_SERVER_IMAGE_AUGMENT_POLICIES_H_

#include <array>
#include <vector>

#include "galley/image/tensor_ops.h"
#include "galley/image/transform_spec.h"
#include "galley/status.h"

namespace galley::image {

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
inline constexpr int kRandAugmentOps = 14;

// Whether the op's magnitude takes a random sign (ShearX to Sharpness).
bool SignedAugment(AugmentOp op);

// One step of an AutoAugment sub-policy: the op, the probability that it
// runs, and its magnitude bin (of 10).
struct PolicyStep {
  AugmentOp op;
  double p;
  int magnitude;  // bin, -1 for ops without one
};
using SubPolicy = std::array<PolicyStep, 2>;

// The learned sub-policies of `policy`, in torchvision's order.
const std::vector<SubPolicy>& Policies(AutoAugmentPolicy policy);

// The magnitude torchvision's AutoAugment (family kAutoAugment),
// RandAugment or TrivialAugmentWide gives op number `op` (AugmentOp's
// order) at `bin` of `num_bins`, for a width x height image: the float32
// value of its torch.linspace table. InvalidArgument for an op or bin out of
// range.
Result<double> AugmentMagnitude(OpKind family, int op, int num_bins, int bin, int width,
                                int height);

// The magnitude torchvision's AugMix gives `op` at `bin` (of its 10) for a
// width x height image: the float32 value of its table, unsigned.
Result<double> AugMixMagnitude(AugMixOp op, int bin, int width, int height);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_AUGMENT_POLICIES_H_
