// ResizeAntialiased against PIL and torchvision: the references are computed
// by /usr/bin/python3 with PIL (and torchvision 0.14 for whole pipelines) on
// the same pixels, in a temporary directory, when the test runs.
//
// The resampler repeats PIL's arithmetic (double-precision coefficients
// normalised per output pixel, 22-bit fixed point rounded half away from
// zero, horizontal pass first with a uint8 intermediate), so the outputs are
// expected to be identical; the assertions allow what the task's parity
// target allows (max |diff| <= 1, mean |diff| < 0.05) and print what is
// actually reached.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "galley/image/resample.h"
#include "galley/image/testing/transform_test_paths.h"
#include "galley/image/transforms.h"

namespace galley::image {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Reads every case of cases.json, applies it with PIL/torchvision and writes
// out<i>.raw (HWC uint8).
constexpr const char* kReferenceScript = R"PY(
import json, sys
import numpy as np
from PIL import Image

work = sys.argv[1]
cases = json.load(open(f"{work}/cases.json"))
filters = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "box": Image.BOX,
           "hamming": Image.HAMMING, "lanczos": Image.LANCZOS}
tv = None
for i, case in enumerate(cases):
    pixels = np.fromfile(f"{work}/{case['input']}", np.uint8)
    image = Image.fromarray(pixels.reshape(case["height"], case["width"], 3), "RGB")
    if case["op"] == "pil":
        # Image.crop then Image.resize(size, filter, box): the view is the crop.
        view = image.crop(tuple(case["view"]))
        out = view.resize(tuple(case["size"]), filters[case["filter"]], box=tuple(case["box"]))
    else:
        if tv is None:
            import torchvision.transforms as tv
            import torchvision.transforms.functional as tvf
        if case["op"] == "resized_crop":
            out = tvf.resized_crop(image, case["top"], case["left"], case["crop_height"],
                                   case["crop_width"], case["size"])
        else:
            out = tv.Compose([tv.Resize(case["resize"]), tv.CenterCrop(case["crop"])])(image)
    np.ascontiguousarray(np.asarray(out, np.uint8)).tofile(f"{work}/out{i}.raw")
)PY";

const char* FilterName(ResampleFilter filter) {
  switch (filter) {
    case ResampleFilter::kBicubic:
      return "bicubic";
    case ResampleFilter::kBox:
      return "box";
    case ResampleFilter::kHamming:
      return "hamming";
    case ResampleFilter::kLanczos:
      return "lanczos";
    default:
      return "bilinear";
  }
}

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
  RgbView View() const { return {pixels.data(), width, height, static_cast<ptrdiff_t>(width) * 3}; }
  RgbImage ToRgbImage() const { return {width, height, pixels}; }
};

Image Smooth(int width, int height) {
  Image image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / (width - 1));
      p[1] = static_cast<uint8_t>(127.5 + 127.5 * std::sin(x * 0.07 + y * 0.05));
      p[2] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.031) * std::cos(y * 0.023));
    }
  }
  return image;
}

Image Noise(int width, int height, uint32_t seed) {
  Image image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  std::mt19937 random(seed);
  for (auto& v : image.pixels) v = static_cast<uint8_t>(random() >> 24);
  return image;
}

// Blocks of noise on a smooth background: sharp edges, where filters differ most.
Image Mixed(int width, int height, uint32_t seed) {
  Image image = Smooth(width, height);
  std::mt19937 random(seed);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      if (((x / 17) + (y / 13)) % 3 != 0) continue;
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * width + x) * 3];
      for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(random() >> 24);
    }
  }
  return image;
}

// Runs the reference script on `cases` (each naming an input written from
// `inputs`) and returns the outputs in order.
std::vector<std::vector<uint8_t>> References(const std::vector<Image>& inputs, const json& cases) {
  std::string pattern = (fs::temp_directory_path() / "galley_resample_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return {};
  }
  const fs::path work = pattern;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::ofstream(work / ("in" + std::to_string(i) + ".raw"), std::ios::binary)
        .write(reinterpret_cast<const char*>(inputs[i].pixels.data()),
               static_cast<std::streamsize>(inputs[i].pixels.size()));
  }
  std::ofstream(work / "cases.json") << cases.dump();
  std::ofstream(work / "reference.py") << kReferenceScript;
  const std::string command = std::string(GALLEY_TEST_PYTHON) + " " +
                              (work / "reference.py").string() + " " + work.string();
  const int rc = std::system(command.c_str());
  EXPECT_EQ(rc, 0) << command;
  std::vector<std::vector<uint8_t>> outputs;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::ifstream in(work / ("out" + std::to_string(i) + ".raw"), std::ios::binary);
    outputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  fs::remove_all(work);
  return outputs;
}

struct Difference {
  int max = 0;
  double mean = 0;
  double equal_fraction = 0;
};

Difference Compare(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  Difference d;
  if (a.size() != b.size() || a.empty()) {
    d.max = 256;
    d.mean = 256;
    return d;
  }
  size_t equal = 0;
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int diff = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
    d.max = std::max(d.max, diff);
    total += diff;
    equal += diff == 0;
  }
  d.mean = total / a.size();
  d.equal_fraction = static_cast<double>(equal) / a.size();
  return d;
}

struct ResizeCase {
  std::string name;
  int input = 0;
  // The crop PIL takes first (left, top, right, bottom): the resampler's view.
  int view[4] = {};
  double box[4] = {};  // in view coordinates
  int out_width = 0;
  int out_height = 0;
  ResampleFilter filter = ResampleFilter::kBilinear;
};

std::vector<uint8_t> Resample(const Image& image, const ResizeCase& c, bool allow_simd,
                              int window_x = 0, int window_y = 0, int window_width = -1,
                              int window_height = -1) {
  RgbView view = image.View();
  view.data += static_cast<ptrdiff_t>(c.view[1]) * view.stride + c.view[0] * 3;
  view.width = c.view[2] - c.view[0];
  view.height = c.view[3] - c.view[1];
  ResizeGeometry g;
  g.box_x0 = c.box[0];
  g.box_y0 = c.box[1];
  g.box_x1 = c.box[2];
  g.box_y1 = c.box[3];
  g.out_width = c.out_width;
  g.out_height = c.out_height;
  g.window_x = window_x;
  g.window_y = window_y;
  g.window_width = window_width < 0 ? c.out_width : window_width;
  g.window_height = window_height < 0 ? c.out_height : window_height;
  std::vector<uint8_t> out(static_cast<size_t>(g.window_width) * g.window_height * 3);
  ResampleOptions options;
  options.filter = c.filter;
  options.allow_simd = allow_simd;
  const Status status = ResizeAntialiased(view, g, options, out.data(), g.window_width * 3);
  EXPECT_TRUE(status.ok()) << c.name << ": " << status.ToString();
  return out;
}

// A whole-view case: crop (x, y, w, h) of the input, resized to out.
ResizeCase WholeView(std::string name, int input, int x, int y, int w, int h, int out_width,
                     int out_height, ResampleFilter filter = ResampleFilter::kBilinear) {
  ResizeCase c;
  c.name = std::move(name);
  c.input = input;
  c.view[0] = x;
  c.view[1] = y;
  c.view[2] = x + w;
  c.view[3] = y + h;
  c.box[2] = w;
  c.box[3] = h;
  c.out_width = out_width;
  c.out_height = out_height;
  c.filter = filter;
  return c;
}

TEST(ResizeAntialiasedTest, MatchesPilResize) {
  const std::vector<Image> inputs = {Smooth(500, 375), Noise(500, 375, 1), Mixed(333, 251, 2),
                                     Noise(64, 48, 3)};
  std::vector<ResizeCase> cases = {
      WholeView("smooth down 1.3x", 0, 0, 0, 500, 375, 385, 288),
      WholeView("noise down 1.3x", 1, 0, 0, 500, 375, 385, 288),
      WholeView("smooth down 2x", 0, 0, 0, 500, 375, 250, 188),
      WholeView("noise down 2x", 1, 0, 0, 500, 375, 250, 187),
      WholeView("noise down 3.7x", 1, 0, 0, 500, 375, 135, 101),
      WholeView("mixed down 3.7x", 2, 0, 0, 333, 251, 90, 68),
      WholeView("noise up 1.5x", 1, 0, 0, 500, 375, 750, 563),
      WholeView("mixed up 1.5x", 2, 0, 0, 333, 251, 500, 377),
      WholeView("noise down x, up y", 1, 0, 0, 500, 375, 224, 500),
      WholeView("noise width only", 1, 0, 0, 500, 375, 301, 375),
      WholeView("noise height only", 1, 0, 0, 500, 375, 500, 97),
      WholeView("tiny to 224", 3, 0, 0, 64, 48, 224, 224),
      WholeView("tiny down", 3, 0, 0, 64, 48, 7, 5),
      WholeView("one pixel wide", 3, 0, 0, 64, 48, 1, 30),
      // RandomResizedCrop shapes: a crop of the source, resized to 224.
      WholeView("crop 350x300 to 224", 1, 101, 40, 350, 300, 224, 224),
      WholeView("crop 480x370 to 224", 1, 13, 5, 480, 370, 224, 224),
      WholeView("crop at right edge", 1, 150, 75, 350, 300, 224, 224),
      WholeView("crop 90x120 up to 224", 2, 240, 130, 90, 120, 224, 224),
      WholeView("crop non-square out", 0, 20, 10, 400, 300, 160, 96),
      WholeView("bicubic down 2.2x", 1, 0, 0, 500, 375, 227, 170, ResampleFilter::kBicubic),
      WholeView("bicubic up 1.5x", 2, 0, 0, 333, 251, 500, 377, ResampleFilter::kBicubic),
      WholeView("bicubic crop", 1, 101, 40, 350, 300, 224, 224, ResampleFilter::kBicubic),
      WholeView("box down 2.2x", 1, 0, 0, 500, 375, 227, 170, ResampleFilter::kBox),
      WholeView("box up 1.5x", 2, 0, 0, 333, 251, 500, 377, ResampleFilter::kBox),
      WholeView("hamming down 2.2x", 1, 0, 0, 500, 375, 227, 170, ResampleFilter::kHamming),
      WholeView("hamming crop", 1, 101, 40, 350, 300, 224, 224, ResampleFilter::kHamming),
      WholeView("lanczos down 2.2x", 1, 0, 0, 500, 375, 227, 170, ResampleFilter::kLanczos),
      WholeView("lanczos up 1.5x", 2, 0, 0, 333, 251, 500, 377, ResampleFilter::kLanczos),
      WholeView("lanczos crop", 1, 101, 40, 350, 300, 224, 224, ResampleFilter::kLanczos),
  };
  // PIL's box: a fractional rectangle of the view stretched onto the output;
  // pixels outside it but inside the view contribute near its edges.
  ResizeCase boxed = WholeView("fractional box", 1, 0, 0, 500, 375, 224, 224);
  boxed.box[0] = 37.25;
  boxed.box[1] = 10.5;
  boxed.box[2] = 401.75;
  boxed.box[3] = 333.125;
  cases.push_back(boxed);
  ResizeCase boxed_crop = WholeView("box inside crop", 2, 30, 20, 250, 200, 120, 150);
  boxed_crop.box[0] = 3.5;
  boxed_crop.box[1] = 0;
  boxed_crop.box[2] = 250;
  boxed_crop.box[3] = 190.2;
  cases.push_back(boxed_crop);
  ResizeCase boxed_up = WholeView("box upscale", 0, 0, 0, 500, 375, 300, 300);
  boxed_up.box[0] = 100.3;
  boxed_up.box[1] = 50.9;
  boxed_up.box[2] = 250.1;
  boxed_up.box[3] = 160;
  cases.push_back(boxed_up);
  // PIL reads `box` as four C floats, so 190.2 becomes 190.1999969...; with
  // the box rounded to float32 on our side too, the outputs are identical.
  // Without it, the few output pixels whose window edge falls within that
  // rounding differ by 1.
  for (ResizeCase c : {boxed_crop, boxed_up}) {
    c.name += " (float32)";
    for (double& edge : c.box) edge = static_cast<float>(edge);
    cases.push_back(c);
  }

  json spec = json::array();
  for (const ResizeCase& c : cases) {
    spec.push_back({{"op", "pil"},
                    {"input", "in" + std::to_string(c.input) + ".raw"},
                    {"width", inputs[c.input].width},
                    {"height", inputs[c.input].height},
                    {"view", {c.view[0], c.view[1], c.view[2], c.view[3]}},
                    {"box", {c.box[0], c.box[1], c.box[2], c.box[3]}},
                    {"size", {c.out_width, c.out_height}},
                    {"filter", FilterName(c.filter)}});
  }
  const auto references = References(inputs, spec);
  ASSERT_EQ(references.size(), cases.size());
  double worst_mean = 0;
  int worst_max = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const ResizeCase& c = cases[i];
    const auto ours = Resample(inputs[c.input], c, /*allow_simd=*/true);
    const Difference d = Compare(ours, references[i]);
    std::printf("%-24s max |diff| %d, mean |diff| %.5f, identical bytes %.4f%%\n", c.name.c_str(),
                d.max, d.mean, 100 * d.equal_fraction);
    EXPECT_LE(d.max, 1) << c.name;
    EXPECT_LT(d.mean, 0.05) << c.name;
    worst_mean = std::max(worst_mean, d.mean);
    worst_max = std::max(worst_max, d.max);
    // The portable kernels compute the same integers as the vectorised ones.
    EXPECT_EQ(Resample(inputs[c.input], c, /*allow_simd=*/false), ours) << c.name;
  }
  std::printf("worst over %zu cases: max |diff| %d, mean |diff| %.5f\n", cases.size(), worst_max,
              worst_mean);
}

TEST(ResizeAntialiasedTest, WindowIsTheCropOfTheWholeOutput) {
  const Image image = Noise(321, 207, 9);
  const ResizeCase c = WholeView("whole", 0, 0, 0, 321, 207, 150, 110);
  const auto whole = Resample(image, c, true);
  for (bool simd : {true, false}) {
    const int wx = 17, wy = 23, ww = 101, wh = 64;
    const auto window = Resample(image, c, simd, wx, wy, ww, wh);
    for (int y = 0; y < wh; ++y) {
      ASSERT_EQ(std::memcmp(&window[static_cast<size_t>(y) * ww * 3],
                            &whole[(static_cast<size_t>(y + wy) * 150 + wx) * 3], ww * 3),
                0)
          << "row " << y;
    }
  }
}

TEST(ResizeAntialiasedTest, SameSizeIsACopyAndConstantsStayConstant) {
  const Image image = Noise(40, 30, 4);
  EXPECT_EQ(Resample(image, WholeView("copy", 0, 0, 0, 40, 30, 40, 30), true), image.pixels);
  // Weights sum to one after rounding closely enough that a flat image
  // stays flat at every scale.
  Image flat{97, 61, std::vector<uint8_t>(97 * 61 * 3, 0)};
  for (size_t i = 0; i < flat.pixels.size(); ++i) flat.pixels[i] = i % 3 == 0 ? 255 : 7;
  for (int out : {5, 33, 96, 150, 301}) {
    for (ResampleFilter filter : {ResampleFilter::kBilinear, ResampleFilter::kBicubic}) {
      const auto result =
          Resample(flat, WholeView("flat", 0, 0, 0, 97, 61, out, out / 2 + 1, filter), true);
      for (size_t i = 0; i < result.size(); ++i) {
        ASSERT_EQ(result[i], i % 3 == 0 ? 255 : 7) << "out " << out << " byte " << i;
      }
    }
  }
}

TEST(ResizeAntialiasedTest, RejectsBadGeometry) {
  const Image image = Noise(20, 10, 5);
  std::vector<uint8_t> out(100 * 100 * 3);
  ResizeGeometry g = ResizeGeometry::Whole(image.View(), 10, 10);
  EXPECT_TRUE(ResizeAntialiased(image.View(), g, {}, out.data(), 30).ok());
  ResizeGeometry outside = g;
  outside.box_x1 = 20.5;
  EXPECT_EQ(ResizeAntialiased(image.View(), outside, {}, out.data(), 30).code(),
            StatusCode::kInvalidArgument);
  ResizeGeometry empty = g;
  empty.box_y1 = empty.box_y0;
  EXPECT_EQ(ResizeAntialiased(image.View(), empty, {}, out.data(), 30).code(),
            StatusCode::kInvalidArgument);
  ResizeGeometry window = g;
  window.window_x = 5;
  EXPECT_EQ(ResizeAntialiased(image.View(), window, {}, out.data(), 30).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ResizeAntialiased(RgbView{}, g, {}, out.data(), 30).code(),
            StatusCode::kInvalidArgument);
}

// Whole pipelines against torchvision 0.14 on PIL images.
TEST(ResizeAntialiasedTest, PipelinesMatchTorchvision) {
  const std::vector<Image> inputs = {Noise(500, 375, 11), Mixed(375, 500, 12), Smooth(640, 427)};
  auto train =
      TransformPipeline::FromJson({{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}}}},
                                   {"output", {{"layout", "NHWC"}, {"dtype", "uint8"}}}});
  auto eval = TransformPipeline::FromJson(
      {{"ops", {{{"op", "Resize"}, {"size", {256}}}, {{"op", "CenterCrop"}, {"size", {224}}}}},
       {"output", {{"layout", "NHWC"}, {"dtype", "uint8"}}}});
  ASSERT_TRUE(train.ok() && eval.ok());
  json spec = json::array();
  std::vector<std::vector<uint8_t>> ours;
  std::vector<std::string> names;
  for (size_t input = 0; input < inputs.size(); ++input) {
    const RgbImage image = inputs[input].ToRgbImage();
    const json base = {{"input", "in" + std::to_string(input) + ".raw"},
                       {"width", image.width},
                       {"height", image.height}};
    for (uint64_t item = 0; item < 8; ++item) {
      auto window = SourceWindow(*train, image.width, image.height, 3, 0, item);
      ASSERT_TRUE(window.ok());
      json c = base;
      c.update({{"op", "resized_crop"},
                {"top", window->y},
                {"left", window->x},
                {"crop_height", window->height},
                {"crop_width", window->width},
                {"size", {224, 224}}});
      spec.push_back(c);
      std::vector<std::byte> out(train->sample_bytes());
      ASSERT_TRUE(train->Apply(image, 3, 0, item, out).ok());
      ours.emplace_back(reinterpret_cast<const uint8_t*>(out.data()),
                        reinterpret_cast<const uint8_t*>(out.data()) + out.size());
      names.push_back("RandomResizedCrop " + std::to_string(window->width) + "x" +
                      std::to_string(window->height));
    }
    json c = base;
    c.update({{"op", "resize_center_crop"}, {"resize", 256}, {"crop", 224}});
    spec.push_back(c);
    std::vector<std::byte> out(eval->sample_bytes());
    ASSERT_TRUE(eval->Apply(image, 0, 0, 0, out).ok());
    ours.emplace_back(reinterpret_cast<const uint8_t*>(out.data()),
                      reinterpret_cast<const uint8_t*>(out.data()) + out.size());
    names.push_back("Resize(256)+CenterCrop(224) of " + std::to_string(image.width) + "x" +
                    std::to_string(image.height));
  }
  const auto references = References(inputs, spec);
  ASSERT_EQ(references.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const Difference d = Compare(ours[i], references[i]);
    std::printf("%-40s max |diff| %d, mean |diff| %.5f, identical bytes %.4f%%\n", names[i].c_str(),
                d.max, d.mean, 100 * d.equal_fraction);
    EXPECT_LE(d.max, 1) << names[i];
    EXPECT_LT(d.mean, 0.05) << names[i];
  }
}

}  // namespace
}  // namespace galley::image
