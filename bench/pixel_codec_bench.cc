// Which form should the encoded tier keep a max_resolution dataset's shrunk
// images in? For each JPEG of a folder: the original's decode and its shrink
// (what a decoded-tier miss costs without a packed form), then each candidate
// form of the shrunk pixels -- packed (pixel_codec.h), Zstandard and LZ4 over
// the raw pixels and over the same residuals, the raw pixels themselves, and
// a JPEG at quality 90, 4:2:0 (FFCV's .beton at max_resolution) -- with its
// bytes per item, the CPU time to make it and to read it back, and whether it
// reads back the same pixels.
//
//   build/bench/pixel_codec_bench [DIR] [--max-resolution 256] [--images 500]
//   (DIR: GALLEY_BENCH_JPEG_DIR, else .demo/bench-2000)
//
// Times are thread CPU time (CLOCK_THREAD_CPUTIME_ID), so that other work
// on a shared machine inflates them less than wall time; each step runs
// twice per image, the second timed, every form on the same image in turn.
#include <time.h>
#include <turbojpeg.h>
#include <zstd.h>
#ifdef GALLEY_BENCH_HAVE_LZ4
#include <lz4.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "galley/image/decoder.h"
#include "galley/image/max_resolution.h"
#include "galley/image/pixel_codec.h"

namespace galley::image {
namespace {

double CpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

// One candidate: `make` turns the shrunk image into its stored bytes,
// `read` turns them back into pixels; both report failure by an empty result.
struct Form {
  std::string name;
  std::function<std::vector<uint8_t>(const RgbImage&)> make;
  std::function<std::vector<uint8_t>(const std::vector<uint8_t>&, const RgbImage&)> read;
  double make_s = 0, read_s = 0, bytes = 0, abs_error = 0, squared_error = 0;
  bool lossless = true;
};

std::vector<uint8_t> Residuals(const RgbImage& image) {
  std::vector<uint8_t> out(image.pixels.size());
  PixelResiduals(image.pixels.data(), image.width, image.height, out.data());
  return out;
}

std::vector<uint8_t> Zstd(const std::vector<uint8_t>& data, int level) {
  std::vector<uint8_t> out(ZSTD_compressBound(data.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}
std::vector<uint8_t> Unzstd(const std::vector<uint8_t>& data, size_t size) {
  std::vector<uint8_t> out(size);
  const size_t n = ZSTD_decompress(out.data(), size, data.data(), data.size());
  if (ZSTD_isError(n) || n != size) out.clear();
  return out;
}

#ifdef GALLEY_BENCH_HAVE_LZ4
std::vector<uint8_t> Lz4(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(LZ4_compressBound(int(data.size())));
  const int n =
      LZ4_compress_default(reinterpret_cast<const char*>(data.data()),
                           reinterpret_cast<char*>(out.data()), int(data.size()), int(out.size()));
  out.resize(std::max(n, 0));
  return out;
}
std::vector<uint8_t> Unlz4(const std::vector<uint8_t>& data, size_t size) {
  std::vector<uint8_t> out(size);
  const int n =
      LZ4_decompress_safe(reinterpret_cast<const char*>(data.data()),
                          reinterpret_cast<char*>(out.data()), int(data.size()), int(size));
  if (n != int(size)) out.clear();
  return out;
}
#endif

std::vector<uint8_t> Restored(std::vector<uint8_t> residuals, const RgbImage& like) {
  if (!residuals.empty()) RestorePixelsInPlace(residuals.data(), like.width, like.height);
  return residuals;
}

std::vector<Form> Forms() {
  std::vector<Form> forms;
  forms.push_back({"packed (galley: residuals + zstd 1)",
                   [](const RgbImage& image) {
                     auto packed = PackPixels(image.pixels, image.width, image.height);
                     return packed.ok() ? *packed : std::vector<uint8_t>();
                   },
                   [](const std::vector<uint8_t>& bytes, const RgbImage&) {
                     auto image = UnpackPixels(bytes, DecodeOptions{});
                     return image.ok() ? image->pixels : std::vector<uint8_t>();
                   }});
  forms.push_back({"residuals + zstd 3",
                   [](const RgbImage& image) { return Zstd(Residuals(image), 3); },
                   [](const std::vector<uint8_t>& bytes, const RgbImage& like) {
                     return Restored(Unzstd(bytes, like.pixels.size()), like);
                   }});
  forms.push_back({"raw pixels + zstd 1",
                   [](const RgbImage& image) { return Zstd(image.pixels, 1); },
                   [](const std::vector<uint8_t>& bytes, const RgbImage& like) {
                     return Unzstd(bytes, like.pixels.size());
                   }});
#ifdef GALLEY_BENCH_HAVE_LZ4
  forms.push_back({"residuals + lz4", [](const RgbImage& image) { return Lz4(Residuals(image)); },
                   [](const std::vector<uint8_t>& bytes, const RgbImage& like) {
                     return Restored(Unlz4(bytes, like.pixels.size()), like);
                   }});
  forms.push_back({"raw pixels + lz4", [](const RgbImage& image) { return Lz4(image.pixels); },
                   [](const std::vector<uint8_t>& bytes, const RgbImage& like) {
                     return Unlz4(bytes, like.pixels.size());
                   }});
#endif
  forms.push_back({"raw pixels (a copy)", [](const RgbImage& image) { return image.pixels; },
                   [](const std::vector<uint8_t>& bytes, const RgbImage&) { return bytes; }});
  Form jpeg{"JPEG q90 4:2:0 (FFCV's .beton; lossy)",
            [](const RgbImage& image) {
              tjhandle handle = tjInitCompress();
              unsigned char* out = nullptr;
              unsigned long size = 0;
              std::vector<uint8_t> bytes;
              if (tjCompress2(handle, image.pixels.data(), image.width, 0, image.height, TJPF_RGB,
                              &out, &size, TJSAMP_420, 90, 0) == 0) {
                bytes.assign(out, out + size);
              }
              tjFree(out);
              tjDestroy(handle);
              return bytes;
            },
            [](const std::vector<uint8_t>& bytes, const RgbImage&) {
              auto image = Decode(bytes, DecodeOptions{});
              return image.ok() ? image->pixels : std::vector<uint8_t>();
            }};
  jpeg.lossless = false;
  forms.push_back(std::move(jpeg));
  return forms;
}

int Run(int argc, char** argv) {
  std::string dir;
  uint32_t limit = 256;
  size_t max_images = 500;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--max-resolution" && i + 1 < argc) {
      limit = uint32_t(std::atoi(argv[++i]));
    } else if (arg == "--images" && i + 1 < argc) {
      max_images = size_t(std::atol(argv[++i]));
    } else {
      dir = arg;
    }
  }
  if (dir.empty()) {
    const char* env = std::getenv("GALLEY_BENCH_JPEG_DIR");
    dir = env != nullptr && *env != '\0' ? env : ".demo/bench-2000";
  }
  std::vector<std::filesystem::path> paths;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string ext = it->path().extension().string();
    if (ext == ".jpg" || ext == ".jpeg") paths.push_back(it->path());
  }
  if (paths.empty()) {
    std::fprintf(stderr, "%s holds no JPEG files (make one: scripts/make_demo_dataset.py)\n",
                 dir.c_str());
    return 2;
  }
  std::sort(paths.begin(), paths.end());
  if (paths.size() > max_images) paths.resize(max_images);

  std::vector<Form> forms = Forms();
  double file_bytes = 0, raw_bytes = 0, decode_s = 0, shrink_s = 0;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    RgbImage image;
    double decode = 0, shrink = 0;
    for (int pass = 0; pass < 2; ++pass) {
      const double start = CpuSeconds();
      auto decoded = Decode(file, DecodeOptions{});
      const double decoded_at = CpuSeconds();
      if (!decoded.ok()) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(), decoded.status().ToString().c_str());
        return 1;
      }
      if (!ShrinkToMaxResolution(limit, &*decoded).ok()) return 1;
      decode = decoded_at - start;
      shrink = CpuSeconds() - decoded_at;
      image = std::move(decoded).value();
    }
    file_bytes += double(file.size());
    raw_bytes += double(image.pixels.size());
    decode_s += decode;
    shrink_s += shrink;
    for (Form& form : forms) {
      std::vector<uint8_t> stored, back;
      double make = 0, read = 0;
      for (int pass = 0; pass < 2; ++pass) {
        const double start = CpuSeconds();
        stored = form.make(image);
        const double made_at = CpuSeconds();
        back = form.read(stored, image);
        make = made_at - start;
        read = CpuSeconds() - made_at;
      }
      if (stored.empty() || back.size() != image.pixels.size()) {
        std::fprintf(stderr, "%s: %s failed\n", path.c_str(), form.name.c_str());
        return 1;
      }
      form.make_s += make;
      form.read_s += read;
      form.bytes += double(stored.size());
      for (size_t i = 0; i < back.size(); ++i) {
        const double d = double(back[i]) - double(image.pixels[i]);
        form.abs_error += std::abs(d);
        form.squared_error += d * d;
      }
    }
  }
  const double n = double(paths.size());
  std::printf("%zu JPEGs from %s, max_resolution %u: file %.1f KB, shrunk pixels %.1f KB\n",
              paths.size(), dir.c_str(), limit, file_bytes / n / 1e3, raw_bytes / n / 1e3);
  std::printf(
      "what a decoded-tier miss costs without a packed form: decode %.3f ms + shrink "
      "%.3f ms = %.3f CPU ms per item\n\n",
      decode_s / n * 1e3, shrink_s / n * 1e3, (decode_s + shrink_s) / n * 1e3);
  std::printf(
      "| form | KB per item | x shrunk pixels | make, CPU ms | read back, CPU ms | "
      "read back vs decode + shrink | pixels |\n|---|---|---|---|---|---|---|\n");
  for (const Form& form : forms) {
    const double samples = raw_bytes;
    const double mae = form.abs_error / samples;
    const double mse = form.squared_error / samples;
    std::string pixels = "identical";
    if (mse > 0) {
      char text[64];
      std::snprintf(text, sizeof(text), "MAE %.2f, PSNR %.1f dB", mae,
                    10 * std::log10(255.0 * 255.0 / mse));
      pixels = text;
    } else if (!form.lossless) {
      pixels = "identical (here)";
    }
    std::printf("| %s | %.1f | %.3f | %.3f | %.3f | %.1fx faster | %s |\n", form.name.c_str(),
                form.bytes / n / 1e3, form.bytes / raw_bytes, form.make_s / n * 1e3,
                form.read_s / n * 1e3, (decode_s + shrink_s) / form.read_s, pixels.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace galley::image

int main(int argc, char** argv) { return galley::image::Run(argc, argv); }
