// Decode throughput on an ImageNet-sized JPEG (500 x 375, about 100 KB at
// quality 90), generated in-process with TurboJPEG so the benchmark needs no
// files. Reports items/s and encoded bytes/s for a full decode, for the
// scaled decodes a 224-pixel crop can use, and for region decodes of
// RandomResizedCrop windows against full decodes of the same samples.
//
// BM_DecodePng times PNG decoding the same way (bench/png_vs_pil.py runs it
// beside PIL on several kinds of PNG).
//
// With GALLEY_BENCH_JPEG_DIR set, the full, scaled and libjpeg benchmarks
// cycle through the JPEG files under that directory (up to 1,000) instead,
// so the stages can be measured on a real dataset:
//
//   GALLEY_BENCH_JPEG_DIR=.demo/bench-5000 build/bench/decode_bench
//
// The 1/8-scale decode (BM_DecodeScaled/8) bounds entropy (Huffman)
// decoding from above: it still decodes every coefficient of the file but
// inverse-transforms only the DC terms. BM_LibjpegVariant times the inexact
// inverse DCT and upsampling choices against the exact ones
// (docs/transforms.md, "Where decode time goes").
#include <benchmark/benchmark.h>
// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
// clang-format on
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "galley/image/decoder.h"
#include "galley/image/region_decoder.h"
#include "galley/image/transforms.h"

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

// The files with one of `extensions` under `dir` (up to 1,000, sorted).
std::vector<std::vector<uint8_t>> ReadFiles(const char* dir,
                                            std::initializer_list<std::string> extensions) {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    std::string ext = entry.path().extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (entry.is_regular_file() &&
        std::find(extensions.begin(), extensions.end(), ext) != extensions.end()) {
      paths.push_back(entry.path());
    }
  }
  std::sort(paths.begin(), paths.end());
  if (paths.size() > 1000) paths.resize(1000);
  std::vector<std::vector<uint8_t>> out;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (out.empty()) {
    std::fprintf(stderr, "%s holds no %s files\n", dir, extensions.begin()->c_str());
    std::exit(2);
  }
  return out;
}

// The files the full, scaled and libjpeg benchmarks decode: the JPEGs under
// GALLEY_BENCH_JPEG_DIR when it is set, else TestJpeg().
const std::vector<std::vector<uint8_t>>& Inputs() {
  static const std::vector<std::vector<uint8_t>> inputs = [] {
    const char* dir = std::getenv("GALLEY_BENCH_JPEG_DIR");
    if (dir == nullptr || *dir == '\0') return std::vector<std::vector<uint8_t>>{TestJpeg()};
    return ReadFiles(dir, {".jpg", ".jpeg"});
  }();
  return inputs;
}

// The files BM_DecodePng decodes: the PNGs under GALLEY_BENCH_PNG_DIR when it
// is set (bench/png_vs_pil.py sets it, one folder per kind of PNG), else the
// photo-like pixels written in-process as an 8-bit RGB PNG by libpng at its
// default compression.
const std::vector<std::vector<uint8_t>>& PngInputs() {
  static const std::vector<std::vector<uint8_t>> inputs = [] {
    const char* dir = std::getenv("GALLEY_BENCH_PNG_DIR");
    if (dir != nullptr && *dir != '\0') return ReadFiles(dir, {".png"});
    const std::vector<uint8_t> pixels = PhotoLikePixels();
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    image.width = kWidth;
    image.height = kHeight;
    image.format = PNG_FORMAT_RGB;
    png_alloc_size_t size = 0;
    if (!png_image_write_get_memory_size(image, size, 0, pixels.data(), 0, nullptr)) std::abort();
    std::vector<uint8_t> png(size);
    if (!png_image_write_to_memory(&image, png.data(), &size, 0, pixels.data(), 0, nullptr)) {
      std::abort();
    }
    png.resize(size);
    return std::vector<std::vector<uint8_t>>{png};
  }();
  return inputs;
}

double MeanBytes(const std::vector<std::vector<uint8_t>>& files) {
  double sum = 0;
  for (const auto& file : files) sum += static_cast<double>(file.size());
  return sum / static_cast<double>(files.size());
}

double MeanInputBytes() { return MeanBytes(Inputs()); }

// Full decodes cycling through `files`: items/s, encoded bytes/s, and the
// mean file size as the counter `size_counter`.
void TimeFullDecodes(benchmark::State& state, const std::vector<std::vector<uint8_t>>& files,
                     const char* size_counter) {
  benchmark::DoNotOptimize(Decode(files[0], DecodeOptions{}).ok());  // warm-up
  size_t i = 0;
  for (auto _ : state) {
    auto image = Decode(files[i++ % files.size()], DecodeOptions{});
    if (!image.ok()) state.SkipWithError(image.status().ToString().c_str());
    benchmark::DoNotOptimize(image->pixels.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * MeanBytes(files)));
  state.counters[size_counter] = MeanBytes(files);
}

void BM_DecodeFull(benchmark::State& state) { TimeFullDecodes(state, Inputs(), "jpeg_bytes"); }
BENCHMARK(BM_DecodeFull)->UseRealTime();

// Scaled decode at 1/argument (2, 4 or 8): each file is asked for exactly
// its size divided by the argument, rounded up, which DecodeScaled serves at
// that scale. out_width is the last file's.
void BM_DecodeScaled(benchmark::State& state) {
  const auto& inputs = Inputs();
  std::vector<ImageHeader> headers;
  for (const auto& jpeg : inputs) headers.push_back(ReadHeader(jpeg).value());
  const int denominator = static_cast<int>(state.range(0));
  int width = 0;
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ % inputs.size();
    auto image =
        DecodeScaled(inputs[k], DecodeOptions{}, (headers[k].width + denominator - 1) / denominator,
                     (headers[k].height + denominator - 1) / denominator);
    if (!image.ok()) state.SkipWithError(image.status().ToString().c_str());
    width = image->width;
    benchmark::DoNotOptimize(image->pixels.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * MeanInputBytes()));
  state.counters["out_width"] = width;
}
BENCHMARK(BM_DecodeScaled)->Arg(2)->Arg(4)->Arg(8)->UseRealTime();

// A full libjpeg decode with the inverse DCT and upsampling an inexact
// decoder could choose. Arguments: 0 = as Decode does it (accurate integer
// DCT, fancy upsampling); 1 = fast integer DCT; 2 = fast DCT and plain
// (replicating) upsampling.
void BM_LibjpegVariant(benchmark::State& state) {
  const auto& inputs = Inputs();
  size_t i = 0;
  const int variant = static_cast<int>(state.range(0));
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr error{};
  cinfo.err = jpeg_std_error(&error);  // the input is known good: errors exit
  jpeg_create_decompress(&cinfo);
  std::vector<uint8_t> pixels;
  for (auto _ : state) {
    const auto& jpeg = inputs[i++ % inputs.size()];
    jpeg_mem_src(&cinfo, jpeg.data(), jpeg.size());
    jpeg_read_header(&cinfo, TRUE);
    cinfo.out_color_space = JCS_RGB;
    cinfo.dct_method = variant == 0 ? JDCT_ISLOW : JDCT_IFAST;
    cinfo.do_fancy_upsampling = variant == 2 ? FALSE : TRUE;
    jpeg_start_decompress(&cinfo);
    const size_t row_bytes = size_t{cinfo.output_width} * 3;
    pixels.resize(row_bytes * cinfo.output_height);
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = pixels.data() + row_bytes * cinfo.output_scanline;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    benchmark::DoNotOptimize(pixels.data());
  }
  jpeg_destroy_decompress(&cinfo);
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(variant == 0   ? "accurate DCT, fancy upsampling"
                 : variant == 1 ? "fast DCT, fancy upsampling"
                                : "fast DCT, plain upsampling");
}
BENCHMARK(BM_LibjpegVariant)->DenseRange(0, 2)->UseRealTime();

void BM_ReadHeader(benchmark::State& state) {
  const auto& jpeg = TestJpeg();
  for (auto _ : state) benchmark::DoNotOptimize(ReadHeader(jpeg).ok());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReadHeader)->UseRealTime();

// A whole PNG to RGB through libpng, cycling through PngInputs(): items/s,
// and encoded bytes/s.
void BM_DecodePng(benchmark::State& state) { TimeFullDecodes(state, PngInputs(), "png_bytes"); }
BENCHMARK(BM_DecodePng)->UseRealTime();

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
const std::vector<Rect>& TrainWindows() {
  static const std::vector<Rect> windows = [] {
    std::vector<Rect> out;
    for (int item = 0; item < kItems; ++item) {
      out.push_back(TrainPipeline().RegionWindow(kWidth, kHeight, 1, 0, item).value());
    }
    return out;
  }();
  return windows;
}

double MeanAreaFraction() {
  double sum = 0;
  for (const Rect& w : TrainWindows()) sum += static_cast<double>(w.width) * w.height;
  return sum / (static_cast<double>(TrainWindows().size()) * kWidth * kHeight);
}

// Decode only, just each sample's window (compare BM_DecodeFull).
void BM_DecodeRegionWindows(benchmark::State& state) {
  const auto& jpeg = TestJpeg();
  const auto& windows = TrainWindows();
  size_t i = 0;
  for (auto _ : state) {
    const Rect& w = windows[i++ % windows.size()];
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
