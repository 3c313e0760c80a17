// The tensor-path ops (tensor_ops.h) and AugMix against torchvision 0.14 on
// the same pixels with the same forced parameters. The references are
// computed by /usr/bin/python3 when the test runs: the ops by
// torchvision.transforms.functional on uint8 tensors; AugMix by
// torchvision's own AugMix.forward on a PIL image, its Dirichlet draws
// replaced through its _sample_dirichlet hook and its torch.randint draws
// (depths, ops, magnitude bins, signs) fed in order, so its chains and
// weights are the ones galley is given. The measured figures are printed
// (docs/transforms.md quotes them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "galley/image/augment_policies.h"
#include "galley/image/pixel_ops.h"
#include "galley/image/tensor_ops.h"
#include "galley/image/transforms.h"
#include "tests/unit/rgb_test_images.h"

namespace galley::image {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kReferenceScript = R"PY(
import json, sys
import numpy as np
import torch
from PIL import Image
import torchvision.transforms as TV
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode as IM

work = sys.argv[1]
modes = {"nearest": IM.NEAREST, "bilinear": IM.BILINEAR}
for i, c in enumerate(json.load(open(f"{work}/cases.json"))):
    pixels = np.fromfile(f"{work}/{c['input']}", np.uint8).reshape(c["height"], c["width"], 3)
    t = torch.from_numpy(pixels.copy()).permute(2, 0, 1).contiguous()
    op, a = c["op"], c["args"]
    if op == "augmix":
        aug = TV.AugMix(severity=a["severity"], mixture_width=a["width"],
                        chain_depth=a["chain_depth"], all_ops=a["all_ops"],
                        interpolation=modes[a["interpolation"]], fill=a["fill"])
        dirichlet = [torch.tensor([a["m"]]), torch.tensor([a["raw"]])]
        aug._sample_dirichlet = lambda params: dirichlet.pop(0)
        draws = list(a["randints"])
        real = torch.randint
        torch.randint = lambda *args, **kwargs: torch.tensor([draws.pop(0)])
        try:
            out = np.asarray(aug(Image.fromarray(pixels, "RGB")))
        finally:
            torch.randint = real
        assert not draws and not dirichlet, (draws, dirichlet)
    else:
        if op == "brightness": r = F.adjust_brightness(t, a["factor"])
        elif op == "saturation": r = F.adjust_saturation(t, a["factor"])
        elif op == "contrast": r = F.adjust_contrast(t, a["factor"])
        elif op == "sharpness": r = F.adjust_sharpness(t, a["factor"])
        elif op == "autocontrast": r = F.autocontrast(t)
        elif op == "affine":
            r = F.affine(t, angle=a["angle"], translate=a["translate"], scale=1.0,
                         shear=a["shear"], interpolation=modes[a["interpolation"]],
                         fill=a["fill"], center=[0, 0] if a["origin"] else None)
        elif op == "rotate":
            r = F.rotate(t, a["angle"], interpolation=modes[a["interpolation"]], fill=a["fill"])
        out = r.permute(1, 2, 0).numpy()
    np.ascontiguousarray(out, np.uint8).tofile(f"{work}/out{i}.raw")
)PY";

using Image = TestImage;

struct Case {
  std::string op;
  json args;
  int input = 0;
  std::function<Image(Image&)> apply;
};

json FillJson(const TensorFill& fill) { return fill ? json(*fill) : json(nullptr); }

// A random AugMix draw, and the torch.randint values that make
// torchvision's AugMix.forward draw the same.
struct ForcedAugMix {
  AugMixDraw draw;
  json args;
};

ForcedAugMix RandomAugMix(std::mt19937& rng, int width, int height) {
  auto integer = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(rng);
  };
  auto uniform = [&](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  };
  ForcedAugMix forced;
  AugMixDraw& draw = forced.draw;
  const int severity = integer(1, 10);
  const int chain_depth = integer(0, 1) == 0 ? -1 : integer(1, 3);
  const bool all_ops = integer(0, 3) != 0;
  draw.width = integer(1, 4);
  const auto m0 = static_cast<float>(uniform(0.05, 0.95));
  const float m1 = 1.0f - m0;
  std::vector<float> raw(draw.width);
  double total = 0;
  for (float& w : raw) total += w = static_cast<float>(uniform(0.1, 1.0));
  for (float& w : raw) w = static_cast<float>(w / total);
  draw.original_weight = m0;
  json randints = json::array();
  for (int i = 0; i < draw.width; ++i) {
    draw.weights[i] = raw[i] * m1;
    draw.depths[i] = chain_depth > 0 ? chain_depth : integer(1, 3);
    if (chain_depth <= 0) randints.push_back(draw.depths[i]);
    for (int d = 0; d < draw.depths[i]; ++d) {
      const int op = integer(0, (all_ops ? kAugMixAllOps : kAugMixBasicOps) - 1);
      randints.push_back(op);
      AugMixStep& step = draw.steps[i][d];
      step.op = static_cast<AugMixOp>(op);
      if (step.op != AugMixOp::kAutoContrast && step.op != AugMixOp::kEqualize) {
        const int bin = integer(0, severity - 1);
        randints.push_back(bin);
        step.magnitude = *AugMixMagnitude(step.op, bin, width, height);
      }
      if (step.op <= AugMixOp::kRotate || step.op >= AugMixOp::kBrightness) {
        const int negative = integer(0, 1);
        randints.push_back(negative);
        if (negative == 1) step.magnitude = -step.magnitude;
      }
    }
  }
  forced.args = {{"severity", severity}, {"width", draw.width}, {"chain_depth", chain_depth},
                 {"all_ops", all_ops},   {"m", {m0, m1}},       {"raw", raw},
                 {"randints", randints}};
  return forced;
}

std::vector<Case> Cases(const std::vector<Image>& inputs) {
  std::vector<Case> cases;
  for (int input = 0; input < 3; ++input) {
    for (double f : {0.1, 0.55, 1.0, 1.37, 1.9}) {
      const json args = {{"factor", f}};
      auto add = [&](const char* op, void (*fn)(const RgbView&, const RgbSpan&, double)) {
        cases.push_back({op, args, input, [fn, f](Image& src) {
                           Image dst = Blank(src.width, src.height);
                           fn(src.Span(), dst.Span(), f);
                           return dst;
                         }});
      };
      add("brightness", TensorAdjustBrightness);
      add("saturation", TensorAdjustSaturation);
      add("contrast", TensorAdjustContrast);
      add("sharpness", TensorAdjustSharpness);
    }
    cases.push_back({"autocontrast", json::object(), input, [](Image& src) {
                       Image dst = Blank(src.width, src.height);
                       TensorAutoContrast(src.Span(), dst.Span());
                       return dst;
                     }});
  }
  struct Warp {
    double angle, tx, ty, shear_x, shear_y;
    bool origin;
  };
  const std::vector<Warp> warps = {{0, 0, 0, 16.7, 0, true}, {0, 0, 0, 0, -12.4, true},
                                   {0, 11, 0, 0, 0, false},  {0, 0, -7, 0, 0, false},
                                   {0, -40, 0, 0, 0, false}, {0, 0, 0, 0, 0, false}};
  const std::vector<TensorFill> fills = {std::nullopt, std::array<float, 3>{10, 127.5f, 250},
                                         std::array<float, 3>{0, 0, 0}};
  for (int input = 0; input < 3; ++input) {
    for (const char* mode : {"nearest", "bilinear"}) {
      const bool bilinear = std::string(mode) == "bilinear";
      for (const TensorFill& fill : fills) {
        for (const Warp& w : warps) {
          cases.push_back({"affine",
                           {{"angle", w.angle},
                            {"translate", {w.tx, w.ty}},
                            {"shear", {w.shear_x, w.shear_y}},
                            {"interpolation", mode},
                            {"fill", FillJson(fill)},
                            {"origin", w.origin}},
                           input,
                           [w, bilinear, fill](Image& src) {
                             Image dst = Blank(src.width, src.height);
                             const double cx = w.origin ? -src.width * 0.5 : 0.0;
                             const double cy = w.origin ? -src.height * 0.5 : 0.0;
                             TensorAffineWarp(src.Span(), dst.Span(),
                                              InverseAffineMatrix(cx, cy, w.angle, w.tx, w.ty, 1,
                                                                  w.shear_x, w.shear_y),
                                              bilinear, fill);
                             return dst;
                           }});
        }
        for (double angle : {7.0, -29.3, 90.0, 180.0}) {
          cases.push_back({"rotate",
                           {{"angle", angle}, {"interpolation", mode}, {"fill", FillJson(fill)}},
                           input,
                           [angle, bilinear, fill](Image& src) {
                             Image dst = Blank(src.width, src.height);
                             TensorAffineWarp(src.Span(), dst.Span(),
                                              InverseAffineMatrix(0, 0, -angle, 0, 0, 1, 0, 0),
                                              bilinear, fill);
                             return dst;
                           }});
        }
      }
    }
  }
  std::mt19937 rng(11);
  for (int k = 0; k < 60; ++k) {
    const int input = k % 3;
    ForcedAugMix forced = RandomAugMix(rng, inputs[input].width, inputs[input].height);
    const bool bilinear = k % 4 != 3;
    const TensorFill fill =
        k % 5 == 4 ? TensorFill(std::array<float, 3>{128, 64.5f, 0}) : std::nullopt;
    forced.args["interpolation"] = bilinear ? "bilinear" : "nearest";
    forced.args["fill"] = FillJson(fill);
    cases.push_back(
        {"augmix", forced.args, input, [draw = forced.draw, bilinear, fill](Image& src) {
           Image dst = Blank(src.width, src.height);
           AugMix(src.Span(), dst.Span(), draw, bilinear, fill);
           return dst;
         }});
  }
  return cases;
}

TEST(TensorOpsParityTest, OpsAndAugMixMatchTorchvision) {
  std::vector<Image> inputs = {Textured(67, 53, 1), Textured(48, 48, 2, 25, 60, 190),
                               Textured(224, 224, 3)};
  const std::vector<Case> cases = Cases(inputs);
  json list = json::array();
  for (const Case& c : cases) list.push_back({{"op", c.op}, {"args", c.args}, {"input", c.input}});
  const auto references = RunPythonReference(GALLEY_TEST_PYTHON, kReferenceScript, inputs, list);
  ASSERT_EQ(references.size(), cases.size());

  std::map<std::string, std::tuple<int, int64_t, int64_t>> stats;  // max, differing, values
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Image ours = c.apply(inputs[c.input]);
    const std::vector<uint8_t>& expected = references[i];
    ASSERT_EQ(expected.size(), ours.pixels.size()) << c.op << " " << c.args.dump();
    int max_diff = 0;
    int64_t differing = 0;
    for (size_t k = 0; k < expected.size(); ++k) {
      const int diff = std::abs(ours.pixels[k] - expected[k]);
      max_diff = std::max(max_diff, diff);
      differing += diff != 0;
    }
    auto& [op_max, op_differing, op_values] = stats[c.op];
    op_max = std::max(op_max, max_diff);
    op_differing += differing;
    op_values += static_cast<int64_t>(expected.size());
    EXPECT_EQ(max_diff, 0) << c.op << " " << c.args.dump() << " on input " << c.input;
  }
  for (const auto& [op, s] : stats) {
    std::printf("tensor parity %-12s max |diff| %d  differing %lld of %lld values\n", op.c_str(),
                std::get<0>(s), static_cast<long long>(std::get<1>(s)),
                static_cast<long long>(std::get<2>(s)));
  }
}

// The AVX2 row kernel of the tensor warp against its one-pixel code, which
// the test above holds to torchvision, on random sizes, strides, matrices and
// fills.
TEST(TensorOpsFastPathTest, WarpKernelGivesTheSameBytesAsThePixelCode) {
  std::mt19937 rng(20261123);
  auto uniform = [&](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  };
  auto integer = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(rng);
  };
  for (int round = 0; round < 300; ++round) {
    const RandomWindow window(rng, round, 70, 45);
    const RgbView src = window.view;
    const int width = src.width, height = src.height;
    std::array<double, 6> m{};
    switch (round % 4) {
      case 0:
        m = InverseAffineMatrix(0, 0, uniform(-180, 180), uniform(-9, 9), uniform(-9, 9),
                                uniform(0.5, 2.0), uniform(-40, 40), uniform(-40, 40));
        break;
      case 1:
        m = InverseAffineMatrix(-width * 0.5, -height * 0.5, 0, 0, 0, 1, uniform(-17, 17), 0);
        break;
      case 2:
        m = InverseAffineMatrix(0, 0, 0, integer(-80, 80), integer(-50, 50), 1, 0, 0);
        break;
      default:
        m = {uniform(-3, 3), uniform(-3, 3), uniform(-90, 90),
             uniform(-3, 3), uniform(-3, 3), uniform(-90, 90)};
        break;
    }
    const TensorFill fill =
        round % 3 == 0
            ? TensorFill(std::array<float, 3>{static_cast<float>(uniform(0, 255)), 7.5f, 200})
            : std::nullopt;
    for (const bool bilinear : {false, true}) {
      Image fast = Blank(width, height), plain = Blank(width, height);
      TensorAffineWarp(src, fast.Span(), m, bilinear, fill, true);
      TensorAffineWarp(src, plain.Span(), m, bilinear, fill, false);
      ASSERT_EQ(fast.pixels, plain.pixels) << "round " << round << " bilinear " << bilinear;
    }
  }
}

}  // namespace
}  // namespace galley::image
