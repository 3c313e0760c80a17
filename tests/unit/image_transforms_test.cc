// TransformPipeline tests: spec validation, canonical signatures, torchvision
// geometry, determinism, and the statistics of the random parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "galley/image/resample.h"
#include "galley/image/testing/transform_test_paths.h"
#include "galley/image/transforms.h"

namespace galley::image {
namespace {

using nlohmann::json;

TransformPipeline MustParse(const json& spec) {
  auto pipeline = TransformPipeline::FromJson(spec);
  EXPECT_TRUE(pipeline.ok()) << spec.dump() << ": " << pipeline.status().ToString();
  return std::move(pipeline).value();
}

// Each pixel encodes its own position: R = x, G = y, B = (x * 7 + y * 13) % 256.
RgbImage CoordinateImage(int width, int height) {
  RgbImage image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x);
      p[1] = static_cast<uint8_t>(y);
      p[2] = static_cast<uint8_t>((x * 7 + y * 13) % 256);
    }
  }
  return image;
}

// A smooth but asymmetric image, for comparisons that tolerate resampling.
RgbImage SmoothImage(int width, int height) {
  RgbImage image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / (width - 1));
      p[1] = static_cast<uint8_t>(255 * y / (height - 1));
      p[2] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.05) * std::cos(y * 0.03));
    }
  }
  return image;
}

std::vector<std::byte> ApplyToBytes(const TransformPipeline& pipeline, const RgbImage& image,
                                    uint64_t seed, uint64_t epoch, uint64_t item) {
  std::vector<std::byte> out(pipeline.sample_bytes());
  const Status status = pipeline.Apply(image, seed, epoch, item, out);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return out;
}

// The window (x, y, width, height) of image, resized by the resampler that
// image_resample_test checks against PIL, as NHWC bytes.
std::vector<std::byte> Resized(const RgbImage& image, int x, int y, int width, int height,
                               int out_width, int out_height) {
  const RgbView view{image.pixels.data() + (static_cast<size_t>(y) * image.width + x) * 3, width,
                     height, static_cast<ptrdiff_t>(image.width) * 3};
  std::vector<std::byte> out(static_cast<size_t>(out_width) * out_height * 3);
  const Status status =
      ResizeAntialiased(view, ResizeGeometry::Whole(view, out_width, out_height), {},
                        reinterpret_cast<uint8_t*>(out.data()), out_width * 3);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return out;
}

uint8_t At(const std::vector<std::byte>& nhwc, int width, int x, int y, int c) {
  return static_cast<uint8_t>(nhwc[(static_cast<size_t>(y) * width + x) * 3 + c]);
}

json Output(const char* layout = "NHWC") { return {{"layout", layout}, {"dtype", "uint8"}}; }

TEST(TransformSpecTest, RejectsMalformedSpecsNamingTheField) {
  struct Case {
    json spec;
    std::string expected_fragment;
  };
  const std::vector<Case> cases = {
      {json::array(), "object"},
      {{{"ops", {{{"op", "RandomPerspective"}, {"size", {3}}}}}}, "unknown op 'RandomPerspective'"},
      {{{"ops", {{{"op", "CenterCrop"}}}}}, "'size' is required"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {0, 4}}}}}}, "positive"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {-3}}}}}}, "positive"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", "224"}}}}}, "integers"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {1, 2, 3}}}}}}, "one or two"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {2.5}}}}}}, "integers"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {4}}, {"colour", 1}}}}}, "unknown field 'colour'"},
      {{{"ops", {{{"op", "RandomResizedCrop"}, {"size", {8}}, {"scale", {1.0, 0.5}}}}}},
       "RandomResizedCrop field 'scale'"},
      {{{"ops", {{{"op", "RandomResizedCrop"}, {"size", {8}}, {"ratio", {2.0, 1.0}}}}}}, "ordered"},
      {{{"ops", {{{"op", "RandomResizedCrop"}, {"size", {8}}, {"ratio", {0.0, 1.0}}}}}},
       "positive"},
      {{{"ops", {{{"op", "RandomResizedCrop"}, {"size", {8}}, {"interpolation", "sinc"}}}}},
       "interpolation"},
      {{{"ops", {{{"op", "RandomRotation"}, {"degrees", 5}, {"interpolation", "lanczos"}}}}},
       "warps support"},
      {{{"ops",
         {{{"op", "CenterCrop"}, {"size", {8}}}, {{"op", "RandomHorizontalFlip"}, {"p", 1.5}}}}},
       "RandomHorizontalFlip field 'p'"},
      {{{"ops",
         {{{"op", "CenterCrop"}, {"size", {8}}}, {{"op", "RandomHorizontalFlip"}, {"p", "x"}}}}},
       "number"},
      {{{"ops", {{{"op", "Resize"}, {"size", {256}}}}}}, "output size depends on the input"},
      {{{"ops", json::array()}}, "output size depends on the input"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}, {{"op", "Resize"}, {"size", {16}}}}}},
       "output size depends on the input"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}}, {"output", {{"layout", "CHW"}}}},
       "layout"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}}, {"output", {{"dtype", "float16"}}}},
       "dtype"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}}, {"output", {{"dtype", "float32"}}}},
       "needs 'mean' and 'std'"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}},
        {"output", {{"dtype", "float32"}, {"mean", {0.5, 0.5, 0.5}}, {"std", {0.2, 0.0, 0.2}}}}},
       "must not be zero"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}},
        {"output", {{"dtype", "float32"}, {"mean", {0.5, 0.5}}, {"std", {0.2, 0.2, 0.2}}}}},
       "'mean'"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}},
        {"output", {{"dtype", "float32"}, {"mean", {0.5, NAN, 0.5}}, {"std", {1, 1, 1}}}}},
       "finite"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}}, {"output", {{"mean", {0.5}}}}},
       "dtype is uint8"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}}, {"extra", 1}}, "unknown field 'extra'"},
      {{{"ops", {{{"op", "CenterCrop"}, {"size", {100000}}}}}}, "at most"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec.dump());
    auto pipeline = TransformPipeline::FromJson(c.spec);
    ASSERT_FALSE(pipeline.ok());
    EXPECT_EQ(pipeline.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(pipeline.status().message().find(c.expected_fragment), std::string::npos)
        << pipeline.status().message();
  }
}

TEST(TransformSpecTest, DefaultsAreFilledAndSignaturesCompareMeaning) {
  const auto short_form = MustParse(
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", 224}}, {{"op", "RandomHorizontalFlip"}}}}});
  const auto long_form = MustParse({{"ops",
                                     {{{"op", "RandomResizedCrop"},
                                       {"size", {224, 224}},
                                       {"scale", {0.08, 1.0}},
                                       {"ratio", {3.0 / 4.0, 4.0 / 3.0}},
                                       {"interpolation", "bilinear"}},
                                      {{"op", "RandomHorizontalFlip"}, {"p", 0.5}}}},
                                    {"output", {{"layout", "NCHW"}, {"dtype", "uint8"}}}});
  EXPECT_EQ(short_form.Signature(), long_form.Signature());
  EXPECT_EQ(short_form.ToJson(), long_form.ToJson());
  EXPECT_EQ(short_form.output_height(), 224);
  EXPECT_EQ(short_form.output_width(), 224);
  EXPECT_EQ(short_form.layout(), Layout::kNCHW);
  EXPECT_EQ(short_form.dtype(), DType::kUInt8);
  EXPECT_EQ(short_form.sample_bytes(), size_t{3} * 224 * 224);
  EXPECT_TRUE(short_form.is_random());
  // The canonical JSON parses back to the same pipeline.
  EXPECT_EQ(MustParse(short_form.ToJson()).Signature(), short_form.Signature());

  const auto other_p = MustParse({{"ops",
                                   {{{"op", "RandomResizedCrop"}, {"size", 224}},
                                    {{"op", "RandomHorizontalFlip"}, {"p", 0.25}}}}});
  EXPECT_NE(other_p.Signature(), short_form.Signature());
  const auto nhwc = MustParse(
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", 224}}, {{"op", "RandomHorizontalFlip"}}}},
       {"output", Output("NHWC")}});
  EXPECT_NE(nhwc.Signature(), short_form.Signature());

  const auto eval = MustParse(
      {{"ops", {{{"op", "Resize"}, {"size", {256}}}, {{"op", "CenterCrop"}, {"size", {224}}}}},
       {"output",
        {{"dtype", "float32"}, {"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}}}});
  EXPECT_FALSE(eval.is_random());
  EXPECT_EQ(eval.sample_bytes(), size_t{3} * 224 * 224 * 4);
  EXPECT_EQ(eval.ToJson()["ops"][0]["size"], json({256}));
  EXPECT_EQ(eval.ToJson()["ops"][1]["size"], json({224, 224}));
}

TEST(TransformPipelineTest, CenterCropFollowsTorchvisionRounding) {
  // 9 x 7 image, crop 3 x 4 (h x w): top = round(4 / 2) = 2,
  // left = round(5 / 2) = round(2.5) = 2 (Python rounds halves to even).
  const auto pipeline =
      MustParse({{"ops", {{{"op", "CenterCrop"}, {"size", {3, 4}}}}}, {"output", Output()}});
  const auto out = ApplyToBytes(pipeline, CoordinateImage(9, 7), 0, 0, 0);
  EXPECT_EQ(At(out, 4, 0, 0, 0), 2);  // x
  EXPECT_EQ(At(out, 4, 0, 0, 1), 2);  // y
  EXPECT_EQ(At(out, 4, 3, 2, 0), 5);
  EXPECT_EQ(At(out, 4, 3, 2, 1), 4);
  // 11 wide: left = round(3.5) = 4.
  const auto wider = ApplyToBytes(pipeline, CoordinateImage(11, 7), 0, 0, 0);
  EXPECT_EQ(At(wider, 4, 0, 0, 0), 4);
}

TEST(TransformPipelineTest, CenterCropLargerThanImagePadsWithZeros) {
  // 4 x 4 image into 7 (h) x 6 (w): padding (7-4)//2 = 1 above, (6-4)//2 = 1 left.
  const auto pipeline =
      MustParse({{"ops", {{{"op", "CenterCrop"}, {"size", {7, 6}}}}}, {"output", Output()}});
  RgbImage image = CoordinateImage(4, 4);
  for (auto& v : image.pixels) v = static_cast<uint8_t>(v + 10);  // no zero inside the image
  const auto out = ApplyToBytes(pipeline, image, 0, 0, 0);
  for (int y = 0; y < 7; ++y) {
    for (int x = 0; x < 6; ++x) {
      const bool inside = x >= 1 && x <= 4 && y >= 1 && y <= 4;
      if (inside) {
        EXPECT_EQ(At(out, 6, x, y, 0), x - 1 + 10);
        EXPECT_EQ(At(out, 6, x, y, 1), y - 1 + 10);
      } else {
        EXPECT_EQ(At(out, 6, x, y, 0), 0) << x << "," << y;
      }
    }
  }
}

TEST(TransformPipelineTest, ResizeShorterSideTruncatesTheLongerOne) {
  // 10 x 7 image, Resize(6): the height becomes 6, the width int(6 * 10 / 7) = 8.
  const auto pipeline = MustParse(
      {{"ops", {{{"op", "Resize"}, {"size", {6}}}, {{"op", "CenterCrop"}, {"size", {6, 8}}}}},
       {"output", Output()}});
  const RgbImage image = SmoothImage(10, 7);
  EXPECT_EQ(ApplyToBytes(pipeline, image, 0, 0, 0), Resized(image, 0, 0, 10, 7, 8, 6));
  // A portrait image: width is the shorter side.
  const auto portrait = MustParse(
      {{"ops", {{{"op", "Resize"}, {"size", {6}}}, {{"op", "CenterCrop"}, {"size", {8, 6}}}}},
       {"output", Output()}});
  const auto out2 = ApplyToBytes(portrait, SmoothImage(7, 10), 0, 0, 0);
  EXPECT_EQ(out2.size(), size_t{8} * 6 * 3);
}

TEST(TransformPipelineTest, UpscalingUsesTheSameFilter) {
  // PIL (hence torchvision) enlarges with the same bilinear filter it
  // shrinks with; its support is then one source pixel.
  const auto pipeline =
      MustParse({{"ops", {{{"op", "Resize"}, {"size", {20, 30}}}}}, {"output", Output()}});
  const RgbImage image = SmoothImage(10, 7);
  EXPECT_EQ(ApplyToBytes(pipeline, image, 0, 0, 0), Resized(image, 0, 0, 10, 7, 30, 20));
}

TEST(TransformPipelineTest, SameSeedEpochItemGiveIdenticalBytes) {
  const auto pipeline = MustParse(
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {32}}}, {{"op", "RandomHorizontalFlip"}}}}});
  const RgbImage image = SmoothImage(200, 150);
  const auto a = ApplyToBytes(pipeline, image, 7, 3, 42);
  EXPECT_EQ(a, ApplyToBytes(pipeline, image, 7, 3, 42));
  EXPECT_NE(a, ApplyToBytes(pipeline, image, 7, 3, 43));
  EXPECT_NE(a, ApplyToBytes(pipeline, image, 7, 4, 42));
  EXPECT_NE(a, ApplyToBytes(pipeline, image, 8, 3, 42));
}

TEST(TransformPipelineTest, OutputEqualsTheResizedSourceWindow) {
  const auto pipeline = MustParse(
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {24, 32}}}}}, {"output", Output()}});
  const RgbImage image = SmoothImage(300, 200);
  for (uint64_t item = 0; item < 50; ++item) {
    auto window = SourceWindow(pipeline, 300, 200, 1, 0, item);
    ASSERT_TRUE(window.ok());
    // torchvision crops, then resizes the crop: the filter does not reach
    // past the crop's edges.
    EXPECT_EQ(ApplyToBytes(pipeline, image, 1, 0, item),
              Resized(image, window->x, window->y, window->width, window->height, 32, 24))
        << "item " << item;
    EXPECT_EQ(window->resized_width, 32);
    EXPECT_EQ(window->resized_height, 24);
  }
}

TEST(TransformPipelineTest, RandomResizedCropParametersFollowTorchvisionDistribution) {
  // With scale <= 0.5 and ratio in [3/4, 4/3] on a square image no draw is
  // rejected, so the area fraction is uniform on [0.08, 0.5], the log aspect
  // ratio uniform on [log 3/4, log 4/3], and the offset uniform over the free
  // range. Chi-square over 10 equiprobable bins, 9 degrees of freedom:
  // the critical value at significance 0.001 is 27.88.
  const auto pipeline =
      MustParse({{"ops", {{{"op", "RandomResizedCrop"}, {"size", {8}}, {"scale", {0.08, 0.5}}}}}});
  constexpr int kSide = 2000;
  constexpr int kSamples = 5000;
  constexpr int kBins = 10;
  std::vector<int> area_bins(kBins), ratio_bins(kBins), offset_bins(kBins);
  for (int item = 0; item < kSamples; ++item) {
    auto w = SourceWindow(pipeline, kSide, kSide, 99, 0, item);
    ASSERT_TRUE(w.ok());
    const double area = static_cast<double>(w->width) * w->height / (double{kSide} * kSide);
    const double ratio = static_cast<double>(w->width) / w->height;
    ASSERT_GE(area, 0.08 - 0.002);
    ASSERT_LE(area, 0.5 + 0.002);
    ASSERT_GE(ratio, 0.75 - 0.003);
    ASSERT_LE(ratio, 4.0 / 3.0 + 0.003);
    auto bin = [](double u) { return std::clamp(static_cast<int>(u * kBins), 0, kBins - 1); };
    ++area_bins[bin((area - 0.08) / 0.42)];
    ++ratio_bins[bin((std::log(ratio) - std::log(0.75)) / (std::log(4.0 / 3.0) - std::log(0.75)))];
    const int free = kSide - w->width;
    if (free > 0) ++offset_bins[bin(static_cast<double>(w->x) / (free + 1))];
  }
  auto chi_square = [](const std::vector<int>& bins) {
    double total = 0;
    for (int b : bins) total += b;
    const double expected = total / bins.size();
    double chi = 0;
    for (int b : bins) chi += (b - expected) * (b - expected) / expected;
    return chi;
  };
  EXPECT_LT(chi_square(area_bins), 27.88);
  EXPECT_LT(chi_square(ratio_bins), 27.88);
  EXPECT_LT(chi_square(offset_bins), 27.88);
}

TEST(TransformPipelineTest, FallbackCropIsCentredAndClampedToRatio) {
  // scale (5, 6) can never fit, so all ten tries fail: torchvision then takes
  // the centred crop of the full height with width = round(h * 4 / 3).
  const auto pipeline =
      MustParse({{"ops", {{{"op", "RandomResizedCrop"}, {"size", {8}}, {"scale", {5.0, 6.0}}}}}});
  auto window = SourceWindow(pipeline, 300, 100, 0, 0, 0);
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->height, 100);
  EXPECT_EQ(window->width, 133);
  EXPECT_EQ(window->x, (300 - 133) / 2);
  EXPECT_EQ(window->y, 0);
}

TEST(TransformPipelineTest, HorizontalFlipHappensWithProbabilityP) {
  // Flip-only pipeline (plus a no-op Resize to fix the size) on a coordinate
  // image: a flipped output starts with x = width - 1.
  const auto pipeline = MustParse(
      {{"ops",
        {{{"op", "Resize"}, {"size", {4, 16}}}, {{"op", "RandomHorizontalFlip"}, {"p", 0.5}}}},
       {"output", Output()}});
  const RgbImage image = CoordinateImage(16, 4);
  constexpr int kSamples = 4000;
  int flips = 0;
  for (int item = 0; item < kSamples; ++item) {
    const auto out = ApplyToBytes(pipeline, image, 5, 0, item);
    const int first_x = At(out, 16, 0, 0, 0);
    ASSERT_TRUE(first_x == 0 || first_x == 15);
    if (first_x == 15) {
      ++flips;
      EXPECT_EQ(At(out, 16, 15, 0, 0), 0);
    }
  }
  // Binomial(4000, 0.5): standard deviation 31.6; 4 sigma is p ~ 6e-5.
  EXPECT_NEAR(flips, kSamples / 2, 4 * 31.7);
  const auto never = MustParse(
      {{"ops",
        {{{"op", "Resize"}, {"size", {4, 16}}}, {{"op", "RandomHorizontalFlip"}, {"p", 0.0}}}},
       {"output", Output()}});
  const auto always = MustParse(
      {{"ops",
        {{{"op", "Resize"}, {"size", {4, 16}}}, {{"op", "RandomHorizontalFlip"}, {"p", 1.0}}}},
       {"output", Output()}});
  for (int item = 0; item < 20; ++item) {
    EXPECT_EQ(At(ApplyToBytes(never, image, 5, 0, item), 16, 0, 0, 0), 0);
    EXPECT_EQ(At(ApplyToBytes(always, image, 5, 0, item), 16, 0, 0, 0), 15);
  }
}

TEST(TransformPipelineTest, CropAfterFlipMirrorsTheCrop) {
  // Flip then CenterCrop 2 of 5 columns: torchvision crops columns 2..3 of
  // the flipped image (round(1.5) = 2), i.e. source columns 2 and 1.
  const auto pipeline = MustParse(
      {{"ops",
        {{{"op", "RandomHorizontalFlip"}, {"p", 1.0}}, {{"op", "CenterCrop"}, {"size", {1, 2}}}}},
       {"output", Output()}});
  const auto out = ApplyToBytes(pipeline, CoordinateImage(5, 1), 0, 0, 0);
  EXPECT_EQ(At(out, 2, 0, 0, 0), 2);
  EXPECT_EQ(At(out, 2, 1, 0, 0), 1);
}

TEST(TransformPipelineTest, NchwIsTheTransposeOfNhwc) {
  const json ops = {{{"op", "RandomResizedCrop"}, {"size", {20, 30}}},
                    {{"op", "RandomHorizontalFlip"}}};
  const auto nhwc = MustParse({{"ops", ops}, {"output", Output("NHWC")}});
  const auto nchw = MustParse({{"ops", ops}, {"output", Output("NCHW")}});
  const RgbImage image = SmoothImage(120, 90);
  for (uint64_t item = 0; item < 10; ++item) {
    const auto a = ApplyToBytes(nhwc, image, 3, 1, item);
    const auto b = ApplyToBytes(nchw, image, 3, 1, item);
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 20; ++y) {
        for (int x = 0; x < 30; ++x) {
          ASSERT_EQ(a[(y * 30 + x) * 3 + c], b[(c * 20 + y) * 30 + x]);
        }
      }
    }
  }
}

TEST(TransformPipelineTest, FloatOutputIsToTensorThenNormalize) {
  const json ops = {{{"op", "RandomResizedCrop"}, {"size", {16}}}};
  const std::array<double, 3> mean = {0.485, 0.456, 0.406};
  const std::array<double, 3> std = {0.229, 0.224, 0.225};
  const auto bytes = MustParse({{"ops", ops}, {"output", Output("NCHW")}});
  const auto floats =
      MustParse({{"ops", ops}, {"output", {{"dtype", "float32"}, {"mean", mean}, {"std", std}}}});
  const RgbImage image = SmoothImage(64, 64);
  const auto a = ApplyToBytes(bytes, image, 1, 2, 3);
  const auto b = ApplyToBytes(floats, image, 1, 2, 3);
  ASSERT_EQ(b.size(), a.size() * 4);
  for (size_t i = 0; i < a.size(); ++i) {
    const int c = static_cast<int>(i / (16 * 16));
    // torchvision: img.float().div(255), then (t - mean) / std, all in float32.
    const float expected = (static_cast<float>(a[i]) / 255.0f - static_cast<float>(mean[c])) /
                           static_cast<float>(std[c]);
    float actual;
    std::memcpy(&actual, &b[i * 4], 4);
    ASSERT_EQ(actual, expected) << i;
  }
}

TEST(TransformPipelineTest, ScaledInputGivesNearlyTheSameSample) {
  const auto pipeline = MustParse(
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {32}}}, {{"op", "RandomHorizontalFlip"}}}},
       {"output", Output()}});
  const RgbImage full = SmoothImage(400, 300);
  RgbImage half{200, 150, std::vector<uint8_t>(200 * 150 * 3)};
  cv::resize(cv::Mat(300, 400, CV_8UC3, const_cast<uint8_t*>(full.pixels.data())),
             cv::Mat(150, 200, CV_8UC3, half.pixels.data()), cv::Size(200, 150), 0, 0,
             cv::INTER_AREA);
  double total_error = 0;
  size_t count = 0;
  for (uint64_t item = 0; item < 20; ++item) {
    const auto expected = ApplyToBytes(pipeline, full, 4, 0, item);
    std::vector<std::byte> actual(pipeline.sample_bytes());
    ASSERT_TRUE(ApplyScaled(pipeline, half, 400, 300, 4, 0, item, actual).ok());
    for (size_t i = 0; i < actual.size(); ++i) {
      total_error += std::abs(static_cast<int>(actual[i]) - static_cast<int>(expected[i]));
      ++count;
    }
  }
  // The crop maps to a fractional box on the half-resolution pixels, so the
  // region sampled is the same; what differs is the detail the half-size
  // image lost and the filter's clipping at whole half-size pixels: on this
  // smooth image, a few grey levels at most.
  EXPECT_LT(total_error / count, 3.0);

  const auto crop_only =
      MustParse({{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}}, {"output", Output()}});
  std::vector<std::byte> out(crop_only.sample_bytes());
  EXPECT_EQ(ApplyScaled(crop_only, half, 400, 300, 0, 0, 0, out).code(),
            StatusCode::kInvalidArgument);
}

TEST(TransformPipelineTest, MinDecodeSizeKeepsTheResizeAShrink) {
  const auto pipeline = MustParse({{"ops", {{{"op", "RandomResizedCrop"}, {"size", {56}}}}}});
  for (uint64_t item = 0; item < 100; ++item) {
    auto w = SourceWindow(pipeline, 800, 600, 0, 0, item);
    ASSERT_TRUE(w.ok());
    ASSERT_LE(w->min_decode_width, 800);
    ASSERT_LE(w->min_decode_height, 600);
    // The window shrunk to the decode size still covers the output.
    EXPECT_GE(std::ceil(w->width * w->min_decode_width / 800.0), 56 - 1);
    EXPECT_GE(std::ceil(w->height * w->min_decode_height / 600.0), 56 - 1);
  }
}

TEST(TransformPipelineTest, RejectsBadBuffersAndImages) {
  const auto pipeline = MustParse({{"ops", {{{"op", "CenterCrop"}, {"size", {8}}}}}});
  std::vector<std::byte> small(pipeline.sample_bytes() - 1);
  EXPECT_EQ(pipeline.Apply(SmoothImage(16, 16), 0, 0, 0, small).code(),
            StatusCode::kInvalidArgument);
  std::vector<std::byte> out(pipeline.sample_bytes());
  EXPECT_EQ(pipeline.Apply(RgbImage{}, 0, 0, 0, out).code(), StatusCode::kInvalidArgument);
  RgbImage inconsistent = SmoothImage(16, 16);
  inconsistent.pixels.pop_back();
  EXPECT_EQ(pipeline.Apply(inconsistent, 0, 0, 0, out).code(), StatusCode::kInvalidArgument);
}

TEST(TransformPipelineTest, AbsurdIntermediateSizesAreRefused) {
  const auto pipeline = MustParse(
      {{"ops", {{{"op", "Resize"}, {"size", {4096}}}, {{"op", "CenterCrop"}, {"size", {8}}}}}});
  std::vector<std::byte> out(pipeline.sample_bytes());
  EXPECT_EQ(pipeline.Apply(SmoothImage(2, 2000), 0, 0, 0, out).code(),
            StatusCode::kResourceExhausted);
}

TEST(TransformPipelineTest, AbsurdOpParametersGiveSamplesOrErrorsNeverCrashes) {
  // Specs come from other processes: extreme but valid values must end in a
  // sample or an error. Degenerate warps (NaN or huge matrices) read fill.
  const json cases[] = {
      {{"op", "RandomRotation"}, {"degrees", {-1e308, 1e308}}},
      {{"op", "RandomAffine"}, {"degrees", 0}, {"shear", {89.999999, 90.0}}},
      {{"op", "RandomAffine"}, {"degrees", 0}, {"scale", {1e-300, 1e-300}}},
      {{"op", "RandomAffine"}, {"degrees", 0}, {"scale", {1e300, 1e300}}},
      {{"op", "RandomAffine"}, {"degrees", 1e9}, {"translate", {1, 1}}},
      {{"op", "Pad"}, {"padding", 8192}, {"padding_mode", "reflect"}},
      {{"op", "GaussianBlur"}, {"kernel_size", 255}, {"sigma", {1e-9, 1e9}}},
      {{"op", "RandAugment"}, {"num_ops", 8}, {"magnitude", 999}, {"num_magnitude_bins", 1000}},
      {{"op", "RandomCrop"}, {"size", 64}},  // larger than the image: an error
  };
  for (const json& op : cases) {
    auto pipeline = TransformPipeline::FromJson(
        {{"ops", {op, {{"op", "CenterCrop"}, {"size", 8}}}},
         {"output", {{"dtype", "float32"}, {"mean", {0.5}}, {"std", {0.2}}}}});
    ASSERT_TRUE(pipeline.ok()) << op.dump() << pipeline.status().ToString();
    std::vector<std::byte> out(pipeline->sample_bytes());
    for (uint64_t item = 0; item < 20; ++item) {
      const Status status = pipeline->Apply(SmoothImage(17, 11), 0, 0, item, out);
      EXPECT_TRUE(status.ok() || status.code() == StatusCode::kInvalidArgument ||
                  status.code() == StatusCode::kResourceExhausted)
          << op.dump() << status.ToString();
    }
  }
}

}  // namespace
}  // namespace galley::image
