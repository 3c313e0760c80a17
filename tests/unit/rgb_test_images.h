// Test images for the pixel-op parity and fast-path tests: an owned packed
// RGB image, a textured one (gradients, a ripple and noise, so flat and busy
// regions and non-degenerate histograms occur), and random windows of a
// larger image (strides wider than the row, the window's last pixel at or
// before the allocation's end), which the AVX2 kernels must handle.
#ifndef GALLEY_TESTS_UNIT_RGB_TEST_IMAGES_H_
#define GALLEY_TESTS_UNIT_RGB_TEST_IMAGES_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "galley/image/rgb_span.h"

namespace galley::image {

struct TestImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;

  RgbSpan Span() { return RgbSpan::Packed(pixels.data(), width, height); }
};

inline TestImage Blank(int width, int height) {
  return {width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
}

// Values squeezed into [low, high], so autocontrast has something to stretch.
inline TestImage Textured(int width, int height, uint32_t seed, int noise_amplitude = 40,
                          int low = 0, int high = 255) {
  TestImage image = Blank(width, height);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-noise_amplitude, noise_amplitude);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * width + x) * 3];
      const double base[3] = {40 + 170.0 * x / width, 127.5 + 100 * std::sin(x * 0.11 + y * 0.07),
                              30 + 190.0 * y / height};
      for (int c = 0; c < 3; ++c) {
        const int v = std::clamp<int>(static_cast<int>(base[c]) + noise(rng), 0, 255);
        p[c] = static_cast<uint8_t>(low + v * (high - low) / 255);
      }
    }
  }
  return image;
}

// A random width x height window: of a packed image half of the rounds
// (odd `round`s use a larger image, so the stride exceeds the row).
struct RandomWindow {
  TestImage whole;
  RgbView view;

  RandomWindow(std::mt19937& rng, int round, int max_width, int max_height) {
    auto integer = [&](int low, int high) {
      return std::uniform_int_distribution<int>(low, high)(rng);
    };
    const int width = integer(1, max_width), height = integer(1, max_height);
    const int margin = round % 2 == 0 ? 0 : integer(1, 9);
    whole = Textured(width + margin, height + margin / 2, static_cast<uint32_t>(round));
    const int x0 = integer(0, margin), y0 = integer(0, margin / 2);
    view = {whole.pixels.data() + (static_cast<size_t>(y0) * whole.width + x0) * 3, width, height,
            static_cast<ptrdiff_t>(whole.width) * 3};
  }
};

// Runs a Python reference `script` on `inputs` and `cases` in a temporary
// directory: each input is written as in<i>.raw (packed RGB), each case
// gets the fields input ("in<i>.raw"), width and height of
// input_of(case), and the script, given the directory, reads cases.json and
// writes out<k>.raw for case k. Returns those outputs, or none (after a
// failed assertion) when the script fails.
inline std::vector<std::vector<uint8_t>> RunPythonReference(const std::string& python,
                                                            const std::string& script,
                                                            const std::vector<TestImage>& inputs,
                                                            nlohmann::json cases) {
  namespace fs = std::filesystem;
  const fs::path work =
      fs::temp_directory_path() / ("galley_reference_" + std::to_string(getpid()));
  fs::create_directories(work);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::ofstream(work / ("in" + std::to_string(i) + ".raw"), std::ios::binary)
        .write(reinterpret_cast<const char*>(inputs[i].pixels.data()),
               static_cast<std::streamsize>(inputs[i].pixels.size()));
  }
  for (nlohmann::json& c : cases) {
    const int input = c["input"].get<int>();
    c["input"] = "in" + std::to_string(input) + ".raw";
    c["width"] = inputs[input].width;
    c["height"] = inputs[input].height;
  }
  std::ofstream(work / "cases.json") << cases.dump();
  std::ofstream(work / "reference.py") << script;
  // torch builds an affine grid with a BLAS matrix product, and OpenBLAS
  // picks its kernel by CPU model: on a CPU it does not recognise (a
  // virtual "Intel Xeon Processor") it falls back to Prescott kernels
  // without fused multiply-add, and torchvision's warps then move a few
  // values by one level. Where the CPU has AVX2 and FMA, the reference runs
  // the kernels OpenBLAS gives every such CPU it knows (Haswell, Zen and
  // SkylakeX agree bit for bit), unless the caller chose a core type.
  std::string environment;
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma")) {
    environment = "OPENBLAS_CORETYPE=Haswell ";
  }
#endif
  const std::string command =
      environment + python + " " + (work / "reference.py").string() + " " + work.string();
  std::vector<std::vector<uint8_t>> outputs;
  const int status = std::system(command.c_str());
  EXPECT_EQ(status, 0) << command;
  if (status == 0) {
    for (size_t k = 0; k < cases.size(); ++k) {
      std::ifstream file(work / ("out" + std::to_string(k) + ".raw"), std::ios::binary);
      outputs.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
  }
  fs::remove_all(work);
  return outputs;
}

}  // namespace galley::image

#endif  // GALLEY_TESTS_UNIT_RGB_TEST_IMAGES_H_
