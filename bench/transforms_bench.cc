// Transform throughput on a decoded 500 x 375 image (ImageNet's typical
// size): each op alone (issue 12's ops on a 224 x 224 crop), torchvision's
// ImageNet recipe, the training pipeline RandomResizedCrop(224) +
// RandomHorizontalFlip with uint8 NCHW and float32 normalised output, and the
// evaluation pipeline Resize(256) + CenterCrop(224). One thread; items/s
// counts samples, bytes/s output bytes.
//
// BM_Baseline* redo the training pipeline the way galley did before its own
// resampler (OpenCV INTER_AREA when shrinking, INTER_LINEAR when enlarging,
// then the NCHW write), on the same crops, so one run shows both.
// BM_Resample* time the resampler alone on a RandomResizedCrop-like crop,
// with and without its AVX2 kernels.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "galley/image/pixel_ops.h"
#include "galley/image/resample.h"
#include "galley/image/testing/transform_test_paths.h"
#include "galley/image/transforms.h"

namespace galley::image {
namespace {

using nlohmann::json;

RgbImage SourceImage() {
  RgbImage image{500, 375, std::vector<uint8_t>(size_t{500} * 375 * 3)};
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    image.pixels[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  }
  return image;
}

void RunPipeline(benchmark::State& state, const json& spec) {
  auto pipeline = TransformPipeline::FromJson(spec);
  if (!pipeline.ok()) {
    state.SkipWithError(pipeline.status().ToString().c_str());
    return;
  }
  const RgbImage image = SourceImage();
  std::vector<std::byte> out(pipeline->sample_bytes());
  uint64_t item = 0;
  (void)pipeline->Apply(image, 1, 0, item++, out);  // warm-up: scratch buffers
  for (auto _ : state) {
    const Status status = pipeline->Apply(image, 1, 0, item++, out);
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()));
}

const json kNchw = {{"layout", "NCHW"}, {"dtype", "uint8"}};
const json kFloat = {{"layout", "NCHW"},
                     {"dtype", "float32"},
                     {"mean", {0.485, 0.456, 0.406}},
                     {"std", {0.229, 0.224, 0.225}}};

void BM_RandomResizedCrop(benchmark::State& state) {
  RunPipeline(state,
              {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}}}}, {"output", kNchw}});
}
BENCHMARK(BM_RandomResizedCrop)->UseRealTime();

void BM_ResizeShorterSide(benchmark::State& state) {
  // Resize(256) then a CenterCrop of the whole result's short side keeps the
  // cost dominated by the resize.
  RunPipeline(
      state,
      {{"ops", {{{"op", "Resize"}, {"size", {256}}}, {{"op", "CenterCrop"}, {"size", {256}}}}},
       {"output", kNchw}});
}
BENCHMARK(BM_ResizeShorterSide)->UseRealTime();

void BM_CenterCrop(benchmark::State& state) {
  RunPipeline(state, {{"ops", {{{"op", "CenterCrop"}, {"size", {224}}}}}, {"output", kNchw}});
}
BENCHMARK(BM_CenterCrop)->UseRealTime();

void BM_HorizontalFlip(benchmark::State& state) {
  RunPipeline(
      state,
      {{"ops",
        {{{"op", "CenterCrop"}, {"size", {224}}}, {{"op", "RandomHorizontalFlip"}, {"p", 1.0}}}},
       {"output", kNchw}});
}
BENCHMARK(BM_HorizontalFlip)->UseRealTime();

void BM_TrainPipelineUInt8(benchmark::State& state) {
  RunPipeline(
      state,
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}}, {{"op", "RandomHorizontalFlip"}}}},
       {"output", kNchw}});
}
BENCHMARK(BM_TrainPipelineUInt8)->UseRealTime();

void BM_TrainPipelineFloat32(benchmark::State& state) {
  RunPipeline(
      state,
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}}, {{"op", "RandomHorizontalFlip"}}}},
       {"output", kFloat}});
}
BENCHMARK(BM_TrainPipelineFloat32)->UseRealTime();

void BM_EvalPipelineFloat32(benchmark::State& state) {
  RunPipeline(
      state,
      {{"ops", {{{"op", "Resize"}, {"size", {256}}}, {{"op", "CenterCrop"}, {"size", {224}}}}},
       {"output", kFloat}});
}
BENCHMARK(BM_EvalPipelineFloat32)->UseRealTime();

// Each op of issue 12 on a 224 x 224 image (the size a training pipeline's
// ops see after RandomResizedCrop): CenterCrop(224), the op, uint8 NCHW.
// bench/transforms_vs_torchvision.py times torchvision on the same work.
void BM_Op(benchmark::State& state, json op) {
  RunPipeline(state, {{"ops", {{{"op", "CenterCrop"}, {"size", {224}}}, std::move(op)}},
                      {"output", kNchw}});
}
BENCHMARK_CAPTURE(BM_Op, CenterCropOnly, json{{"op", "RandomHorizontalFlip"}, {"p", 0.0}})
    ->UseRealTime();
BENCHMARK_CAPTURE(
    BM_Op, RandomCrop_pad4_reflect,
    json{{"op", "RandomCrop"}, {"size", {224}}, {"padding", 4}, {"padding_mode", "reflect"}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, RandomVerticalFlip, json{{"op", "RandomVerticalFlip"}, {"p", 1.0}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, ColorJitter,
                  json{{"op", "ColorJitter"},
                       {"brightness", 0.4},
                       {"contrast", 0.4},
                       {"saturation", 0.4},
                       {"hue", 0.1}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, Grayscale, json{{"op", "Grayscale"}, {"num_output_channels", 3}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, GaussianBlur_k23,
                  json{{"op", "GaussianBlur"}, {"kernel_size", 23}, {"sigma", {0.1, 2.0}}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, RandomRotation_bilinear,
                  json{{"op", "RandomRotation"}, {"degrees", 30}, {"interpolation", "bilinear"}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, RandomAffine,
                  json{{"op", "RandomAffine"},
                       {"degrees", 15},
                       {"translate", {0.1, 0.1}},
                       {"scale", {0.9, 1.1}},
                       {"shear", 10}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, AutoAugment_imagenet, json{{"op", "AutoAugment"}})->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, RandAugment, json{{"op", "RandAugment"}})->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, TrivialAugmentWide, json{{"op", "TrivialAugmentWide"}})->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, AugMix, json{{"op", "AugMix"}})->UseRealTime();

// The ops TrivialAugmentWide, RandAugment and AutoAugment draw from, called
// directly on a 224 x 224 crop with a mid-range magnitude: where a recipe's
// augment time goes, op by op. Geometric ops for each warp interpolation.
RgbImage Crop224() {
  const RgbImage source = SourceImage();
  RgbImage crop{224, 224, std::vector<uint8_t>(size_t{224} * 224 * 3)};
  for (int y = 0; y < 224; ++y) {
    std::memcpy(&crop.pixels[size_t{224} * 3 * y],
                &source.pixels[(size_t{500} * (y + 75) + 138) * 3], 224 * 3);
  }
  return crop;
}

using PixelOp = std::function<void(const RgbView&, const RgbSpan&)>;

void BM_Augment(benchmark::State& state, PixelOp op) {
  const RgbImage image = Crop224();
  std::vector<uint8_t> out(image.pixels.size());
  const RgbView src{image.pixels.data(), 224, 224, 224 * 3};
  const RgbSpan dst = RgbSpan::Packed(out.data(), 224, 224);
  for (auto _ : state) {
    op(src, dst);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// A geometric op for each warp interpolation: range(0) picks nearest,
// bilinear or bicubic.
using WarpOp = std::function<void(const RgbView&, const RgbSpan&, WarpInterpolation)>;

void BM_AugmentWarp(benchmark::State& state, WarpOp op) {
  constexpr WarpInterpolation kWarps[] = {WarpInterpolation::kNearest, WarpInterpolation::kBilinear,
                                          WarpInterpolation::kBicubic};
  constexpr const char* kNames[] = {"nearest", "bilinear", "bicubic"};
  const WarpInterpolation warp = kWarps[state.range(0)];
  state.SetLabel(kNames[state.range(0)]);
  BM_Augment(state, [&](const RgbView& src, const RgbSpan& dst) { op(src, dst, warp); });
}

const double kShear = Degrees(std::atan(0.5));
BENCHMARK_CAPTURE(BM_AugmentWarp, ShearX,
                  [](const RgbView& s, const RgbSpan& d, WarpInterpolation w) {
                    Affine(s, d, 0, 0, 0, 1, kShear, 0, w, Fill{}, true);
                  })
    ->DenseRange(0, 2)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AugmentWarp, ShearY,
                  [](const RgbView& s, const RgbSpan& d, WarpInterpolation w) {
                    Affine(s, d, 0, 0, 0, 1, 0, kShear, w, Fill{}, true);
                  })
    ->DenseRange(0, 2)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AugmentWarp, TranslateX,
                  [](const RgbView& s, const RgbSpan& d, WarpInterpolation w) {
                    Affine(s, d, 0, 16, 0, 1, 0, 0, w, Fill{}, false);
                  })
    ->DenseRange(0, 2)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AugmentWarp, Rotate,
                  [](const RgbView& s, const RgbSpan& d, WarpInterpolation w) {
                    Rotate(s, d, 67.5, w, Fill{});
                  })
    ->DenseRange(0, 2)
    ->UseRealTime();

#define GALLEY_AUGMENT_BENCHMARK(name, call)                                   \
  BENCHMARK_CAPTURE(BM_Augment, name, [](const RgbView& s, const RgbSpan& d) { \
    call;                                                                      \
  })->UseRealTime()
GALLEY_AUGMENT_BENCHMARK(Brightness, AdjustBrightness(s, d, 1.5));
GALLEY_AUGMENT_BENCHMARK(Color, AdjustSaturation(s, d, 1.5));
GALLEY_AUGMENT_BENCHMARK(Contrast, AdjustContrast(s, d, 1.5));
GALLEY_AUGMENT_BENCHMARK(Sharpness, AdjustSharpness(s, d, 1.5));
GALLEY_AUGMENT_BENCHMARK(Hue, AdjustHue(s, d, 0.1));
GALLEY_AUGMENT_BENCHMARK(Posterize, Posterize(s, d, 4));
GALLEY_AUGMENT_BENCHMARK(Solarize, Solarize(s, d, 128.0));
GALLEY_AUGMENT_BENCHMARK(AutoContrast, AutoContrast(s, d));
GALLEY_AUGMENT_BENCHMARK(Equalize, Equalize(s, d));
GALLEY_AUGMENT_BENCHMARK(Invert, Invert(s, d));
GALLEY_AUGMENT_BENCHMARK(Grayscale, ToGrayscale(s, d));
#undef GALLEY_AUGMENT_BENCHMARK

// RandomErasing on normalised float32 output (after Normalize).
void BM_RandomErasingFloat32(benchmark::State& state) {
  RunPipeline(state, {{"ops",
                       {{{"op", "CenterCrop"}, {"size", {224}}},
                        {{"op", "RandomErasing"}, {"p", 1.0}, {"value", 0}}}},
                      {"output", kFloat}});
}
BENCHMARK(BM_RandomErasingFloat32)->UseRealTime();

// torchvision's ImageNet training recipe: RandomResizedCrop(224, bicubic) +
// flip + TrivialAugmentWide + Normalize + RandomErasing(0.25), on the
// 500 x 375 image.
const json kImageNetRecipe = {
    {"ops",
     {{{"op", "RandomResizedCrop"}, {"size", {224}}, {"interpolation", "bicubic"}},
      {{"op", "RandomHorizontalFlip"}},
      {{"op", "TrivialAugmentWide"}, {"interpolation", "bicubic"}},
      {{"op", "RandomErasing"}, {"p", 0.25}}}},
    {"output", kFloat}};

void BM_ImageNetRecipe(benchmark::State& state) { RunPipeline(state, kImageNetRecipe); }
BENCHMARK(BM_ImageNetRecipe)->UseRealTime();

// The recipe writing each sample to the next place of a 96 MiB ring, as
// galleyd writes into a job's batch slots: the output is not in the cache
// when it is written.
void BM_ImageNetRecipeIntoRing(benchmark::State& state) {
  auto pipeline = TransformPipeline::FromJson(kImageNetRecipe);
  const RgbImage image = SourceImage();
  const size_t sample = pipeline->sample_bytes();
  std::vector<std::byte> ring(size_t{96} << 20);
  const size_t places = ring.size() / sample;
  for (size_t i = 0; i < places; ++i) {
    (void)pipeline->Apply(image, 1, 0, i, std::span(ring).subspan(i * sample, sample));
  }
  uint64_t item = 0;
  for (auto _ : state) {
    const Status status = pipeline->Apply(
        image, 1, 0, item, std::span(ring).subspan((item % places) * sample, sample));
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    ++item;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(sample));
}
BENCHMARK(BM_ImageNetRecipeIntoRing)->UseRealTime();

// The recipe without TrivialAugmentWide: what the crop, the bicubic
// resize, the normalised float write and the erasing cost on their own.
void BM_ImageNetRecipeWithoutAugment(benchmark::State& state) {
  json spec = kImageNetRecipe;
  spec["ops"].erase(2);
  RunPipeline(state, spec);
}
BENCHMARK(BM_ImageNetRecipeWithoutAugment)->UseRealTime();

// The recipe with a pixel op that changes nothing (brightness 1) in place
// of TrivialAugmentWide: the cost of everything but the op TrivialAugment
// draws, when it draws one.
void BM_ImageNetRecipeNoOpAugment(benchmark::State& state) {
  json spec = kImageNetRecipe;
  spec["ops"][2] = {{"op", "ColorJitter"}, {"brightness", {1.0, 1.0}}};
  RunPipeline(state, spec);
}
BENCHMARK(BM_ImageNetRecipeNoOpAugment)->UseRealTime();

void BM_BaselineOpenCvTrainPipelineUInt8(benchmark::State& state) {
  cv::setNumThreads(1);
  auto pipeline = TransformPipeline::FromJson(
      {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}}, {{"op", "RandomHorizontalFlip"}}}},
       {"output", kNchw}});
  const RgbImage image = SourceImage();
  const cv::Mat source(image.height, image.width, CV_8UC3,
                       const_cast<uint8_t*>(image.pixels.data()));
  std::vector<uint8_t> out(pipeline->sample_bytes());
  cv::Mat resized(224, 224, CV_8UC3);
  uint64_t item = 0;
  for (auto _ : state) {
    const auto window = SourceWindow(*pipeline, image.width, image.height, 1, 0, item);
    const bool flip = (item++ & 1) != 0;  // the flip's cost, half the time
    const bool shrink = window->width >= 224 && window->height >= 224;
    cv::resize(source(cv::Rect(window->x, window->y, window->width, window->height)), resized,
               resized.size(), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
    for (int y = 0; y < 224; ++y) {
      const uint8_t* row = resized.ptr<uint8_t>(y);
      for (int x = 0; x < 224; ++x) {
        const uint8_t* pixel = row + (flip ? 223 - x : x) * 3;
        for (int c = 0; c < 3; ++c) out[(c * 224 + y) * 224 + x] = pixel[c];
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()));
}
BENCHMARK(BM_BaselineOpenCvTrainPipelineUInt8)->UseRealTime();

// A 350 x 300 crop of the source (the mean RandomResizedCrop window on this
// image is about that size) to 224 x 224 HWC.
void BM_ResampleCropTo224(benchmark::State& state, bool allow_simd) {
  const RgbImage image = SourceImage();
  const RgbView crop{image.pixels.data() + (40 * 500 + 101) * 3, 350, 300, 500 * 3};
  std::vector<uint8_t> out(224 * 224 * 3);
  ResampleOptions options;
  options.allow_simd = allow_simd;
  for (auto _ : state) {
    const Status status = ResizeAntialiased(crop, ResizeGeometry::Whole(crop, 224, 224), options,
                                            out.data(), 224 * 3);
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()));
}
BENCHMARK_CAPTURE(BM_ResampleCropTo224, avx2, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_ResampleCropTo224, portable, false)->UseRealTime();

void BM_BaselineOpenCvAreaCropTo224(benchmark::State& state) {
  cv::setNumThreads(1);
  const RgbImage image = SourceImage();
  const cv::Mat source(image.height, image.width, CV_8UC3,
                       const_cast<uint8_t*>(image.pixels.data()));
  cv::Mat out(224, 224, CV_8UC3);
  for (auto _ : state) {
    cv::resize(source(cv::Rect(101, 40, 350, 300)), out, out.size(), 0, 0, cv::INTER_AREA);
    benchmark::DoNotOptimize(out.data);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.total() * 3));
}
BENCHMARK(BM_BaselineOpenCvAreaCropTo224)->UseRealTime();

}  // namespace
}  // namespace galley::image

BENCHMARK_MAIN();
