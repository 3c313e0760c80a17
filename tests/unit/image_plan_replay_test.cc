// TransformPipeline::Apply against its own plan replayed op by op: for many
// samples of recipe-like pipelines, the plan that DescribeSample reports is
// run step by step with the public pixel ops (each held to torchvision by
// image_pixel_ops_test and image_resample_test), materialising every flip,
// crop and intermediate image, and written out with torchvision's
// ToTensor + Normalize arithmetic. Apply's fused paths (the resize written
// straight into the sample, pending flips, table ops folded into the write)
// must give exactly these bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "galley/image/pixel_ops.h"
#include "galley/image/resample.h"
#include "galley/image/rgb_span.h"
#include "galley/image/tensor_ops.h"
#include "galley/image/testing/transform_test_paths.h"
#include "galley/image/transforms.h"

namespace galley::image {
namespace {

using nlohmann::json;

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;

  static Image Blank(int width, int height) {
    return {width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  }
  RgbSpan span() { return RgbSpan::Packed(pixels.data(), width, height); }
  RgbView view() const { return {pixels.data(), width, height, static_cast<ptrdiff_t>(width) * 3}; }
};

// Gradients, a ripple and noise: busy enough that every op changes pixels
// and histograms are not degenerate.
Image Textured(int width, int height, uint32_t seed) {
  Image image = Image::Blank(width, height);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-30, 30);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const int base[3] = {30 + 180 * x / width,
                           128 + static_cast<int>(90 * std::sin(x * 0.2 + y * 0.1)),
                           20 + 200 * y / height};
      for (int c = 0; c < 3; ++c) {
        image.pixels[(static_cast<size_t>(y) * width + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(base[c] + noise(rng), 0, 255));
      }
    }
  }
  return image;
}

Image Crop(const Image& src, int x, int y, int width, int height) {
  Image out = Image::Blank(width, height);  // outside the source: zeros
  for (int row = 0; row < height; ++row) {
    for (int col = 0; col < width; ++col) {
      const int sx = x + col, sy = y + row;
      if (sx < 0 || sy < 0 || sx >= src.width || sy >= src.height) continue;
      std::memcpy(&out.pixels[(static_cast<size_t>(row) * width + col) * 3],
                  &src.pixels[(static_cast<size_t>(sy) * src.width + sx) * 3], 3);
    }
  }
  return out;
}

ResampleFilter FilterNamed(const std::string& name) {
  if (name == "bicubic") return ResampleFilter::kBicubic;
  if (name == "box") return ResampleFilter::kBox;
  if (name == "hamming") return ResampleFilter::kHamming;
  if (name == "lanczos") return ResampleFilter::kLanczos;
  return ResampleFilter::kBilinear;
}

WarpInterpolation WarpNamed(const std::string& name) {
  if (name == "bilinear") return WarpInterpolation::kBilinear;
  if (name == "bicubic") return WarpInterpolation::kBicubic;
  return WarpInterpolation::kNearest;
}

PadMode PadModeNamed(const std::string& name) {
  if (name == "edge") return PadMode::kEdge;
  if (name == "reflect") return PadMode::kReflect;
  if (name == "symmetric") return PadMode::kSymmetric;
  return PadMode::kConstant;
}

Image Resize(const Image& src, int width, int height, const std::string& interpolation) {
  Image out = Image::Blank(width, height);
  if (interpolation == "nearest") {
    // PIL's NEAREST resize: its scale-only affine transform.
    const std::array<double, 6> matrix = {static_cast<double>(src.width) / width,   0, 0, 0,
                                          static_cast<double>(src.height) / height, 0};
    AffineWarp(src.view(), out.span(), matrix, WarpInterpolation::kNearest, Fill{});
    return out;
  }
  ResampleOptions options;
  options.filter = FilterNamed(interpolation);
  EXPECT_TRUE(ResizeAntialiased(src.view(), ResizeGeometry::Whole(src.view(), width, height),
                                options, out.pixels.data(), width * 3)
                  .ok());
  return out;
}

Image Pixel(const Image& src, const json& step) {
  const std::string kind = step["kind"];
  const std::vector<double> v = step["v"];
  const std::vector<int> sides = step["sides"];
  const Fill fill = step["fill"];
  const WarpInterpolation warp = WarpNamed(step["interpolation"]);
  if (kind == "pad") {
    Image out = Image::Blank(src.width + sides[0] + sides[2], src.height + sides[1] + sides[3]);
    PadPixels(src.view(), out.span(), sides[0], sides[1], PadModeNamed(step["padding_mode"]), fill);
    return out;
  }
  Image out = Image::Blank(src.width, src.height);
  const RgbView in = src.view();
  const RgbSpan o = out.span();
  if (kind == "brightness") AdjustBrightness(in, o, v[0]);
  if (kind == "contrast") AdjustContrast(in, o, v[0]);
  if (kind == "saturation") AdjustSaturation(in, o, v[0]);
  if (kind == "hue") AdjustHue(in, o, v[0]);
  if (kind == "sharpness") AdjustSharpness(in, o, v[0]);
  if (kind == "grayscale") ToGrayscale(in, o);
  if (kind == "posterize") Posterize(in, o, static_cast<int>(v[0]));
  if (kind == "solarize") Solarize(in, o, v[0]);
  if (kind == "autocontrast") AutoContrast(in, o);
  if (kind == "equalize") Equalize(in, o);
  if (kind == "invert") Invert(in, o);
  if (kind == "vflip") VerticalFlip(in, o);
  if (kind == "affine") {
    Affine(in, o, v[0], v[1], v[2], v[3], v[4], v[5], warp, fill, step["origin"].get<bool>());
  }
  if (kind == "rotate") Rotate(in, o, v[0], warp, fill);
  if (kind == "blur") GaussianBlur(in, o, sides[0], sides[1], v[0], v[1]);
  if (kind == "augmix") {
    const json& described = step["augmix"];
    const std::vector<std::string> names = {
        "ShearX",       "ShearY",   "TranslateX", "TranslateY", "Rotate",   "Posterize", "Solarize",
        "AutoContrast", "Equalize", "Brightness", "Color",      "Contrast", "Sharpness"};
    AugMixDraw draw;
    draw.original_weight = described["original_weight"].get<float>();
    draw.width = static_cast<int>(described["weights"].size());
    for (int i = 0; i < draw.width; ++i) {
      draw.weights[i] = described["weights"][i].get<float>();
      const json& chain = described["chains"][i];
      draw.depths[i] = static_cast<int>(chain.size());
      for (int d = 0; d < draw.depths[i]; ++d) {
        const auto at = std::find(names.begin(), names.end(), chain[d]["op"].get<std::string>());
        draw.steps[i][d] = {static_cast<AugMixOp>(at - names.begin()),
                            chain[d]["magnitude"].get<double>()};
      }
    }
    TensorFill fill;
    if (!described["fill"].is_null()) fill = described["fill"].get<std::array<float, 3>>();
    AugMix(in, o, draw, described["bilinear"].get<bool>(), fill);
  }
  return out;
}

// The plan run op by op, then written as the pipeline's output spec says.
std::vector<std::byte> Replay(const Image& source, const json& steps, const json& output) {
  Image image = source;
  for (const json& step : steps) {
    const std::string what = step["step"];
    if (what == "crop") {
      image = Crop(image, step["x"], step["y"], step["width"], step["height"]);
    } else if (what == "resize") {
      image = Resize(image, step["width"], step["height"], step["interpolation"]);
    } else if (what == "flip") {
      Image flipped = Image::Blank(image.width, image.height);
      ReorientPixels(image.view(), flipped.span(), 2);
      image = std::move(flipped);
    } else if (what == "pixel") {
      image = Pixel(image, step);
    }
  }
  const bool nchw = output.value("layout", "NCHW") == "NCHW";
  const bool floats = output.value("dtype", "uint8") == "float32";
  const size_t plane = static_cast<size_t>(image.width) * image.height;
  std::vector<float> values(plane * 3);
  for (size_t p = 0; p < plane; ++p) {
    for (int c = 0; c < 3; ++c) {
      const uint8_t byte = image.pixels[p * 3 + c];
      float value = byte;
      if (floats) {
        // ToTensor + Normalize in float32, as torchvision computes them.
        value = (static_cast<float>(byte) / 255.0f -
                 static_cast<float>(output["mean"][c].get<double>())) /
                static_cast<float>(output["std"][c].get<double>());
      }
      values[nchw ? c * plane + p : p * 3 + c] = value;
    }
  }
  for (const json& step : steps) {
    if (step["step"] != "erase") continue;
    for (int c = 0; c < 3; ++c) {
      for (int y = step["y"]; y < step["y"].get<int>() + step["height"].get<int>(); ++y) {
        for (int x = step["x"]; x < step["x"].get<int>() + step["width"].get<int>(); ++x) {
          const size_t p = static_cast<size_t>(y) * image.width + x;
          values[nchw ? c * plane + p : p * 3 + c] = step["value"][c].get<float>();
        }
      }
    }
  }
  std::vector<std::byte> bytes(values.size() * (floats ? 4 : 1));
  for (size_t i = 0; i < values.size(); ++i) {
    if (floats) {
      std::memcpy(&bytes[i * 4], &values[i], 4);
    } else {
      bytes[i] = static_cast<std::byte>(static_cast<uint8_t>(values[i]));
    }
  }
  return bytes;
}

const json kFloat = {{"layout", "NCHW"},
                     {"dtype", "float32"},
                     {"mean", {0.485, 0.456, 0.406}},
                     {"std", {0.229, 0.224, 0.225}}};

struct Recipe {
  const char* name;
  json ops;
  json output;
};

std::vector<Recipe> Recipes() {
  return {
      {"imagenet",
       json::array({{{"op", "RandomResizedCrop"}, {"size", {48}}, {"interpolation", "bicubic"}},
                    {{"op", "RandomHorizontalFlip"}},
                    {{"op", "TrivialAugmentWide"}, {"interpolation", "bicubic"}},
                    {{"op", "RandomErasing"}, {"p", 0.5}, {"value", {0.1, -0.2, 0.3}}}}),
       kFloat},
      {"autoaugment",
       json::array({{{"op", "CenterCrop"}, {"size", {60}}},
                    {{"op", "RandomHorizontalFlip"}},
                    {{"op", "AutoAugment"}, {"policy", "imagenet"}}}),
       {{"layout", "NHWC"}, {"dtype", "uint8"}}},
      {"colorjitter",
       json::array({{{"op", "Resize"}, {"size", {50}}},
                    {{"op", "CenterCrop"}, {"size", {44}}},
                    {{"op", "ColorJitter"},
                     {"brightness", 0.4},
                     {"contrast", 0.4},
                     {"saturation", 0.4},
                     {"hue", 0.1}},
                    {{"op", "RandomHorizontalFlip"}}}),
       {{"layout", "NCHW"}, {"dtype", "uint8"}}},
      {"randaugment",
       json::array({{{"op", "RandomResizedCrop"}, {"size", {40}}},
                    {{"op", "RandAugment"}, {"num_ops", 3}, {"interpolation", "bilinear"}}}),
       kFloat},
      {"cifar",
       json::array(
           {{{"op", "RandomCrop"}, {"size", {56}}, {"padding", 4}, {"padding_mode", "reflect"}},
            {{"op", "RandomHorizontalFlip"}},
            {{"op", "RandAugment"}, {"num_ops", 2}, {"magnitude", 15}}}),
       {{"layout", "NCHW"}, {"dtype", "uint8"}}},
      {"augmix",
       json::array({{{"op", "RandomResizedCrop"}, {"size", {40}}},
                    {{"op", "RandomHorizontalFlip"}},
                    {{"op", "AugMix"}, {"severity", 5}, {"fill", {9, 99.5, 199}}}}),
       kFloat},
      {"nearest",
       json::array({{{"op", "RandomHorizontalFlip"}},
                    {{"op", "RandomResizedCrop"}, {"size", {32}}, {"interpolation", "nearest"}},
                    {{"op", "ColorJitter"}, {"brightness", 0.5}, {"contrast", 0.5}}}),
       {{"layout", "NHWC"}, {"dtype", "uint8"}}},
  };
}

TEST(PlanReplayTest, EverySampleEqualsItsPlanRunOpByOp) {
  const Image source = Textured(97, 73, 5);
  const RgbImage rgb{source.width, source.height, source.pixels};
  for (const Recipe& recipe : Recipes()) {
    auto pipeline = TransformPipeline::FromJson({{"ops", recipe.ops}, {"output", recipe.output}});
    ASSERT_TRUE(pipeline.ok()) << recipe.name << ": " << pipeline.status().ToString();
    int with_pixel_ops = 0;
    for (uint64_t item = 0; item < 300; ++item) {
      auto steps = DescribeSample(*pipeline, source.width, source.height, 11, 2, item);
      ASSERT_TRUE(steps.ok());
      for (const json& step : *steps) {
        if (step["step"] == "pixel") {
          ++with_pixel_ops;
          break;
        }
      }
      std::vector<std::byte> actual(pipeline->sample_bytes());
      ASSERT_TRUE(pipeline->Apply(rgb, 11, 2, item, actual).ok());
      const std::vector<std::byte> expected = Replay(source, *steps, recipe.output);
      ASSERT_EQ(actual, expected) << recipe.name << " item " << item << " plan " << steps->dump();
    }
    // Most samples run pixel ops (the unfused and folded paths run too).
    EXPECT_GT(with_pixel_ops, 150) << recipe.name;
  }
}

}  // namespace
}  // namespace galley::image
