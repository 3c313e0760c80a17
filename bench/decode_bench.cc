// Decode throughput on an ImageNet-sized JPEG (500 x 375, about 100 KB at
// quality 90), generated in-process with TurboJPEG so the benchmark needs no
// files. Reports items/s and encoded bytes/s for a full decode, for the
// scaled decodes a 224-pixel crop can use, and for region decodes of
// RandomResizedCrop windows against full decodes of the same samples.
#include <benchmark/benchmark.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "server/image/decoder.h"
#include "server/image/region_decoder.h"
#include "server/image/transforms.h"

namespace galley::image {
namespace {

constexpr int kWidth = 500;
constexpr int kHeight = 375;

// Smooth shapes plus sensor-like noise: compresses like a photograph.
std::vector<uint8_t> PhotoLikePixels() {
  std::vector<uint8_t> pixels(size_t{kWidth} * kHeight * 3);
  std::mt19937 random(42);
  std::normal_distribution<double> noise(0.0, 18.0);
  for (int y = 0; y < kHeight; ++y) {
    for (int x = 0; x < kWidth; ++x) {
      const double base[3] = {128 + 90 * std::sin(x * 0.021 + y * 0.007),
                              128 + 80 * std::cos(y * 0.017 - x * 0.004),
                              128 + 70 * std::sin((x + y) * 0.011)};
      for (int c = 0; c < 3; ++c) {
        const double v = base[c] + noise(random);
        pixels[(size_t{static_cast<size_t>(y)} * kWidth + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return pixels;
}

const std::vector<uint8_t>& TestJpeg() {
  static const std::vector<uint8_t> jpeg = [] {
    const std::vector<uint8_t> pixels = PhotoLikePixels();
    tjhandle compressor = tjInitCompress();
    unsigned char* buffer = nullptr;
    unsigned long size = 0;
    if (tjCompress2(compressor, pixels.data(), kWidth, kWidth * 3, kHeight, TJPF_RGB, &buffer,
                    &size, TJSAMP_420, 90, TJFLAG_ACCURATEDCT) != 0) {
      std::abort();
    }
    std::vector<uint8_t> out(buffer, buffer + size);
    tjFree(buffer);
    tjDestroy(compressor);
    return out;
  }();
  return jpeg;
}

void BM_DecodeFull(benchmark::State& state) {
  const auto& jpeg = TestJpeg();
  benchmark::DoNotOptimize(Decode(jpeg, DecodeOptions{}).ok());  // warm-up
  for (auto _ : state) {
    auto image = Decode(jpeg, DecodeOptions{});
    if (!image.ok()) state.SkipWithError(image.status().ToString().c_str());
    benchmark::DoNotOptimize(image->pixels.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(jpeg.size()));
  state.counters["jpeg_bytes"] = static_cast<double>(jpeg.size());
}
BENCHMARK(BM_DecodeFull)->UseRealTime();

// Scaled decode with the minimum a crop would ask for: argument = minimum
// side of the output: 180, 90 and 45 give the 1/2, 1/4 and 1/8 scales of a
// 500 x 375 image.
void BM_DecodeScaled(benchmark::State& state) {
  const auto& jpeg = TestJpeg();
  const int min_side = static_cast<int>(state.range(0));
  int width = 0;
  for (auto _ : state) {
    auto image = DecodeScaled(jpeg, DecodeOptions{}, min_side, min_side);
    if (!image.ok()) state.SkipWithError(image.status().ToString().c_str());
    width = image->width;
    benchmark::DoNotOptimize(image->pixels.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(jpeg.size()));
  state.counters["out_width"] = width;
}
BENCHMARK(BM_DecodeScaled)->Arg(180)->Arg(90)->Arg(45)->UseRealTime();

void BM_ReadHeader(benchmark::State& state) {
  const auto& jpeg = TestJpeg();
  for (auto _ : state) benchmark::DoNotOptimize(ReadHeader(jpeg).ok());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReadHeader)->UseRealTime();

// RandomResizedCrop(224) + RandomHorizontalFlip, the usual training pipeline.
const TransformPipeline& TrainPipeline() {
  static const TransformPipeline pipeline =
      TransformPipeline::FromJson(
          {{"ops",
            {{{"op", "RandomResizedCrop"}, {"size", {224}}}, {{"op", "RandomHorizontalFlip"}}}}})
          .value();
  return pipeline;
}

constexpr int kItems = 512;

// The windows of kItems consecutive samples, and their mean share of the image.
const std::vector<SourceRect>& TrainWindows() {
  static const std::vector<SourceRect> windows = [] {
    std::vector<SourceRect> out;
    for (int item = 0; item < kItems; ++item) {
      out.push_back(TrainPipeline().RegionWindow(kWidth, kHeight, 1, 0, item).value());
    }
    return out;
  }();
  return windows;
}

double MeanAreaFraction() {
  double sum = 0;
  for (const SourceRect& w : TrainWindows()) sum += static_cast<double>(w.width) * w.height;
  return sum / (static_cast<double>(TrainWindows().size()) * kWidth * kHeight);
}

// Decode only, just each sample's window (compare BM_DecodeFull).
void BM_DecodeRegionWindows(benchmark::State& state) {
  const auto& jpeg = TestJpeg();
  const auto& windows = TrainWindows();
  size_t i = 0;
  for (auto _ : state) {
    const SourceRect& w = windows[i++ % windows.size()];
    auto region = DecodeRegion(jpeg, DecodeOptions{}, w.x, w.y, w.width, w.height);
    if (!region.ok()) state.SkipWithError(region.status().ToString().c_str());
    benchmark::DoNotOptimize(region->pixels.pixels.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["mean_area_fraction"] = MeanAreaFraction();
}
BENCHMARK(BM_DecodeRegionWindows)->UseRealTime();

// Decode + augment, whole image: Decode then Apply.
void BM_SampleFullDecode(benchmark::State& state) {
  const auto& jpeg = TestJpeg();
  const TransformPipeline& pipeline = TrainPipeline();
  std::vector<std::byte> dst(pipeline.sample_bytes());
  uint64_t item = 0;
  for (auto _ : state) {
    auto image = Decode(jpeg, DecodeOptions{});
    if (!image.ok()) state.SkipWithError(image.status().ToString().c_str());
    const Status status = pipeline.Apply(*image, 1, 0, item++ % kItems, dst);
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SampleFullDecode)->UseRealTime();

// Decode + augment, region only: header, RegionWindow, DecodeRegion,
// ApplyRegion, as a caller would chain them.
void BM_SampleRegionDecode(benchmark::State& state) {
  const auto& jpeg = TestJpeg();
  const TransformPipeline& pipeline = TrainPipeline();
  std::vector<std::byte> dst(pipeline.sample_bytes());
  uint64_t item = 0;
  for (auto _ : state) {
    const uint64_t index = item++ % kItems;
    auto header = ReadHeader(jpeg);
    auto w = pipeline.RegionWindow(header->width, header->height, 1, 0, index);
    auto region = DecodeRegion(jpeg, DecodeOptions{}, w->x, w->y, w->width, w->height);
    if (!region.ok()) state.SkipWithError(region.status().ToString().c_str());
    const Status status =
        pipeline.ApplyRegion(region->pixels, region->x, region->y, region->full_width,
                             region->full_height, 1, 0, index, dst);
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["mean_area_fraction"] = MeanAreaFraction();
}
BENCHMARK(BM_SampleRegionDecode)->UseRealTime();

}  // namespace
}  // namespace galley::image

BENCHMARK_MAIN();
