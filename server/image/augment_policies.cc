#include "galley/image/augment_policies.h"

#include <cmath>

namespace galley::image {
namespace {

// torch.linspace(start, end, steps)[index] in float32: the first half
// counts up from start, the second down from end.
double TorchLinspace(double start, double end, int steps, int index) {
  if (steps == 1) return static_cast<float>(start);
  const float s = static_cast<float>(start);
  const float e = static_cast<float>(end);
  const float step = (e - s) / static_cast<float>(steps - 1);
  if (index < steps / 2) return s + step * static_cast<float>(index);
  return e - step * static_cast<float>(steps - index - 1);
}

}  // namespace

bool SignedAugment(AugmentOp op) { return op >= AugmentOp::kShearX && op <= AugmentOp::kSharpness; }

// The learned policies of Cubuk et al., "AutoAugment: Learning Augmentation
// Strategies from Data" (CVPR 2019), as torchvision 0.14 lists them.
const std::vector<SubPolicy>& Policies(AutoAugmentPolicy policy) {
  using enum AugmentOp;
  static const std::vector<SubPolicy> imagenet = {
      {{{kPosterize, 0.4, 8}, {kRotate, 0.6, 9}}},
      {{{kSolarize, 0.6, 5}, {kAutoContrast, 0.6, -1}}},
      {{{kEqualize, 0.8, -1}, {kEqualize, 0.6, -1}}},
      {{{kPosterize, 0.6, 7}, {kPosterize, 0.6, 6}}},
      {{{kEqualize, 0.4, -1}, {kSolarize, 0.2, 4}}},
      {{{kEqualize, 0.4, -1}, {kRotate, 0.8, 8}}},
      {{{kSolarize, 0.6, 3}, {kEqualize, 0.6, -1}}},
      {{{kPosterize, 0.8, 5}, {kEqualize, 1.0, -1}}},
      {{{kRotate, 0.2, 3}, {kSolarize, 0.6, 8}}},
      {{{kEqualize, 0.6, -1}, {kPosterize, 0.4, 6}}},
      {{{kRotate, 0.8, 8}, {kColor, 0.4, 0}}},
      {{{kRotate, 0.4, 9}, {kEqualize, 0.6, -1}}},
      {{{kEqualize, 0.0, -1}, {kEqualize, 0.8, -1}}},
      {{{kInvert, 0.6, -1}, {kEqualize, 1.0, -1}}},
      {{{kColor, 0.6, 4}, {kContrast, 1.0, 8}}},
      {{{kRotate, 0.8, 8}, {kColor, 1.0, 2}}},
      {{{kColor, 0.8, 8}, {kSolarize, 0.8, 7}}},
      {{{kSharpness, 0.4, 7}, {kInvert, 0.6, -1}}},
      {{{kShearX, 0.6, 5}, {kEqualize, 1.0, -1}}},
      {{{kColor, 0.4, 0}, {kEqualize, 0.6, -1}}},
      {{{kEqualize, 0.4, -1}, {kSolarize, 0.2, 4}}},
      {{{kSolarize, 0.6, 5}, {kAutoContrast, 0.6, -1}}},
      {{{kInvert, 0.6, -1}, {kEqualize, 1.0, -1}}},
      {{{kColor, 0.6, 4}, {kContrast, 1.0, 8}}},
      {{{kEqualize, 0.8, -1}, {kEqualize, 0.6, -1}}},
  };
  static const std::vector<SubPolicy> cifar10 = {
      {{{kInvert, 0.1, -1}, {kContrast, 0.2, 6}}},
      {{{kRotate, 0.7, 2}, {kTranslateX, 0.3, 9}}},
      {{{kSharpness, 0.8, 1}, {kSharpness, 0.9, 3}}},
      {{{kShearY, 0.5, 8}, {kTranslateY, 0.7, 9}}},
      {{{kAutoContrast, 0.5, -1}, {kEqualize, 0.9, -1}}},
      {{{kShearY, 0.2, 7}, {kPosterize, 0.3, 7}}},
      {{{kColor, 0.4, 3}, {kBrightness, 0.6, 7}}},
      {{{kSharpness, 0.3, 9}, {kBrightness, 0.7, 9}}},
      {{{kEqualize, 0.6, -1}, {kEqualize, 0.5, -1}}},
      {{{kContrast, 0.6, 7}, {kSharpness, 0.6, 5}}},
      {{{kColor, 0.7, 7}, {kTranslateX, 0.5, 8}}},
      {{{kEqualize, 0.3, -1}, {kAutoContrast, 0.4, -1}}},
      {{{kTranslateY, 0.4, 3}, {kSharpness, 0.2, 6}}},
      {{{kBrightness, 0.9, 6}, {kColor, 0.2, 8}}},
      {{{kSolarize, 0.5, 2}, {kInvert, 0.0, -1}}},
      {{{kEqualize, 0.2, -1}, {kAutoContrast, 0.6, -1}}},
      {{{kEqualize, 0.2, -1}, {kEqualize, 0.6, -1}}},
      {{{kColor, 0.9, 9}, {kEqualize, 0.6, -1}}},
      {{{kAutoContrast, 0.8, -1}, {kSolarize, 0.2, 8}}},
      {{{kBrightness, 0.1, 3}, {kColor, 0.7, 0}}},
      {{{kSolarize, 0.4, 5}, {kAutoContrast, 0.9, -1}}},
      {{{kTranslateY, 0.9, 9}, {kTranslateY, 0.7, 9}}},
      {{{kAutoContrast, 0.9, -1}, {kSolarize, 0.8, 3}}},
      {{{kEqualize, 0.8, -1}, {kInvert, 0.1, -1}}},
      {{{kTranslateY, 0.7, 9}, {kAutoContrast, 0.9, -1}}},
  };
  static const std::vector<SubPolicy> svhn = {
      {{{kShearX, 0.9, 4}, {kInvert, 0.2, -1}}},
      {{{kShearY, 0.9, 8}, {kInvert, 0.7, -1}}},
      {{{kEqualize, 0.6, -1}, {kSolarize, 0.6, 6}}},
      {{{kInvert, 0.9, -1}, {kEqualize, 0.6, -1}}},
      {{{kEqualize, 0.6, -1}, {kRotate, 0.9, 3}}},
      {{{kShearX, 0.9, 4}, {kAutoContrast, 0.8, -1}}},
      {{{kShearY, 0.9, 8}, {kInvert, 0.4, -1}}},
      {{{kShearY, 0.9, 5}, {kSolarize, 0.2, 6}}},
      {{{kInvert, 0.9, -1}, {kAutoContrast, 0.8, -1}}},
      {{{kEqualize, 0.6, -1}, {kRotate, 0.9, 3}}},
      {{{kShearX, 0.9, 4}, {kSolarize, 0.3, 3}}},
      {{{kShearY, 0.8, 8}, {kInvert, 0.7, -1}}},
      {{{kEqualize, 0.9, -1}, {kTranslateY, 0.6, 6}}},
      {{{kInvert, 0.9, -1}, {kEqualize, 0.6, -1}}},
      {{{kContrast, 0.3, 3}, {kRotate, 0.8, 4}}},
      {{{kInvert, 0.8, -1}, {kTranslateY, 0.0, 2}}},
      {{{kShearY, 0.7, 6}, {kSolarize, 0.4, 8}}},
      {{{kInvert, 0.6, -1}, {kRotate, 0.8, 4}}},
      {{{kShearY, 0.3, 7}, {kTranslateX, 0.9, 3}}},
      {{{kShearX, 0.1, 6}, {kInvert, 0.6, -1}}},
      {{{kSolarize, 0.7, 2}, {kTranslateY, 0.6, 7}}},
      {{{kShearY, 0.8, 4}, {kInvert, 0.8, -1}}},
      {{{kShearX, 0.7, 9}, {kTranslateY, 0.8, 3}}},
      {{{kShearY, 0.8, 5}, {kAutoContrast, 0.7, -1}}},
      {{{kShearX, 0.7, 2}, {kInvert, 0.1, -1}}},
  };
  switch (policy) {
    case AutoAugmentPolicy::kCifar10:
      return cifar10;
    case AutoAugmentPolicy::kSvhn:
      return svhn;
    case AutoAugmentPolicy::kImageNet:
      break;
  }
  return imagenet;
}

Result<double> AugmentMagnitude(OpKind family, int op, int num_bins, int bin, int width,
                                int height) {
  if (op < 0 || op > static_cast<int>(AugmentOp::kInvert) || bin < 0 || bin >= num_bins) {
    return Status::InvalidArgument("AugmentMagnitude: op or bin out of range");
  }
  const bool wide = family == OpKind::kTrivialAugmentWide;
  switch (static_cast<AugmentOp>(op)) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY:
      return TorchLinspace(0.0, wide ? 0.99 : 0.3, num_bins, bin);
    case AugmentOp::kTranslateX:
      return TorchLinspace(0.0, wide ? 32.0 : 150.0 / 331.0 * width, num_bins, bin);
    case AugmentOp::kTranslateY:
      return TorchLinspace(0.0, wide ? 32.0 : 150.0 / 331.0 * height, num_bins, bin);
    case AugmentOp::kRotate:
      return TorchLinspace(0.0, wide ? 135.0 : 30.0, num_bins, bin);
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness:
      return TorchLinspace(0.0, wide ? 0.99 : 0.9, num_bins, bin);
    case AugmentOp::kPosterize: {
      // 8 - round(arange(bins) / ((bins - 1) / d)) in float32, halves to even.
      const float divisor = static_cast<float>((num_bins - 1) / (wide ? 6.0 : 4.0));
      return 8 - static_cast<int>(std::nearbyint(static_cast<float>(bin) / divisor));
    }
    case AugmentOp::kSolarize:
      return TorchLinspace(255.0, 0.0, num_bins, bin);
    default:
      return 0.0;
  }
}

Result<double> AugMixMagnitude(AugMixOp op, int bin, int width, int height) {
  constexpr int kBins = 10;  // AugMix's _PARAMETER_MAX
  if (bin < 0 || bin >= kBins) return Status::InvalidArgument("AugMixMagnitude: bin out of range");
  switch (op) {
    case AugMixOp::kShearX:
    case AugMixOp::kShearY:
      return TorchLinspace(0.0, 0.3, kBins, bin);
    case AugMixOp::kTranslateX:
      return TorchLinspace(0.0, width / 3.0, kBins, bin);
    case AugMixOp::kTranslateY:
      return TorchLinspace(0.0, height / 3.0, kBins, bin);
    case AugMixOp::kRotate:
      return TorchLinspace(0.0, 30.0, kBins, bin);
    case AugMixOp::kPosterize: {
      // 4 - round(arange(bins) / ((bins - 1) / 4)) in float32, halves to even.
      const auto divisor = static_cast<float>((kBins - 1) / 4.0);
      return 4 - static_cast<int>(std::nearbyint(static_cast<float>(bin) / divisor));
    }
    case AugMixOp::kSolarize:
      return TorchLinspace(255.0, 0.0, kBins, bin);
    case AugMixOp::kBrightness:
    case AugMixOp::kColor:
    case AugMixOp::kContrast:
    case AugMixOp::kSharpness:
      return TorchLinspace(0.0, 0.9, kBins, bin);
    default:
      return 0.0;
  }
}

}  // namespace galley::image
