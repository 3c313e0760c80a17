// Transform throughput on a decoded 500 x 375 image (ImageNet's typical
// size): each op alone, and the training pipeline RandomResizedCrop(224) +
// RandomHorizontalFlip with uint8 NCHW and float32 normalised output.
// Items/s counts samples; bytes/s counts output bytes.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "server/image/transforms.h"

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
  RunPipeline(state, {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}}}}, {"output", kNchw}});
}
BENCHMARK(BM_RandomResizedCrop)->UseRealTime();

void BM_ResizeShorterSide(benchmark::State& state) {
  // Resize(256) then a CenterCrop of the whole result's short side keeps the
  // cost dominated by the resize.
  RunPipeline(state, {{"ops", {{{"op", "Resize"}, {"size", {256}}}, {{"op", "CenterCrop"}, {"size", {256}}}}},
                      {"output", kNchw}});
}
BENCHMARK(BM_ResizeShorterSide)->UseRealTime();

void BM_CenterCrop(benchmark::State& state) {
  RunPipeline(state, {{"ops", {{{"op", "CenterCrop"}, {"size", {224}}}}}, {"output", kNchw}});
}
BENCHMARK(BM_CenterCrop)->UseRealTime();

void BM_HorizontalFlip(benchmark::State& state) {
  RunPipeline(state, {{"ops", {{{"op", "CenterCrop"}, {"size", {224}}},
                               {{"op", "RandomHorizontalFlip"}, {"p", 1.0}}}},
                      {"output", kNchw}});
}
BENCHMARK(BM_HorizontalFlip)->UseRealTime();

void BM_TrainPipelineUInt8(benchmark::State& state) {
  RunPipeline(state, {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}},
                               {{"op", "RandomHorizontalFlip"}}}},
                      {"output", kNchw}});
}
BENCHMARK(BM_TrainPipelineUInt8)->UseRealTime();

void BM_TrainPipelineFloat32(benchmark::State& state) {
  RunPipeline(state, {{"ops", {{{"op", "RandomResizedCrop"}, {"size", {224}}},
                               {{"op", "RandomHorizontalFlip"}}}},
                      {"output", kFloat}});
}
BENCHMARK(BM_TrainPipelineFloat32)->UseRealTime();

void BM_EvalPipelineFloat32(benchmark::State& state) {
  RunPipeline(state, {{"ops", {{{"op", "Resize"}, {"size", {256}}}, {{"op", "CenterCrop"}, {"size", {224}}}}},
                      {"output", kFloat}});
}
BENCHMARK(BM_EvalPipelineFloat32)->UseRealTime();

}  // namespace
}  // namespace galley::image

BENCHMARK_MAIN();
