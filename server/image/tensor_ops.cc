#include "galley/image/tensor_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "galley/image/pixel_ops.h"
#include "galley/image/rgb_lanes_avx2.h"

namespace galley::image {
namespace {

// clamp(0, 255) then .to(torch.uint8), which truncates.
inline uint8_t ClampTruncate(float value) {
  return static_cast<uint8_t>(std::min(std::max(value, 0.0f), 255.0f));
}

bool CpuHasAvx2() {
#ifdef GALLEY_HAS_RGB_LANES_AVX2
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

#ifdef GALLEY_HAS_RGB_LANES_AVX2
// Eight bytes as floats.
[[gnu::target("avx2")]] inline __m256 BytesToFloats(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// Eight floats already within 0..255, truncated to bytes.
[[gnu::target("avx2")]] inline void StoreTruncated(__m256 v, uint8_t* out) {
  const __m256i ints = _mm256_cvttps_epi32(v);
  const __m128i words =
      _mm_packus_epi32(_mm256_castsi256_si128(ints), _mm256_extracti128_si256(ints, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(words, words));
}

[[gnu::target("avx2")]] int BlendRowAvx2(const uint8_t* in, const float* degenerate, float a,
                                         float b, int count, uint8_t* out) {
  int i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v =
        _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(a), BytesToFloats(in + i)),
                      _mm256_mul_ps(_mm256_set1_ps(b), _mm256_loadu_ps(degenerate + i)));
    StoreTruncated(_mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f)),
                   out + i);
  }
  return i;
}

[[gnu::target("avx2")]] int MixRowAvx2(const uint8_t* in, float weight, bool first, int count,
                                       float* mix) {
  int i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 term = _mm256_mul_ps(_mm256_set1_ps(weight), BytesToFloats(in + i));
    _mm256_storeu_ps(mix + i, first ? term : _mm256_add_ps(_mm256_loadu_ps(mix + i), term));
  }
  return i;
}

[[gnu::target("avx2")]] int TruncateRowAvx2(const float* mix, int count, uint8_t* out) {
  int i = 0;
  for (; i + 8 <= count; i += 8) {
    StoreTruncated(_mm256_min_ps(_mm256_loadu_ps(mix + i), _mm256_set1_ps(255.0f)), out + i);
  }
  return i;
}
#endif

// torchvision's _blend(img1, img2, ratio) for one row: ratio * img1 +
// (1.0 - ratio) * img2 in float32 (ratio and its complement computed in
// double first), clamped, truncated.
void BlendRow(const uint8_t* in, const float* degenerate, double ratio, int count, uint8_t* out) {
  const float a = static_cast<float>(ratio);
  const float b = static_cast<float>(1.0 - ratio);
  int i = 0;
#ifdef GALLEY_HAS_RGB_LANES_AVX2
  if (CpuHasAvx2()) i = BlendRowAvx2(in, degenerate, a, b, count, out);
#endif
  for (; i < count; ++i) out[i] = ClampTruncate(a * static_cast<float>(in[i]) + b * degenerate[i]);
}

// Blends every row of src against the degenerate row that degenerate_row(y,
// row) writes (3 * width floats).
template <typename DegenerateRow>
void Blend(const RgbView& src, const RgbSpan& dst, double ratio, DegenerateRow degenerate_row) {
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(src.width) * 3);
  for (int y = 0; y < src.height; ++y) {
    degenerate_row(y, row.data());
    BlendRow(src.row(y), row.data(), ratio, src.width * 3, dst.row(y));
  }
}

// mix = weight * in (first) or mix + weight * in, in float32.
void MixRow(const uint8_t* in, float weight, bool first, int count, float* mix) {
  int i = 0;
#ifdef GALLEY_HAS_RGB_LANES_AVX2
  if (CpuHasAvx2()) i = MixRowAvx2(in, weight, first, count, mix);
#endif
  for (; i < count; ++i) {
    const float term = weight * static_cast<float>(in[i]);
    mix[i] = first ? term : mix[i] + term;
  }
}

// .to(torch.uint8) of the mix, which truncates; the weights sum to 1
// within rounding, so only the top needs a bound.
void TruncateRow(const float* mix, int count, uint8_t* out) {
  int i = 0;
#ifdef GALLEY_HAS_RGB_LANES_AVX2
  if (CpuHasAvx2()) i = TruncateRowAvx2(mix, count, out);
#endif
  for (; i < count; ++i) out[i] = static_cast<uint8_t>(std::min(mix[i], 255.0f));
}

// rgb_to_grayscale on a tensor: 0.2989 r + 0.587 g + 0.114 b in float32,
// truncated.
inline uint8_t TensorGray(const uint8_t* rgb) {
  const float value = (0.2989f * static_cast<float>(rgb[0]) + 0.587f * static_cast<float>(rgb[1])) +
                      0.114f * static_cast<float>(rgb[2]);
  return static_cast<uint8_t>(value);
}

// Fused multiply-add as torch's AVX2 kernels compute it: the instruction
// where the CPU has it, libm's correctly rounded fmaf otherwise (the same
// result, slower).
struct HardwareFma {
  [[gnu::always_inline]] static inline float Apply(float a, float b, float c) {
    return __builtin_fmaf(a, b, c);
  }
};
struct LibmFma {
  static float Apply(float a, float b, float c) { return std::fmaf(a, b, c); }
};

// What _gen_affine_grid and grid_sample derive from the matrix and the image
// size, in float32.
struct WarpSetup {
  int width = 0;
  int height = 0;
  // theta (float32) transposed and divided by [0.5 w, 0.5 h]: the grid is
  // base (x, y, 1) times it.
  float r00 = 0, r10 = 0, r20 = 0, r01 = 0, r11 = 0, r21 = 0;
  // linspace(-n / 2 + 0.5, n / 2 - 0.5, n): steps of exactly 1.
  float x_start = 0, y_start = 0;
  // grid_sample's unnormalisation: (g + 1) * (size / 2) - 0.5.
  float scale_x = 0, scale_y = 0;
  bool bilinear = true;
  const TensorFill* fill = nullptr;
};

WarpSetup MakeWarpSetup(const RgbView& src, const std::array<double, 6>& m, bool bilinear,
                        const TensorFill& fill) {
  WarpSetup w;
  w.width = src.width;
  w.height = src.height;
  const auto half_w = static_cast<float>(0.5 * src.width);
  const auto half_h = static_cast<float>(0.5 * src.height);
  w.r00 = static_cast<float>(m[0]) / half_w;
  w.r10 = static_cast<float>(m[1]) / half_w;
  w.r20 = static_cast<float>(m[2]) / half_w;
  w.r01 = static_cast<float>(m[3]) / half_h;
  w.r11 = static_cast<float>(m[4]) / half_h;
  w.r21 = static_cast<float>(m[5]) / half_h;
  w.x_start = static_cast<float>(-src.width * 0.5 + 0.5);
  w.y_start = static_cast<float>(-src.height * 0.5 + 0.5);
  w.scale_x = static_cast<float>(src.width) / 2;
  w.scale_y = static_cast<float>(src.height) / 2;
  w.bilinear = bilinear;
  w.fill = &fill;
  return w;
}

// Samples farther out than this (or NaN, from a degenerate matrix) read
// only zeros.
constexpr float kFar = 1 << 30;

// Output pixel (x, y): the grid point (the matrix product's kernel
// accumulates x * r0 + y * r1 with one fused multiply-add, then adds r2),
// grid_sample with zeros outside (the AVX2 kernel sums the four corners as
// a chain of fused multiply-adds), the fill through the mask channel, and
// round to nearest even.
template <typename Fma>
[[gnu::always_inline]] inline void WarpPixel(const RgbView& src, const WarpSetup& w, int x, int y,
                                             uint8_t* out) {
  const float gx_base = w.x_start + static_cast<float>(x);
  const float gy_base = w.y_start + static_cast<float>(y);
  const float gx = Fma::Apply(gy_base, w.r10, gx_base * w.r00) + w.r20;
  const float gy = Fma::Apply(gy_base, w.r11, gx_base * w.r01) + w.r21;
  const float ix = Fma::Apply(gx + 1.0f, w.scale_x, -0.5f);
  const float iy = Fma::Apply(gy + 1.0f, w.scale_y, -0.5f);
  std::array<float, 3> value{};
  float mask = 0.0f;
  if (!(std::fabs(ix) < kFar && std::fabs(iy) < kFar)) {
    // Every tap reads zero.
  } else if (!w.bilinear) {
    const int xi = static_cast<int>(std::nearbyint(ix));
    const int yi = static_cast<int>(std::nearbyint(iy));
    if (xi >= 0 && xi < w.width && yi >= 0 && yi < w.height) {
      const uint8_t* p = src.row(yi) + xi * 3;
      value = {static_cast<float>(p[0]), static_cast<float>(p[1]), static_cast<float>(p[2])};
      mask = 1.0f;
    }
  } else {
    const float x_w = std::floor(ix), y_n = std::floor(iy);
    const float east = ix - x_w, west = 1.0f - east, south = iy - y_n, north = 1.0f - south;
    const float weights[4] = {north * west, north * east, south * west, south * east};
    const int x0 = static_cast<int>(x_w), y0 = static_cast<int>(y_n);
    const uint8_t* taps[4] = {};
    for (int k = 0; k < 4; ++k) {
      const int tx = x0 + (k & 1), ty = y0 + (k >> 1);
      if (tx >= 0 && tx < w.width && ty >= 0 && ty < w.height) taps[k] = src.row(ty) + tx * 3;
    }
    for (int c = 0; c < 3; ++c) {
      float sum = (taps[0] != nullptr ? static_cast<float>(taps[0][c]) : 0.0f) * weights[0];
      for (int k = 1; k < 4; ++k) {
        sum =
            Fma::Apply(taps[k] != nullptr ? static_cast<float>(taps[k][c]) : 0.0f, weights[k], sum);
      }
      value[c] = sum;
    }
    mask = (taps[0] != nullptr ? 1.0f : 0.0f) * weights[0];
    for (int k = 1; k < 4; ++k)
      mask = Fma::Apply(taps[k] != nullptr ? 1.0f : 0.0f, weights[k], mask);
  }
  for (int c = 0; c < 3; ++c) {
    float v = value[c];
    if (*w.fill) {
      const float fill = (**w.fill)[c];
      if (!w.bilinear) {
        if (mask < 0.5f) v = fill;
      } else {
        v = v * mask + (1.0f - mask) * fill;
      }
    }
    out[c] = static_cast<uint8_t>(std::min(std::max(std::nearbyint(v), 0.0f), 255.0f));
  }
}

#ifdef GALLEY_HAS_RGB_LANES_AVX2

// Lanes whose pixel (xs, ys) lies in [0, max_x) x [0, max_y), all ones.
[[gnu::target("avx2")]] inline __m256i Inside(__m256i xs, __m256i ys, __m256i max_x,
                                              __m256i max_y) {
  const __m256i minus_one = _mm256_set1_epi32(-1);
  return _mm256_and_si256(
      _mm256_and_si256(_mm256_cmpgt_epi32(xs, minus_one), _mm256_cmpgt_epi32(max_x, xs)),
      _mm256_and_si256(_mm256_cmpgt_epi32(ys, minus_one), _mm256_cmpgt_epi32(max_y, ys)));
}

// Row y, eight pixels at a time with the same float32 operations as
// WarpPixel<HardwareFma>; the last width % 8 pixels through WarpPixel.
[[gnu::target("avx2,fma")]] void WarpRowAvx2(const RgbView& src, const WarpSetup& w, int y,
                                             int width, uint8_t* out) {
  const LastPixel last = LastPixelOf(src);
  const int stride = static_cast<int>(src.stride);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 gy_base = _mm256_set1_ps(w.y_start + static_cast<float>(y));
  const __m256 lanes = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i max_x = _mm256_set1_epi32(w.width), max_y = _mm256_set1_epi32(w.height);
  const __m256i minus_one = _mm256_set1_epi32(-1);
  const __m256 far = _mm256_set1_ps(kFar);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int x = 0;
  for (; x + 8 <= width; x += 8) {
    const __m256 gx_base = _mm256_add_ps(_mm256_set1_ps(w.x_start + static_cast<float>(x)), lanes);
    const __m256 gx = _mm256_add_ps(_mm256_fmadd_ps(gy_base, _mm256_set1_ps(w.r10),
                                                    _mm256_mul_ps(gx_base, _mm256_set1_ps(w.r00))),
                                    _mm256_set1_ps(w.r20));
    const __m256 gy = _mm256_add_ps(_mm256_fmadd_ps(gy_base, _mm256_set1_ps(w.r11),
                                                    _mm256_mul_ps(gx_base, _mm256_set1_ps(w.r01))),
                                    _mm256_set1_ps(w.r21));
    __m256 ix =
        _mm256_fmadd_ps(_mm256_add_ps(gx, one), _mm256_set1_ps(w.scale_x), _mm256_set1_ps(-0.5f));
    __m256 iy =
        _mm256_fmadd_ps(_mm256_add_ps(gy, one), _mm256_set1_ps(w.scale_y), _mm256_set1_ps(-0.5f));
    // Lanes far out (or NaN) move to (-4, -4), where every tap is outside.
    const __m256 near = _mm256_and_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, ix), far, _CMP_LT_OQ),
                                      _mm256_cmp_ps(_mm256_andnot_ps(sign, iy), far, _CMP_LT_OQ));
    ix = _mm256_blendv_ps(_mm256_set1_ps(-4.0f), ix, near);
    iy = _mm256_blendv_ps(_mm256_set1_ps(-4.0f), iy, near);
    __m256 value[3];
    __m256 mask;
    if (!w.bilinear) {
      const __m256i xi =
          _mm256_cvtps_epi32(_mm256_round_ps(ix, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      const __m256i yi =
          _mm256_cvtps_epi32(_mm256_round_ps(iy, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      const __m256i in = Inside(xi, yi, max_x, max_y);
      const __m256i offsets = _mm256_add_epi32(_mm256_mullo_epi32(yi, _mm256_set1_epi32(stride)),
                                               _mm256_mullo_epi32(xi, _mm256_set1_epi32(3)));
      const __m256i pixels = GatherPixels(src.data, offsets, in, last);
      for (int c = 0; c < 3; ++c) value[c] = _mm256_cvtepi32_ps(PixelChannel(pixels, c));
      mask = _mm256_and_ps(_mm256_castsi256_ps(in), one);
    } else {
      const __m256 x_w = _mm256_floor_ps(ix), y_n = _mm256_floor_ps(iy);
      const __m256 east = _mm256_sub_ps(ix, x_w), west = _mm256_sub_ps(one, east);
      const __m256 south = _mm256_sub_ps(iy, y_n), north = _mm256_sub_ps(one, south);
      const __m256 weights[4] = {_mm256_mul_ps(north, west), _mm256_mul_ps(north, east),
                                 _mm256_mul_ps(south, west), _mm256_mul_ps(south, east)};
      const __m256i x0 = _mm256_cvtps_epi32(x_w), y0 = _mm256_cvtps_epi32(y_n);
      const __m256i x1 = _mm256_sub_epi32(x0, minus_one), y1 = _mm256_sub_epi32(y0, minus_one);
      const __m256i in[4] = {Inside(x0, y0, max_x, max_y), Inside(x1, y0, max_x, max_y),
                             Inside(x0, y1, max_x, max_y), Inside(x1, y1, max_x, max_y)};
      const __m256i nw = _mm256_add_epi32(_mm256_mullo_epi32(y0, _mm256_set1_epi32(stride)),
                                          _mm256_mullo_epi32(x0, _mm256_set1_epi32(3)));
      const __m256i offsets[4] = {nw, _mm256_add_epi32(nw, _mm256_set1_epi32(3)),
                                  _mm256_add_epi32(nw, _mm256_set1_epi32(stride)),
                                  _mm256_add_epi32(nw, _mm256_set1_epi32(stride + 3))};
      __m256i pixels[4];
      for (int k = 0; k < 4; ++k) pixels[k] = GatherPixels(src.data, offsets[k], in[k], last);
      for (int c = 0; c < 3; ++c) {
        __m256 sum = _mm256_mul_ps(_mm256_cvtepi32_ps(PixelChannel(pixels[0], c)), weights[0]);
        for (int k = 1; k < 4; ++k) {
          sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(PixelChannel(pixels[k], c)), weights[k], sum);
        }
        value[c] = sum;
      }
      mask = _mm256_mul_ps(_mm256_and_ps(_mm256_castsi256_ps(in[0]), one), weights[0]);
      for (int k = 1; k < 4; ++k) {
        mask = _mm256_fmadd_ps(_mm256_and_ps(_mm256_castsi256_ps(in[k]), one), weights[k], mask);
      }
    }
    __m256i word = _mm256_setzero_si256();
    for (int c = 0; c < 3; ++c) {
      __m256 v = value[c];
      if (*w.fill) {
        const __m256 fill = _mm256_set1_ps((**w.fill)[c]);
        if (!w.bilinear) {
          v = _mm256_blendv_ps(v, fill, _mm256_cmp_ps(mask, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
        } else {
          v = _mm256_add_ps(_mm256_mul_ps(v, mask), _mm256_mul_ps(_mm256_sub_ps(one, mask), fill));
        }
      }
      v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
      word = _mm256_or_si256(word, _mm256_slli_epi32(_mm256_cvtps_epi32(v), 8 * c));
    }
    StorePixelLanes(word, out + x * 3);
  }
  for (; x < width; ++x) WarpPixel<HardwareFma>(src, w, x, y, out + x * 3);
}

#endif  // GALLEY_HAS_RGB_LANES_AVX2

[[gnu::target("avx2,fma")]] void WarpWithFma(const RgbView& src, const RgbSpan& dst,
                                             const WarpSetup& w, bool allow_simd) {
  for (int y = 0; y < dst.height; ++y) {
#ifdef GALLEY_HAS_RGB_LANES_AVX2
    // Gathers take int32 offsets.
    if (allow_simd && static_cast<int64_t>(src.height) * src.stride < (int64_t{1} << 31)) {
      WarpRowAvx2(src, w, y, dst.width, dst.row(y));
      continue;
    }
#endif
    for (int x = 0; x < dst.width; ++x) WarpPixel<HardwareFma>(src, w, x, y, dst.row(y) + x * 3);
  }
}

void WarpWithLibm(const RgbView& src, const RgbSpan& dst, const WarpSetup& w) {
  for (int y = 0; y < dst.height; ++y) {
    for (int x = 0; x < dst.width; ++x) WarpPixel<LibmFma>(src, w, x, y, dst.row(y) + x * 3);
  }
}

bool CpuHasAvx2Fma() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

}  // namespace

void TensorAdjustBrightness(const RgbView& src, const RgbSpan& dst, double factor) {
  // The degenerate image is zeros_like(img).
  Blend(src, dst, factor, [&](int, float* row) { std::fill_n(row, src.width * 3, 0.0f); });
}

void TensorAdjustSaturation(const RgbView& src, const RgbSpan& dst, double factor) {
  Blend(src, dst, factor, [&](int y, float* row) {
    const uint8_t* in = src.row(y);
    for (int x = 0; x < src.width; ++x) {
      row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = static_cast<float>(TensorGray(in + 3 * x));
    }
  });
}

void TensorAdjustContrast(const RgbView& src, const RgbSpan& dst, double factor) {
  // torch.mean of the grayscale image in float32: the sum of its integers
  // is exact below 2^24 (every image up to 65,793 pixels), then one
  // division.
  int64_t sum = 0;
  for (int y = 0; y < src.height; ++y) {
    for (int x = 0; x < src.width; ++x) sum += TensorGray(src.row(y) + x * 3);
  }
  const float mean =
      static_cast<float>(sum) / static_cast<float>(static_cast<int64_t>(src.width) * src.height);
  Blend(src, dst, factor, [&](int, float* row) { std::fill_n(row, src.width * 3, mean); });
}

void TensorAdjustSharpness(const RgbView& src, const RgbSpan& dst, double factor) {
  if (src.width <= 2 || src.height <= 2) {
    CopyPixels(src, dst);
    return;
  }
  // _blurred_degenerate_image: a float32 3x3 kernel (1, centre 5, over
  // their sum 13) by conv2d, rounded to nearest even; the border keeps the
  // image's pixels.
  const float side = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  const size_t row_bytes = static_cast<size_t>(src.width) * 3;
  std::vector<float> degenerate(row_bytes * src.height);
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    float* out = &degenerate[row_bytes * y];
    for (size_t i = 0; i < row_bytes; ++i) out[i] = static_cast<float>(in[i]);
    if (y == 0 || y == src.height - 1) continue;
    for (size_t i = 3; i + 3 < row_bytes; ++i) {
      float sum = 0.0f;
      for (int dy = -1; dy <= 1; ++dy) {
        const uint8_t* r = src.row(y + dy);
        for (int dx = -3; dx <= 3; dx += 3) {
          const float weight = dy == 0 && dx == 0 ? centre : side;
          sum += weight * static_cast<float>(r[i + dx]);
        }
      }
      out[i] = std::nearbyint(sum);
    }
  }
  Blend(src, dst, factor,
        [&](int y, float* row) { std::copy_n(&degenerate[row_bytes * y], row_bytes, row); });
}

void TensorAutoContrast(const RgbView& src, const RgbSpan& dst) {
  std::array<uint8_t, 3> low = {255, 255, 255}, high = {0, 0, 0};
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    for (int x = 0; x < src.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        low[c] = std::min(low[c], in[x * 3 + c]);
        high[c] = std::max(high[c], in[x * 3 + c]);
      }
    }
  }
  // scale = bound / (max - min): Python's int / tensor is the tensor's
  // reciprocal times the int, in float32; an infinite scale (max == min)
  // becomes 1 with minimum 0.
  ChannelLut lut{};
  for (int c = 0; c < 3; ++c) {
    float minimum = low[c];
    float scale = (1.0f / (static_cast<float>(high[c]) - minimum)) * 255.0f;
    if (!std::isfinite(scale)) {
      minimum = 0.0f;
      scale = 1.0f;
    }
    for (int v = 0; v < 256; ++v) {
      lut[c][v] = ClampTruncate((static_cast<float>(v) - minimum) * scale);
    }
  }
  ApplyLut(src, dst, lut);
}

void TensorAffineWarp(const RgbView& src, const RgbSpan& dst, const std::array<double, 6>& matrix,
                      bool bilinear, const TensorFill& fill, bool allow_simd) {
  const WarpSetup setup = MakeWarpSetup(src, matrix, bilinear, fill);
  if (CpuHasAvx2Fma()) {
    WarpWithFma(src, dst, setup, allow_simd);
  } else {
    WarpWithLibm(src, dst, setup);
  }
}

void AugMixApplyStep(const RgbView& src, const RgbSpan& dst, const AugMixStep& step, bool bilinear,
                     const TensorFill& fill) {
  // torchvision's _apply_op with F.affine / F.rotate on a tensor: centre
  // [0, 0] (the shears') is (-w / 2, -h / 2) in the tensor's centred
  // coordinates, no centre is (0, 0), and rotate turns by -angle.
  const double m = step.magnitude;
  const double left = -src.width * 0.5, top = -src.height * 0.5;
  switch (step.op) {
    case AugMixOp::kShearX:
      TensorAffineWarp(src, dst,
                       InverseAffineMatrix(left, top, 0, 0, 0, 1, Degrees(std::atan(m)), 0),
                       bilinear, fill);
      return;
    case AugMixOp::kShearY:
      TensorAffineWarp(src, dst,
                       InverseAffineMatrix(left, top, 0, 0, 0, 1, 0, Degrees(std::atan(m))),
                       bilinear, fill);
      return;
    case AugMixOp::kTranslateX:
      TensorAffineWarp(src, dst, InverseAffineMatrix(0, 0, 0, std::trunc(m), 0, 1, 0, 0), bilinear,
                       fill);
      return;
    case AugMixOp::kTranslateY:
      TensorAffineWarp(src, dst, InverseAffineMatrix(0, 0, 0, 0, std::trunc(m), 1, 0, 0), bilinear,
                       fill);
      return;
    case AugMixOp::kRotate:
      TensorAffineWarp(src, dst, InverseAffineMatrix(0, 0, -m, 0, 0, 1, 0, 0), bilinear, fill);
      return;
    case AugMixOp::kPosterize:
      ApplyLut(src, dst, PosterizeLut(static_cast<int>(m)));
      return;
    case AugMixOp::kSolarize:
      ApplyLut(src, dst, SolarizeLut(m));
      return;
    case AugMixOp::kAutoContrast:
      TensorAutoContrast(src, dst);
      return;
    case AugMixOp::kEqualize:
      ApplyLut(src, dst, EqualizeLut(src));
      return;
    case AugMixOp::kBrightness:
      TensorAdjustBrightness(src, dst, 1.0 + m);
      return;
    case AugMixOp::kColor:
      TensorAdjustSaturation(src, dst, 1.0 + m);
      return;
    case AugMixOp::kContrast:
      TensorAdjustContrast(src, dst, 1.0 + m);
      return;
    case AugMixOp::kSharpness:
      TensorAdjustSharpness(src, dst, 1.0 + m);
      return;
  }
}

void AugMix(const RgbView& src, const RgbSpan& dst, const AugMixDraw& draw, bool bilinear,
            const TensorFill& fill) {
  const int width = src.width, height = src.height;
  const size_t row_bytes = static_cast<size_t>(width) * 3;
  thread_local std::vector<float> mix;
  thread_local std::array<std::vector<uint8_t>, 2> chain;
  mix.resize(row_bytes * height);
  for (auto& buffer : chain) buffer.resize(row_bytes * height);
  // mix = m0 * image, then mix += weight_i * chain_i(image), in float32.
  const int count = width * 3;
  for (int y = 0; y < height; ++y) {
    MixRow(src.row(y), draw.original_weight, true, count, &mix[row_bytes * y]);
  }
  for (int c = 0; c < draw.width; ++c) {
    RgbView current = src;
    for (int d = 0; d < draw.depths[c]; ++d) {
      const RgbSpan next = RgbSpan::Packed(chain[d % 2].data(), width, height);
      AugMixApplyStep(current, next, draw.steps[c][d], bilinear, fill);
      current = next;
    }
    for (int y = 0; y < height; ++y) {
      MixRow(current.row(y), draw.weights[c], false, count, &mix[row_bytes * y]);
    }
  }
  for (int y = 0; y < height; ++y) TruncateRow(&mix[row_bytes * y], count, dst.row(y));
}

}  // namespace galley::image
