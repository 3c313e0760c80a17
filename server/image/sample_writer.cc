#include "galley/image/sample_writer.h"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "galley/image/sample_random.h"

namespace galley::image {
namespace {

// Pixel x of an interleaved row, or pixel width - 1 - x when mirrored, goes
// to planes[c][x].
void SplitChannelsPortable(const uint8_t* rgb, int begin, int width, bool mirrored,
                           const std::array<uint8_t*, 3>& planes) {
  for (int x = begin; x < width; ++x) {
    const uint8_t* pixel = rgb + (mirrored ? width - 1 - x : x) * 3;
    planes[0][x] = pixel[0];
    planes[1][x] = pixel[1];
    planes[2][x] = pixel[2];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// Byte shuffles that gather one channel of 16 pixels (48 bytes, loaded as
// three vectors) into 16 bytes: masks[mirrored][channel][vector].
struct ChannelMasks {
  int8_t masks[2][3][3][16];
};

constexpr ChannelMasks MakeChannelMasks() {
  ChannelMasks result{};
  for (int mirrored = 0; mirrored < 2; ++mirrored) {
    for (int channel = 0; channel < 3; ++channel) {
      for (int part = 0; part < 3; ++part) {
        for (int j = 0; j < 16; ++j) {
          const int pixel = mirrored ? 15 - j : j;
          const int byte = pixel * 3 + channel - part * 16;
          // A mask byte with the top bit set writes zero.
          result.masks[mirrored][channel][part][j] =
              static_cast<int8_t>(byte >= 0 && byte < 16 ? byte : -128);
        }
      }
    }
  }
  return result;
}

constexpr ChannelMasks kChannelMasks = MakeChannelMasks();

[[gnu::target("ssse3")]] void SplitChannelsSsse3(const uint8_t* rgb, int width, bool mirrored,
                                                 const std::array<uint8_t*, 3>& planes) {
  int x = 0;
  for (; x + 16 <= width; x += 16) {
    const uint8_t* src = rgb + (mirrored ? width - 16 - x : x) * 3;
    __m128i parts[3];
    for (int part = 0; part < 3; ++part) {
      parts[part] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * part));
    }
    for (int channel = 0; channel < 3; ++channel) {
      const auto& masks = kChannelMasks.masks[mirrored ? 1 : 0][channel];
      __m128i gathered = _mm_setzero_si128();
      for (int part = 0; part < 3; ++part) {
        const __m128i mask = _mm_loadu_si128(reinterpret_cast<const __m128i*>(masks[part]));
        gathered = _mm_or_si128(gathered, _mm_shuffle_epi8(parts[part], mask));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(planes[channel] + x), gathered);
    }
  }
  SplitChannelsPortable(rgb, x, width, mirrored, planes);
}
#endif

void SplitChannels(const uint8_t* rgb, int width, bool mirrored,
                   const std::array<uint8_t*, 3>& planes) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has_ssse3 = __builtin_cpu_supports("ssse3");
  if (has_ssse3) {
    SplitChannelsSsse3(rgb, width, mirrored, planes);
    return;
  }
#endif
  SplitChannelsPortable(rgb, 0, width, mirrored, planes);
}

#if defined(__x86_64__) && defined(__GNUC__)
// (x / 255 - mean) / std for eight bytes at a time in float32: the same
// operations that built the normalisation table, so the same floats.
[[gnu::target("avx2")]] int NormalizeRowAvx2(const uint8_t* values, int width, float mean,
                                             float std, std::byte* out) {
  const __m256 k255 = _mm256_set1_ps(255.0f), m = _mm256_set1_ps(mean), s = _mm256_set1_ps(std);
  int x = 0;
  for (; x + 8 <= width; x += 8) {
    const __m256 v = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(values + x))));
    _mm256_storeu_ps(reinterpret_cast<float*>(out + x * sizeof(float)),
                     _mm256_div_ps(_mm256_sub_ps(_mm256_div_ps(v, k255), m), s));
  }
  return x;
}
#endif

}  // namespace

NormalizationTable MakeNormalizationTable(const OutputSpec& output) {
  NormalizationTable table;
  for (int c = 0; c < 3; ++c) {
    const float mean = static_cast<float>(output.mean[c]);
    const float std = static_cast<float>(output.std[c]);
    for (int v = 0; v < 256; ++v) table[c][v] = (static_cast<float>(v) / 255.0f - mean) / std;
  }
  return table;
}

size_t SampleBytes(const TransformSpec& spec) {
  const size_t element = spec.output.dtype == DType::kUInt8 ? 1 : sizeof(float);
  return size_t{3} * spec.output_height * spec.output_width * element;
}

SampleWriter::SampleWriter(int width, int height, bool flipped, const OutputSpec& output,
                           const NormalizationTable& table, const ChannelLut* lut, std::byte* dst,
                           std::vector<uint8_t>& row)
    : width_(width),
      plane_(static_cast<size_t>(width) * height),
      flipped_(flipped),
      layout_(output.layout),
      dtype_(output.dtype),
      table_(&table),
      mean_{static_cast<float>(output.mean[0]), static_cast<float>(output.mean[1]),
            static_cast<float>(output.mean[2])},
      std_{static_cast<float>(output.std[0]), static_cast<float>(output.std[1]),
           static_cast<float>(output.std[2])},
      lut_(lut),
      dst_(dst),
      direct_(!flipped && lut == nullptr && output.layout == Layout::kNHWC &&
              output.dtype == DType::kUInt8) {
  // One interleaved row, then the same row split into channels.
  if (row.size() < static_cast<size_t>(width) * 6) row.resize(static_cast<size_t>(width) * 6);
  row_ = row.data();
  channel_row_ = row_ + static_cast<size_t>(width) * 3;
  if (lut != nullptr && dtype_ == DType::kFloat32) {
    // The normalisation of the looked-up byte: the same floats as writing
    // the table op's output.
    for (int c = 0; c < 3; ++c) {
      for (int v = 0; v < 256; ++v) composed_[c][v] = table[c][(*lut)[c][v]];
    }
    table_ = &composed_;
    lut_ = nullptr;
    computed_ = false;
  }
}

uint8_t* SampleWriter::Row(int y) {
  if (direct_) return reinterpret_cast<uint8_t*>(dst_) + static_cast<size_t>(y) * width_ * 3;
  return row_;
}
void SampleWriter::Done(int y) {
  if (!direct_) Write(y, row_);
}

void SampleWriter::Write(int y, const uint8_t* rgb) const {
  if (dtype_ == DType::kUInt8) {
    WriteBytes(y, rgb);
  } else {
    WriteFloats(y, rgb);
  }
}

void SampleWriter::WriteBytes(int y, const uint8_t* rgb) const {
  const int w = width_;
  uint8_t* dst = reinterpret_cast<uint8_t*>(dst_);
  if (layout_ == Layout::kNHWC) {
    uint8_t* out = dst + static_cast<size_t>(y) * w * 3;
    if (lut_ != nullptr) {
      const ChannelLut& lut = *lut_;
      for (int x = 0; x < w; ++x) {
        const uint8_t* pixel = rgb + (flipped_ ? w - 1 - x : x) * 3;
        for (int c = 0; c < 3; ++c) out[x * 3 + c] = lut[c][pixel[c]];
      }
    } else if (!flipped_) {
      std::memcpy(out, rgb, static_cast<size_t>(w) * 3);
    } else {
      for (int x = 0; x < w; ++x) std::memcpy(out + x * 3, rgb + (w - 1 - x) * 3, 3);
    }
    return;
  }
  uint8_t* r = dst + static_cast<size_t>(y) * w;
  const std::array<uint8_t*, 3> planes = {r, r + plane_, r + 2 * plane_};
  SplitChannels(rgb, w, flipped_, planes);
  if (lut_ != nullptr) {
    for (int c = 0; c < 3; ++c) {
      const auto& table = (*lut_)[c];
      for (int x = 0; x < w; ++x) planes[c][x] = table[planes[c][x]];
    }
  }
}

void SampleWriter::WriteFloats(int y, const uint8_t* rgb) const {
  // memcpy per value: dst need not be 4-byte aligned, and compilers turn
  // this into plain stores.
  auto store = [](std::byte* at, float value) { std::memcpy(at, &value, sizeof(float)); };
  const size_t row_start = static_cast<size_t>(y) * width_;
  const int step = flipped_ ? -3 : 3;
  const uint8_t* first = rgb + (flipped_ ? width_ - 1 : 0) * 3;
  if (layout_ == Layout::kNCHW) {
    // Channels split first: each plane is then one table and one run of
    // contiguous stores.
    uint8_t* channels = channel_row_;
    SplitChannels(rgb, width_, flipped_, {channels, channels + width_, channels + 2 * width_});
    for (int c = 0; c < 3; ++c) {
      std::byte* out = dst_ + (c * plane_ + row_start) * sizeof(float);
      const uint8_t* values = channels + c * width_;
      const auto& table = (*table_)[c];
      int x = 0;
#if defined(__x86_64__) && defined(__GNUC__)
      static const bool has_avx2 = __builtin_cpu_supports("avx2");
      if (computed_ && has_avx2) x = NormalizeRowAvx2(values, width_, mean_[c], std_[c], out);
#endif
      for (; x < width_; ++x) store(out + x * sizeof(float), table[values[x]]);
    }
    return;
  }
  std::byte* out = dst_ + row_start * 3 * sizeof(float);
  for (int x = 0; x < width_; ++x, first += step) {
    for (int c = 0; c < 3; ++c) {
      store(out + (x * 3 + c) * sizeof(float), (*table_)[c][first[c]]);
    }
  }
}

void WriteErasures(std::span<const Erasure> erasures, const OutputSpec& output, int width,
                   int height, std::byte* dst) {
  const size_t plane = static_cast<size_t>(width) * height;
  const size_t element = output.dtype == DType::kUInt8 ? 1 : sizeof(float);
  for (const Erasure& erasure : erasures) {
    const Rect& rect = erasure.rect;
    if (!erasure.random && output.layout == Layout::kNCHW) {
      // A constant per channel: one run of equal elements per row.
      for (int c = 0; c < 3; ++c) {
        const float value = erasure.value[c];
        const auto byte = static_cast<uint8_t>(value);
        for (int y = rect.y; y < rect.y + rect.height; ++y) {
          std::byte* run = dst + (c * plane + static_cast<size_t>(y) * width + rect.x) * element;
          if (element == 1) {
            std::memset(run, byte, static_cast<size_t>(rect.width));
            continue;
          }
          for (int x = 0; x < rect.width; ++x) std::memcpy(run + x * element, &value, element);
        }
      }
      continue;
    }
    SampleRandom noise(erasure.noise_seed, 0, 0);
    // Channel-major like torchvision's tensor, so noise lands per (c, y, x).
    for (int c = 0; c < 3; ++c) {
      for (int y = rect.y; y < rect.y + rect.height; ++y) {
        for (int x = rect.x; x < rect.x + rect.width; ++x) {
          const size_t index = output.layout == Layout::kNCHW
                                   ? c * plane + static_cast<size_t>(y) * width + x
                                   : (static_cast<size_t>(y) * width + x) * 3 + c;
          const float value =
              erasure.random ? static_cast<float>(noise.Normal()) : erasure.value[c];
          if (element == 1) {
            dst[index] = static_cast<std::byte>(static_cast<uint8_t>(value));
          } else {
            std::memcpy(dst + index * element, &value, sizeof(float));
          }
        }
      }
    }
  }
}

}  // namespace galley::image
