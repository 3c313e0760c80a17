// The random parameters galley draws follow torchvision's distributions.
//
// galley does not use torch's generator, so single draws differ; what must
// match is the law of each draw: uniform factors and angles (Kolmogorov-
// Smirnov), uniform permutations, op choices and magnitude bins, rounded
// translations and crop offsets (chi-square against the exact cell
// probabilities), and Bernoulli decisions (binomial z-score). Thresholds are
// the 0.1% critical values, so a correct implementation fails about once in
// a thousand runs per assertion; the seeds are fixed, so runs are repeatable.
// Each test draws through DescribeSample (server/image/testing), which
// reports the plan Apply runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "galley/image/testing/transform_test_paths.h"
#include "galley/image/transforms.h"

namespace galley::image {
namespace {

using nlohmann::json;

constexpr int kDraws = 20000;

// A pipeline of `ops`; a final CenterCrop fixes the output size when the
// ops leave it to the input.
TransformPipeline Pipeline(json ops) {
  const bool sized = std::any_of(ops.begin(), ops.end(), [](const json& op) {
    return op["op"] == "CenterCrop" || op["op"] == "RandomCrop";
  });
  if (!sized) ops.push_back({{"op", "CenterCrop"}, {"size", 16}});
  auto pipeline = TransformPipeline::FromJson({{"ops", std::move(ops)}});
  EXPECT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  return std::move(pipeline).value();
}

// The pixel steps of each of kDraws samples of a width x height image.
std::vector<json> Draws(const TransformPipeline& pipeline, int width = 100, int height = 80) {
  std::vector<json> draws;
  for (int item = 0; item < kDraws; ++item) {
    auto steps = DescribeSample(pipeline, width, height, 7, 3, item);
    EXPECT_TRUE(steps.ok());
    draws.push_back(*steps);
  }
  return draws;
}

// sqrt(n) * sup |F_n - F|; below 1.95 with probability 0.999.
double KsUniform(std::vector<double> values, double low, double high) {
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  double d = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double f = (values[i] - low) / (high - low);
    d = std::max({d, (i + 1) / n - f, f - i / n});
  }
  return d * std::sqrt(n);
}

double ChiSquare(const std::vector<double>& observed, const std::vector<double>& probabilities) {
  double total = 0;
  for (double o : observed) total += o;
  double chi = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double expected = total * probabilities[i];
    chi += (observed[i] - expected) * (observed[i] - expected) / expected;
  }
  return chi;
}

// The 0.1% upper critical value of chi-square with `df` degrees of freedom
// (Wilson-Hilferty approximation, within 1% for df >= 3).
double ChiSquareCritical(int df) {
  const double z = 3.0902;  // standard normal 0.999 quantile
  const double k = df;
  return k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
}

double BinomialZ(int successes, int n, double p) {
  return std::abs(successes - n * p) / std::sqrt(n * p * (1 - p));
}

std::vector<json> PixelSteps(const json& steps, const std::string& kind = "") {
  std::vector<json> out;
  for (const json& step : steps) {
    if (step["step"] == "pixel" && (kind.empty() || step["kind"] == kind)) out.push_back(step);
  }
  return out;
}

TEST(TransformDrawsTest, ColorJitterOrderIsAUniformPermutationAndFactorsUniform) {
  const auto draws = Draws(Pipeline({{{"op", "ColorJitter"},
                                      {"brightness", 0.4},
                                      {"contrast", {0.5, 1.5}},
                                      {"saturation", 0.3},
                                      {"hue", 0.2}}}));
  std::map<std::string, double> orders;
  std::map<std::string, std::vector<double>> factors;
  for (const json& steps : draws) {
    std::string order;
    for (const json& step : PixelSteps(steps)) {
      order += step["kind"].get<std::string>().substr(0, 1);
      factors[step["kind"]].push_back(step["v"][0]);
    }
    ASSERT_EQ(order.size(), 4u);
    orders[order] += 1;
  }
  ASSERT_EQ(orders.size(), 24u);  // every permutation occurs
  std::vector<double> counts;
  for (const auto& [order, count] : orders) counts.push_back(count);
  EXPECT_LT(ChiSquare(counts, std::vector<double>(24, 1.0 / 24)), ChiSquareCritical(23));
  EXPECT_LT(KsUniform(factors["brightness"], 0.6, 1.4), 1.95);
  EXPECT_LT(KsUniform(factors["contrast"], 0.5, 1.5), 1.95);
  EXPECT_LT(KsUniform(factors["saturation"], 0.7, 1.3), 1.95);
  EXPECT_LT(KsUniform(factors["hue"], -0.2, 0.2), 1.95);
}

TEST(TransformDrawsTest, RotationAngleAndBlurSigmaAreUniform) {
  const auto draws = Draws(Pipeline(
      {{{"op", "RandomRotation"}, {"degrees", 30}}, {{"op", "GaussianBlur"}, {"kernel_size", 5}}}));
  std::vector<double> angles, sigmas;
  for (const json& steps : draws) {
    angles.push_back(PixelSteps(steps, "rotate").at(0)["v"][0]);
    sigmas.push_back(PixelSteps(steps, "blur").at(0)["v"][0]);
  }
  EXPECT_LT(KsUniform(angles, -30, 30), 1.95);
  EXPECT_LT(KsUniform(sigmas, 0.1, 2.0), 1.95);  // torchvision's default sigma range
}

TEST(TransformDrawsTest, AffineTranslationIsARoundedUniformAndShearsUniform) {
  // 100 x 80 image, translate (0.1, 0.2): tx = round(U(-10, 10)), ty =
  // round(U(-16, 16)); the end cells are half as likely.
  const auto draws = Draws(Pipeline({{{"op", "RandomAffine"},
                                      {"degrees", 0},
                                      {"translate", {0.1, 0.2}},
                                      {"scale", {0.8, 1.2}},
                                      {"shear", {-5, 5, 2, 9}}}}));
  std::vector<double> tx(21), ty(33), scales, shear_x, shear_y;
  for (const json& steps : draws) {
    const json v = PixelSteps(steps, "affine").at(0)["v"];
    tx.at(static_cast<int>(v[1].get<double>()) + 10) += 1;
    ty.at(static_cast<int>(v[2].get<double>()) + 16) += 1;
    scales.push_back(v[3]);
    shear_x.push_back(v[4]);
    shear_y.push_back(v[5]);
  }
  auto rounded_uniform = [](int m) {
    std::vector<double> p(2 * m + 1, 1.0 / (2 * m));
    p.front() = p.back() = 0.5 / (2 * m);
    return p;
  };
  EXPECT_LT(ChiSquare(tx, rounded_uniform(10)), ChiSquareCritical(20));
  EXPECT_LT(ChiSquare(ty, rounded_uniform(16)), ChiSquareCritical(32));
  EXPECT_LT(KsUniform(scales, 0.8, 1.2), 1.95);
  EXPECT_LT(KsUniform(shear_x, -5, 5), 1.95);
  EXPECT_LT(KsUniform(shear_y, 2, 9), 1.95);
}

TEST(TransformDrawsTest, RandomCropOffsetsAreUniformAfterPadding) {
  // 40 x 30 image, padding 4: 48 x 38; RandomCrop(32) offsets y in [0, 6],
  // x in [0, 16], each uniform.
  const auto draws =
      Draws(Pipeline({{{"op", "RandomCrop"}, {"size", 32}, {"padding", 4}}}), 40, 30);
  std::vector<double> xs(17), ys(7);
  for (const json& steps : draws) {
    for (const json& step : steps) {
      if (step["step"] != "crop") continue;
      xs.at(step["x"].get<int>()) += 1;
      ys.at(step["y"].get<int>()) += 1;
    }
  }
  EXPECT_LT(ChiSquare(xs, std::vector<double>(17, 1.0 / 17)), ChiSquareCritical(16));
  EXPECT_LT(ChiSquare(ys, std::vector<double>(7, 1.0 / 7)), ChiSquareCritical(6));
}

TEST(TransformDrawsTest, BernoulliOpsHappenWithProbabilityP) {
  const auto draws =
      Draws(Pipeline({{{"op", "RandomVerticalFlip"}, {"p", 0.3}},
                      {{"op", "RandomGrayscale"}},  // torchvision's default p = 0.1
                      {{"op", "RandomApply"},
                       {"transforms", {{{"op", "ColorJitter"}, {"brightness", 0.5}}}},
                       {"p", 0.8}},
                      {{"op", "CenterCrop"}, {"size", 40}},
                      {{"op", "RandomErasing"}, {"p", 0.25}}}));
  int flips = 0, grays = 0, applied = 0, erased = 0;
  for (const json& steps : draws) {
    flips += !PixelSteps(steps, "vflip").empty();
    grays += !PixelSteps(steps, "grayscale").empty();
    applied += !PixelSteps(steps, "brightness").empty();
    for (const json& step : steps) {
      if (step["step"] != "erase") continue;
      ++erased;
      // torchvision keeps an erasing rectangle only if strictly smaller.
      EXPECT_LT(step["width"].get<int>(), 40);
      EXPECT_LT(step["height"].get<int>(), 40);
    }
  }
  EXPECT_LT(BinomialZ(flips, kDraws, 0.3), 4);
  EXPECT_LT(BinomialZ(grays, kDraws, 0.1), 4);
  EXPECT_LT(BinomialZ(applied, kDraws, 0.8), 4);
  // A 40 x 40 output always admits one of the ten tries in practice, so the
  // erasing rate is p (torchvision's rule, measured the same way there).
  EXPECT_LT(BinomialZ(erased, kDraws, 0.25), 4);
}

TEST(TransformDrawsTest, RandomChoiceFollowsWeightsAndRandomOrderIsUniform) {
  const auto choices = Draws(Pipeline({{{"op", "RandomChoice"},
                                        {"transforms",
                                         {{{"op", "Grayscale"}, {"num_output_channels", 3}},
                                          {{"op", "RandomVerticalFlip"}, {"p", 1.0}},
                                          {{"op", "ColorJitter"}, {"hue", 0.1}}}},
                                        {"p", {1, 2, 5}}}}));
  std::vector<double> chosen(3);
  for (const json& steps : choices) {
    const std::string kind = PixelSteps(steps).at(0)["kind"];
    chosen[kind == "grayscale" ? 0 : kind == "vflip" ? 1 : 2] += 1;
  }
  EXPECT_LT(ChiSquare(chosen, {1.0 / 8, 2.0 / 8, 5.0 / 8}), ChiSquareCritical(2) + 2);

  const auto orders = Draws(Pipeline({{{"op", "RandomOrder"},
                                       {"transforms",
                                        {{{"op", "Grayscale"}, {"num_output_channels", 3}},
                                         {{"op", "RandomVerticalFlip"}, {"p", 1.0}},
                                         {{"op", "ColorJitter"}, {"hue", 0.1}}}}}}));
  std::map<std::string, double> seen;
  for (const json& steps : orders) {
    std::string order;
    for (const json& step : PixelSteps(steps)) order += step["kind"].get<std::string>()[0];
    seen[order] += 1;
  }
  ASSERT_EQ(seen.size(), 6u);
  std::vector<double> counts;
  for (const auto& [order, count] : seen) counts.push_back(count);
  EXPECT_LT(ChiSquare(counts, std::vector<double>(6, 1.0 / 6)), ChiSquareCritical(5));
}

// The pixel kind an augment op becomes, for the 14 ops RandAugment and
// TrivialAugmentWide choose from: Identity leaves no step, the shears and
// translations are affine.
std::string KindOf(const json& steps) {
  const auto pixel = PixelSteps(steps);
  return pixel.empty() ? "identity" : pixel[0]["kind"].get<std::string>();
}

TEST(TransformDrawsTest, TrivialAugmentOpsAndBinsAreUniform) {
  const auto draws = Draws(Pipeline({{{"op", "TrivialAugmentWide"}}}));
  const std::vector<std::string> kinds = {"identity",   "affine",       "rotate",    "brightness",
                                          "saturation", "contrast",     "sharpness", "posterize",
                                          "solarize",   "autocontrast", "equalize"};
  std::vector<double> counts(kinds.size());
  std::vector<double> rotate_bins(31);
  for (const json& steps : draws) {
    const std::string kind = KindOf(steps);
    const auto at = std::find(kinds.begin(), kinds.end(), kind);
    ASSERT_NE(at, kinds.end()) << kind;
    counts[at - kinds.begin()] += 1;
    if (kind == "rotate") {
      // Rotate's magnitudes are linspace(0, 135, 31): 4.5 degrees apart.
      const double angle = std::abs(PixelSteps(steps)[0]["v"][0].get<double>());
      rotate_bins.at(static_cast<int>(std::lround(angle / 4.5))) += 1;
    }
  }
  std::vector<double> p(kinds.size(), 1.0 / 14);
  p[1] = 4.0 / 14;  // ShearX, ShearY, TranslateX, TranslateY
  EXPECT_LT(ChiSquare(counts, p), ChiSquareCritical(10));
  EXPECT_LT(ChiSquare(rotate_bins, std::vector<double>(31, 1.0 / 31)), ChiSquareCritical(30));
}

TEST(TransformDrawsTest, RandAugmentDrawsNumOpsUniformOpsAtTheFixedMagnitude) {
  const auto draws = Draws(Pipeline({{{"op", "RandAugment"}, {"num_ops", 2}, {"magnitude", 9}}}));
  int rotations = 0, positive = 0;
  for (const json& steps : draws) {
    EXPECT_LE(PixelSteps(steps).size(), 2u);
    for (const json& step : PixelSteps(steps, "rotate")) {
      // linspace(0, 30, 31)[9] = 9 degrees, either sign.
      EXPECT_NEAR(std::abs(step["v"][0].get<double>()), 9.0, 1e-5);
      ++rotations;
      positive += step["v"][0].get<double>() > 0;
    }
  }
  EXPECT_LT(BinomialZ(rotations, 2 * kDraws, 1.0 / 14), 4);
  EXPECT_LT(BinomialZ(positive, rotations, 0.5), 4);
}

TEST(TransformDrawsTest, AutoAugmentImageNetStepFrequenciesFollowThePolicy) {
  // Expected steps per sample, from the ImageNet policy: each of the 25
  // sub-policies with probability 1/25, each of its two ops with its p.
  const auto draws = Draws(Pipeline({{{"op", "AutoAugment"}}}));
  std::map<std::string, double> counts;
  for (const json& steps : draws) {
    for (const json& step : PixelSteps(steps)) counts[step["kind"]] += 1;
  }
  // Sum of p over the policy's ops of each kind, divided by 25 (Cubuk et
  // al.'s ImageNet policy; Color is a saturation step, ShearX an affine one).
  const std::map<std::string, double> expected_per_sample = {
      {"affine", 0.6 / 25},    {"autocontrast", 1.2 / 25}, {"contrast", 2.0 / 25},
      {"equalize", 11.2 / 25}, {"invert", 1.8 / 25},       {"posterize", 2.8 / 25},
      {"rotate", 3.6 / 25},    {"saturation", 3.8 / 25},   {"sharpness", 0.4 / 25},
      {"solarize", 3.6 / 25},
  };
  EXPECT_EQ(counts.size(), expected_per_sample.size());
  for (const auto& [kind, rate] : expected_per_sample) {
    // Each kind's count is a sum of independent Bernoullis: z-score against
    // its mean, with the binomial variance as a bound.
    EXPECT_LT(std::abs(counts[kind] - kDraws * rate) / std::sqrt(kDraws * rate), 4) << kind;
  }
}

// sqrt(n) * sup |F_n - F| for a continuous cdf; below 1.95 with probability
// 0.999.
template <typename Cdf>
double Ks(std::vector<double> values, Cdf cdf) {
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  double d = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double f = cdf(values[i]);
    d = std::max({d, (i + 1) / n - f, f - i / n});
  }
  return d * std::sqrt(n);
}

// AugMix.forward: m ~ Dirichlet(alpha, alpha), so the original's weight is
// Beta(alpha, alpha); the chains' weights are m1 times Dirichlet(alpha, ...,
// alpha), whose marginals are Beta(alpha, (width - 1) alpha); depths uniform
// in 1..3, ops uniform over 13 (all_ops) or 9, magnitude bins uniform below
// severity, signs fair.
TEST(TransformDrawsTest, AugMixWeightsDepthsOpsBinsAndSignsFollowTorchvision) {
  const std::vector<std::string> names = {
      "ShearX",       "ShearY",   "TranslateX", "TranslateY", "Rotate",   "Posterize", "Solarize",
      "AutoContrast", "Equalize", "Brightness", "Color",      "Contrast", "Sharpness"};
  for (const double alpha : {1.0, 0.5}) {
    const auto draws = Draws(
        Pipeline({{{"op", "AugMix"}, {"severity", 4}, {"mixture_width", 3}, {"alpha", alpha}}}));
    std::vector<double> original, first_share;
    std::vector<double> depths(3), ops(names.size()), rotate_bins(4);
    int signed_steps = 0, negative = 0;
    for (const json& steps : draws) {
      const auto augmix = PixelSteps(steps, "augmix");
      ASSERT_EQ(augmix.size(), 1u);
      const json& draw = augmix[0]["augmix"];
      const double m0 = draw["original_weight"].get<double>();
      original.push_back(m0);
      double chains = 0;
      for (const json& w : draw["weights"]) chains += w.get<double>();
      EXPECT_NEAR(m0 + chains, 1.0, 1e-5);
      first_share.push_back(draw["weights"][0].get<double>() / chains);
      for (const json& chain : draw["chains"]) {
        depths.at(chain.size() - 1) += 1;
        for (const json& step : chain) {
          const std::string op = step["op"];
          const auto at = std::find(names.begin(), names.end(), op);
          ASSERT_NE(at, names.end()) << op;
          ops[at - names.begin()] += 1;
          const double magnitude = step["magnitude"].get<double>();
          if (at - names.begin() <= 4 || at - names.begin() >= 9) {
            ++signed_steps;
            negative += std::signbit(magnitude) ? 1 : 0;
          }
          // Rotate: linspace(0, 30, 10), 10/3 degrees apart.
          if (op == "Rotate") rotate_bins.at(std::lround(std::abs(magnitude) / (30.0 / 9))) += 1;
        }
      }
    }
    // Beta(1, 1) is uniform and Beta(1, 2) has cdf 1 - (1 - x)^2; Beta(1/2,
    // 1/2) is the arcsine law and Beta(1/2, 1) has cdf sqrt(x).
    auto original_cdf = [alpha](double x) {
      return alpha == 1.0 ? x : 2 / M_PI * std::asin(std::sqrt(x));
    };
    auto share_cdf = [alpha](double x) {
      return alpha == 1.0 ? 1 - (1 - x) * (1 - x) : std::sqrt(x);
    };
    EXPECT_LT(Ks(original, original_cdf), 1.95) << alpha;
    EXPECT_LT(Ks(first_share, share_cdf), 1.95) << alpha;
    EXPECT_LT(ChiSquare(depths, {1.0 / 3, 1.0 / 3, 1.0 / 3}), ChiSquareCritical(2));
    EXPECT_LT(ChiSquare(ops, std::vector<double>(names.size(), 1.0 / names.size())),
              ChiSquareCritical(static_cast<int>(names.size()) - 1));
    EXPECT_LT(ChiSquare(rotate_bins, std::vector<double>(4, 0.25)), ChiSquareCritical(3));
    EXPECT_LT(BinomialZ(negative, signed_steps, 0.5), 4);
  }
  // all_ops=False: only the first nine ops; chain_depth > 0 fixes the depth.
  const auto basic = Draws(
      Pipeline({{{"op", "AugMix"}, {"all_ops", false}, {"chain_depth", 2}, {"mixture_width", 2}}}));
  std::vector<double> ops(9);
  for (const json& steps : basic) {
    const json augmix = PixelSteps(steps, "augmix").at(0)["augmix"];
    for (const json& chain : augmix["chains"]) {
      ASSERT_EQ(chain.size(), 2u);
      for (const json& step : chain) {
        const auto at = std::find(names.begin(), names.end(), step["op"].get<std::string>());
        ASSERT_LT(at - names.begin(), 9) << step.dump();
        ops[at - names.begin()] += 1;
      }
    }
  }
  EXPECT_LT(ChiSquare(ops, std::vector<double>(9, 1.0 / 9)), ChiSquareCritical(8));
}

}  // namespace
}  // namespace galley::image
