// Pixel ops against torchvision 0.14 on PIL images (Pillow 9.4), op by op,
// with the same forced parameters: the reference is computed by
// /usr/bin/python3 with torchvision.transforms.functional on the same pixels,
// in a temporary directory, when the test runs. Every op is expected to be
// identical (max |diff| 0) except GaussianBlur, whose reference is a float32
// 2-D convolution (torchvision's tensor kernel): there a sum that lands
// near .5 may round the other way, so one level on a few pixels is allowed.
// The measured figures are printed (docs/transforms.md quotes them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "galley/image/augment_policies.h"
#include "galley/image/pixel_ops.h"
#include "galley/image/transforms.h"
#include "tests/unit/rgb_test_images.h"

namespace galley::image {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kReferenceScript = R"PY(
import json, sys
import numpy as np
from PIL import Image
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode as IM

work = sys.argv[1]
modes = {"nearest": IM.NEAREST, "bilinear": IM.BILINEAR, "bicubic": IM.BICUBIC}
for i, c in enumerate(json.load(open(f"{work}/cases.json"))):
    pixels = np.fromfile(f"{work}/{c['input']}", np.uint8).reshape(c["height"], c["width"], 3)
    img = Image.fromarray(pixels, "RGB")
    op, a = c["op"], c["args"]
    if op == "brightness": out = F.adjust_brightness(img, a["factor"])
    elif op == "contrast": out = F.adjust_contrast(img, a["factor"])
    elif op == "saturation": out = F.adjust_saturation(img, a["factor"])
    elif op == "sharpness": out = F.adjust_sharpness(img, a["factor"])
    elif op == "hue": out = F.adjust_hue(img, a["factor"])
    elif op == "grayscale": out = F.rgb_to_grayscale(img, num_output_channels=3)
    elif op == "posterize": out = F.posterize(img, a["bits"])
    elif op == "solarize": out = F.solarize(img, a["threshold"])
    elif op == "autocontrast": out = F.autocontrast(img)
    elif op == "equalize": out = F.equalize(img)
    elif op == "invert": out = F.invert(img)
    elif op == "vflip": out = F.vflip(img)
    elif op == "pad":
        out = F.pad(img, a["padding"], fill=tuple(a["fill"]), padding_mode=a["mode"])
    elif op == "affine":
        out = F.affine(img, angle=a["angle"], translate=a["translate"], scale=a["scale"],
                       shear=a["shear"], interpolation=modes[a["interpolation"]],
                       fill=a["fill"], center=[0, 0] if a["origin"] else None)
    elif op == "rotate":
        out = F.rotate(img, a["angle"], interpolation=modes[a["interpolation"]], fill=a["fill"])
    elif op == "blur":
        out = F.gaussian_blur(img, [a["kw"], a["kh"]], [a["sx"], a["sy"]])
    np.ascontiguousarray(np.asarray(out, np.uint8)).tofile(f"{work}/out{i}.raw")
)PY";

using Image = TestImage;

struct Case {
  std::string op;
  json args;
  int input = 0;
  int max_diff = 0;  // allowed
  std::function<Image(Image&)> apply;
};

WarpInterpolation ModeOf(const std::string& name) {
  if (name == "bilinear") return WarpInterpolation::kBilinear;
  if (name == "bicubic") return WarpInterpolation::kBicubic;
  return WarpInterpolation::kNearest;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto simple = [&](const std::string& op, json args, std::function<void(RgbSpan, RgbSpan)> fn) {
    for (int input = 0; input < 2; ++input) {
      cases.push_back({op, args, input, 0, [fn](Image& src) {
                         Image dst = Blank(src.width, src.height);
                         fn(src.Span(), dst.Span());
                         return dst;
                       }});
    }
  };
  for (double f : {0.0, 0.35, 1.0, 1.7}) {
    simple("brightness", {{"factor", f}}, [f](RgbSpan s, RgbSpan d) { AdjustBrightness(s, d, f); });
    simple("contrast", {{"factor", f}}, [f](RgbSpan s, RgbSpan d) { AdjustContrast(s, d, f); });
    simple("saturation", {{"factor", f}}, [f](RgbSpan s, RgbSpan d) { AdjustSaturation(s, d, f); });
    simple("sharpness", {{"factor", f}}, [f](RgbSpan s, RgbSpan d) { AdjustSharpness(s, d, f); });
  }
  for (double f : {-0.5, -0.23, -0.01, 0.0, 0.05, 0.31, 0.5}) {
    simple("hue", {{"factor", f}}, [f](RgbSpan s, RgbSpan d) { AdjustHue(s, d, f); });
  }
  simple("grayscale", json::object(), [](RgbSpan s, RgbSpan d) { ToGrayscale(s, d); });
  for (int bits : {1, 4, 7, 8}) {
    simple("posterize", {{"bits", bits}}, [bits](RgbSpan s, RgbSpan d) { Posterize(s, d, bits); });
  }
  for (double t : {0.0, 93.5, 128.0, 255.0}) {
    simple("solarize", {{"threshold", t}}, [t](RgbSpan s, RgbSpan d) { Solarize(s, d, t); });
  }
  simple("autocontrast", json::object(), [](RgbSpan s, RgbSpan d) { AutoContrast(s, d); });
  simple("equalize", json::object(), [](RgbSpan s, RgbSpan d) { Equalize(s, d); });
  simple("invert", json::object(), [](RgbSpan s, RgbSpan d) { Invert(s, d); });
  simple("vflip", json::object(), [](RgbSpan s, RgbSpan d) { VerticalFlip(s, d); });

  const std::vector<std::pair<std::string, PadMode>> pad_modes = {
      {"constant", PadMode::kConstant},
      {"edge", PadMode::kEdge},
      {"reflect", PadMode::kReflect},
      {"symmetric", PadMode::kSymmetric}};
  // The lambdas below init-capture the structured bindings: clang 14 cannot
  // capture a binding by name.
  for (const auto& [name, mode] : pad_modes) {
    const std::array<int, 4> pad = {3, 5, 7, 2};  // left, top, right, bottom
    const Fill fill = {10, 200, 77};
    cases.push_back({"pad",
                     {{"padding", pad}, {"fill", fill}, {"mode", name}},
                     0,
                     0,
                     [pad, mode = mode, fill](Image& src) {
                       Image dst = Blank(src.width + pad[0] + pad[2], src.height + pad[1] + pad[3]);
                       PadPixels(src.Span(), dst.Span(), pad[0], pad[1], mode, fill);
                       return dst;
                     }});
  }

  struct AffineCase {
    double angle, tx, ty, scale, shear_x, shear_y;
    bool origin;
  };
  const std::vector<AffineCase> affines = {{17.3, 0, 0, 1.0, 0, 0, false},
                                           {-42.0, 3, -5, 1.0, 0, 0, false},
                                           {0, 0, 0, 1.0, 16.7, 0, true},
                                           {0, 0, 0, 1.0, 0, -12.4, true},
                                           {0, 11, 0, 1.0, 0, 0, false},
                                           {0, 0, -7, 1.0, 0, 0, false},
                                           {8.0, 2, 1, 1.15, 5.5, -3.0, false},
                                           {0, 0, 0, 0.8, 0, 0, false},
                                           // TrivialAugmentWide's extremes: shear atan(0.99) both
                                           // ways, 32 px translations (whole pixels: a copy).
                                           {0, 0, 0, 1.0, 44.71, 0, true},
                                           {0, 0, 0, 1.0, 0, -44.71, true},
                                           {0, -32, 0, 1.0, 0, 0, false},
                                           {0, 0, 32, 1.0, 0, 0, false}};
  for (const AffineCase& a : affines) {
    for (const char* mode : {"nearest", "bilinear", "bicubic"}) {
      const Fill fill = {0, 0, 0};
      cases.push_back({"affine",
                       {{"angle", a.angle},
                        {"translate", {a.tx, a.ty}},
                        {"scale", a.scale},
                        {"shear", {a.shear_x, a.shear_y}},
                        {"interpolation", mode},
                        {"fill", {0, 0, 0}},
                        {"origin", a.origin}},
                       a.origin || a.angle != 0 ? 2 : 1,
                       0,
                       [a, m = ModeOf(mode), fill](Image& src) {
                         Image dst = Blank(src.width, src.height);
                         Affine(src.Span(), dst.Span(), a.angle, a.tx, a.ty, a.scale, a.shear_x,
                                a.shear_y, m, fill, a.origin);
                         return dst;
                       }});
    }
  }
  for (double angle : {0.0, 90.0, 180.0, -270.0, 33.3, -121.0, 400.0, 7.0, -135.0}) {
    for (const char* mode : {"nearest", "bilinear", "bicubic"}) {
      const Fill fill = {128, 64, 32};
      cases.push_back({"rotate",
                       {{"angle", angle}, {"interpolation", mode}, {"fill", {128, 64, 32}}},
                       0,
                       0,
                       [angle, m = ModeOf(mode), fill](Image& src) {
                         Image dst = Blank(src.width, src.height);
                         Rotate(src.Span(), dst.Span(), angle, m, fill);
                         return dst;
                       }});
    }
  }
  for (auto [kw, kh, sx, sy] :
       std::vector<std::tuple<int, int, double, double>>{{3, 3, 0.1, 0.1},
                                                         {5, 5, 1.3, 1.3},
                                                         {9, 9, 2.0, 2.0},
                                                         {23, 23, 1.7, 1.7},
                                                         {7, 3, 1.1, 0.6}}) {
    cases.push_back({"blur",
                     {{"kw", kw}, {"kh", kh}, {"sx", sx}, {"sy", sy}},
                     0,
                     1,
                     [kw = kw, kh = kh, sx = sx, sy = sy](Image& src) {
                       Image dst = Blank(src.width, src.height);
                       GaussianBlur(src.Span(), dst.Span(), kw, kh, sx, sy);
                       return dst;
                     }});
  }
  return cases;
}

TEST(PixelOpsParityTest, EveryOpMatchesTorchvisionOnPil) {
  std::vector<Image> inputs = {Textured(67, 53, 1), Textured(48, 48, 2), Textured(224, 224, 3)};
  const std::vector<Case> cases = Cases();
  json list = json::array();
  for (const Case& c : cases) list.push_back({{"op", c.op}, {"args", c.args}, {"input", c.input}});
  const auto references = RunPythonReference(GALLEY_TEST_PYTHON, kReferenceScript, inputs, list);
  ASSERT_EQ(references.size(), cases.size());

  std::map<std::string, std::pair<int, double>> worst;  // op -> (max diff, worst mean diff)
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Image ours = c.apply(inputs[c.input]);
    const std::vector<uint8_t>& expected = references[i];
    ASSERT_EQ(expected.size(), ours.pixels.size()) << c.op << " " << c.args.dump();
    int max_diff = 0;
    int64_t total = 0, differing = 0;
    for (size_t k = 0; k < expected.size(); ++k) {
      const int diff = std::abs(ours.pixels[k] - expected[k]);
      max_diff = std::max(max_diff, diff);
      total += diff;
      differing += diff != 0;
    }
    const double mean = static_cast<double>(total) / static_cast<double>(expected.size());
    auto& [op_max, op_mean] = worst[c.op];
    op_max = std::max(op_max, max_diff);
    op_mean = std::max(op_mean, mean);
    EXPECT_LE(max_diff, c.max_diff) << c.op << " " << c.args.dump() << " on input " << c.input;
    if (c.max_diff > 0) {
      // Rounding ties only: at most 1% of values one level off.
      EXPECT_LT(static_cast<double>(differing) / expected.size(), 0.01) << c.op << c.args.dump();
    }
  }
  for (const auto& [op, figures] : worst) {
    std::printf("parity %-13s max |diff| %d  worst mean |diff| %.5f\n", op.c_str(), figures.first,
                figures.second);
  }
}

// The fast paths (AVX2 kernels, the copy for whole-pixel shifts, the row
// kernels) against the plain per-pixel code, which the test above holds to
// torchvision: on random sizes, strides, matrices, filters and factors the
// bytes must be identical.
TEST(PixelOpsFastPathsTest, GiveTheSameBytesAsThePortableCode) {
  std::mt19937 rng(20261123);
  auto uniform = [&](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  };
  auto integer = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(rng);
  };
  int compared = 0;
  for (int round = 0; round < 400; ++round) {
    // A window of a larger image (stride > width * 3) half of the time,
    // and a packed image whose last pixel ends the allocation otherwise.
    const RandomWindow window(rng, round, 70, 45);
    const RgbView src = window.view;
    const int width = src.width, height = src.height;
    const int out_width = integer(1, 75), out_height = integer(1, 40);
    std::array<double, 6> m{};
    const double cx = uniform(0, width), cy = uniform(0, height);
    switch (round % 8) {
      case 0:  // anything
        m = InverseAffineMatrix(cx, cy, uniform(-180, 180), uniform(-9, 9), uniform(-9, 9),
                                uniform(0.5, 2.0), uniform(-40, 40), uniform(-40, 40));
        break;
      case 1: {  // Image.rotate's matrix
        const double r = Radians(uniform(-360, 360));
        m = {std::cos(r), std::sin(r), 0, -std::sin(r), std::cos(r), 0};
        m[2] = m[0] * -cx + m[1] * -cy + cx;
        m[5] = m[3] * -cx + m[4] * -cy + cy;
        break;
      }
      case 2:  // AutoAugment's ShearX and ShearY about the origin
        m = InverseAffineMatrix(0, 0, 0, 0, 0, 1, uniform(-45, 45), 0);
        break;
      case 3:
        m = InverseAffineMatrix(0, 0, 0, 0, 0, 1, 0, uniform(-45, 45));
        break;
      case 4:  // whole-pixel translations, some leaving the image
        m = {1, 0, static_cast<double>(integer(-80, 80)),
             0, 1, static_cast<double>(integer(-50, 50))};
        break;
      case 5:  // one moving axis, with scale and shear along it
        m = {uniform(-2, 2),
             uniform(-1, 1),
             uniform(-20, 20),
             0,
             1,
             static_cast<double>(integer(-5, 5))};
        break;
      case 6:
        m = {1,
             0,
             static_cast<double>(integer(-5, 5)),
             uniform(-1, 1),
             uniform(-2, 2),
             uniform(-20, 20)};
        break;
      default:  // scale only, and fractional translations
        m = {uniform(0.3, 3), 0, uniform(-10, 10), 0, uniform(0.3, 3), uniform(-10, 10)};
        break;
    }
    const Fill fill = {static_cast<uint8_t>(integer(0, 255)), static_cast<uint8_t>(integer(0, 255)),
                       static_cast<uint8_t>(integer(0, 255))};
    for (WarpInterpolation mode :
         {WarpInterpolation::kNearest, WarpInterpolation::kBilinear, WarpInterpolation::kBicubic}) {
      Image fast = Blank(out_width, out_height), plain = Blank(out_width, out_height);
      AffineWarp(src, fast.Span(), m, mode, fill, true);
      AffineWarp(src, plain.Span(), m, mode, fill, false);
      ASSERT_EQ(fast.pixels, plain.pixels)
          << "warp " << static_cast<int>(mode) << " round " << round << " " << width << "x"
          << height << " matrix " << json(m).dump();
      ++compared;
    }
    const double factor = round % 5 == 0 ? uniform(0, 1) : uniform(-1, 3);
    for (int op = 0; op < 2; ++op) {
      Image fast = Blank(width, height), plain = Blank(width, height);
      if (op == 0) {
        AdjustSaturation(src, fast.Span(), factor, true);
        AdjustSaturation(src, plain.Span(), factor, false);
      } else {
        AdjustSharpness(src, fast.Span(), factor, true);
        AdjustSharpness(src, plain.Span(), factor, false);
      }
      ASSERT_EQ(fast.pixels, plain.pixels) << (op == 0 ? "saturation" : "sharpness") << " factor "
                                           << factor << " " << width << "x" << height;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2000);
}

// AutoAugment, RandAugment and TrivialAugmentWide's magnitude tables: the
// float32 values of torchvision's torch.linspace / arange tables, exactly.
constexpr const char* kMagnitudeScript = R"PY(
import json, sys
import torchvision.transforms as TV
out = {}
for name, t, bins in (("AutoAugment", TV.AutoAugment(), 10), ("RandAugment", TV.RandAugment(), 31),
                      ("TrivialAugmentWide", TV.TrivialAugmentWide(), 31)):
    space = t._augmentation_space(bins) if name == "TrivialAugmentWide" else \
        t._augmentation_space(bins, (160, 224))
    out[name] = {op: [float(v) for v in (m.reshape(-1).tolist() if m.ndim else [])]
                 for op, (m, signed) in space.items()}
json.dump(out, open(sys.argv[1], "w"))
)PY";

TEST(PixelOpsParityTest, AugmentMagnitudesEqualTorchvisionTables) {
  const fs::path work =
      fs::temp_directory_path() / ("galley_magnitudes_" + std::to_string(getpid()));
  fs::create_directories(work);
  std::ofstream(work / "magnitudes.py") << kMagnitudeScript;
  const std::string command = std::string(GALLEY_TEST_PYTHON) + " " +
                              (work / "magnitudes.py").string() + " " +
                              (work / "out.json").string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const json tables = json::parse(std::ifstream(work / "out.json"));
  const std::vector<std::string> names = {"Identity",     "ShearX",    "ShearY",     "TranslateX",
                                          "TranslateY",   "Rotate",    "Brightness", "Color",
                                          "Contrast",     "Sharpness", "Posterize",  "Solarize",
                                          "AutoContrast", "Equalize",  "Invert"};
  const std::vector<std::pair<std::string, OpKind>> families = {
      {"AutoAugment", OpKind::kAutoAugment},
      {"RandAugment", OpKind::kRandAugment},
      {"TrivialAugmentWide", OpKind::kTrivialAugmentWide}};
  int compared = 0, exact = 0;
  for (const auto& [family, kind] : families) {
    for (size_t op = 0; op < names.size(); ++op) {
      if (!tables[family].contains(names[op])) continue;
      const auto& expected = tables[family][names[op]];
      for (size_t bin = 0; bin < expected.size(); ++bin) {
        auto magnitude =
            AugmentMagnitude(kind, static_cast<int>(op), static_cast<int>(expected.size()),
                             static_cast<int>(bin), 224, 160);
        ASSERT_TRUE(magnitude.ok());
        // torch's linspace computes some entries with SIMD arange steps, so
        // a few differ from the serial formula by one float32 ulp.
        const auto reference = static_cast<float>(expected[bin].get<double>());
        const float ulp = std::nextafter(std::abs(reference), INFINITY) - std::abs(reference);
        EXPECT_LE(std::abs(*magnitude - reference), ulp)
            << family << " " << names[op] << " bin " << bin;
        exact += *magnitude == reference;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 300);
  std::printf("magnitudes: %d of %d identical to torchvision's, the rest within 1 ulp\n", exact,
              compared);
  fs::remove_all(work);
}

}  // namespace
}  // namespace galley::image
