#include "galley/image/pixel_rows.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GALLEY_PIXEL_ROWS_HAS_AVX2_KERNELS 1
#endif

namespace galley::image {
namespace {

constexpr float kSide = 1.0f / 13.0f;
constexpr float kCentre = 5.0f / 13.0f;

// SMOOTH at byte i of `row`, Pillow's ImagingFilter3x3: the row below
// first, each row's three products summed left to right, offset 0.5.
inline uint8_t SmoothByte(const uint8_t* above, const uint8_t* row, const uint8_t* below, int i) {
  float ss = 0.5f;
  ss += static_cast<float>(below[i - 3]) * kSide + static_cast<float>(below[i]) * kSide +
        static_cast<float>(below[i + 3]) * kSide;
  ss += static_cast<float>(row[i - 3]) * kSide + static_cast<float>(row[i]) * kCentre +
        static_cast<float>(row[i + 3]) * kSide;
  ss += static_cast<float>(above[i - 3]) * kSide + static_cast<float>(above[i]) * kSide +
        static_cast<float>(above[i + 3]) * kSide;
  if (ss <= 0.0f) return 0;
  if (ss >= 255.0f) return 255;
  return static_cast<uint8_t>(ss);
}

#ifdef GALLEY_PIXEL_ROWS_HAS_AVX2_KERNELS

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// Eight bytes from p as floats.
[[gnu::target("avx2")]] inline __m256 LoadFloats(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// Sixteen floats (already within 0..255) truncated and packed into bytes.
[[gnu::target("avx2")]] inline void StoreBytes(__m256 low, __m256 high, uint8_t* out) {
  const __m256i words = _mm256_packus_epi32(_mm256_cvttps_epi32(low), _mm256_cvttps_epi32(high));
  // packus works per 128-bit lane: words hold (low 0-3, high 0-3, low 4-7,
  // high 4-7); the permute restores the order.
  const __m256i ordered = _mm256_permute4x64_epi64(words, 0xD8);
  const __m128i bytes =
      _mm_packus_epi16(_mm256_castsi256_si128(ordered), _mm256_extracti128_si256(ordered, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bytes);
}

[[gnu::target("avx2")]] inline __m256 Clamp255(__m256 v) {
  return _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
}

[[gnu::target("avx2")]] int BlendRowAvx2(const uint8_t* degenerate, const uint8_t* image,
                                         uint8_t* out, int count, float alpha) {
  const __m256 a = _mm256_set1_ps(alpha);
  int i = 0;
  for (; i + 16 <= count; i += 16) {
    __m256 value[2];
    for (int h = 0; h < 2; ++h) {
      const __m128i d8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(degenerate + i + 8 * h));
      const __m128i s8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(image + i + 8 * h));
      const __m256i d = _mm256_cvtepu8_epi32(d8);
      const __m256i diff = _mm256_sub_epi32(_mm256_cvtepu8_epi32(s8), d);
      value[h] = Clamp255(
          _mm256_add_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(a, _mm256_cvtepi32_ps(diff))));
    }
    StoreBytes(value[0], value[1], out + i);
  }
  return i;
}

// One kernel row: (p[-3] * left + p[0] * middle) + p[3] * right.
[[gnu::target("avx2")]] inline __m256 KernelRow(const uint8_t* p, __m256 left, __m256 middle,
                                                __m256 right) {
  return _mm256_add_ps(
      _mm256_add_ps(_mm256_mul_ps(LoadFloats(p - 3), left), _mm256_mul_ps(LoadFloats(p), middle)),
      _mm256_mul_ps(LoadFloats(p + 3), right));
}

// SMOOTH of bytes [begin, end): returns where it stopped (a multiple of 16
// bytes after begin that leaves the last 3 + 8 bytes' loads in the rows).
[[gnu::target("avx2")]] int SmoothRowAvx2(const uint8_t* above, const uint8_t* row,
                                          const uint8_t* below, int begin, int end, uint8_t* out) {
  const __m256 side = _mm256_set1_ps(kSide);
  const __m256 centre = _mm256_set1_ps(kCentre);
  int i = begin;
  // Loads reach 8 + 3 bytes past i + 8; stop where they would pass `end + 3`
  // (the last pixel, which the caller copies, is still inside the row).
  for (; i + 16 <= end; i += 16) {
    __m256 value[2];
    for (int h = 0; h < 2; ++h) {
      const int at = i + 8 * h;
      __m256 ss = _mm256_set1_ps(0.5f);
      ss = _mm256_add_ps(ss, KernelRow(below + at, side, side, side));
      ss = _mm256_add_ps(ss, KernelRow(row + at, side, centre, side));
      ss = _mm256_add_ps(ss, KernelRow(above + at, side, side, side));
      value[h] = Clamp255(ss);
    }
    StoreBytes(value[0], value[1], out + i);
  }
  return i;
}

#endif  // GALLEY_PIXEL_ROWS_HAS_AVX2_KERNELS

}  // namespace

void BlendRow(const uint8_t* degenerate, const uint8_t* image, uint8_t* out, int count, float alpha,
              bool allow_simd) {
  int i = 0;
#ifdef GALLEY_PIXEL_ROWS_HAS_AVX2_KERNELS
  if (allow_simd && CpuHasAvx2()) i = BlendRowAvx2(degenerate, image, out, count, alpha);
#else
  (void)allow_simd;
#endif
  for (; i < count; ++i) out[i] = BlendByte(degenerate[i], image[i], alpha);
}

void LumaRow(const uint8_t* rgb, int width, uint8_t* out) {
  for (int x = 0; x < width; ++x, rgb += 3, out += 3) out[0] = out[1] = out[2] = Luma(rgb);
}

void SmoothRow(const uint8_t* above, const uint8_t* row, const uint8_t* below, int width,
               uint8_t* out, bool allow_simd) {
  const int end = 3 * width - 3;
  for (int i = 0; i < 3 && i < 3 * width; ++i) out[i] = row[i];
  for (int i = end > 3 ? end : 3; i < 3 * width; ++i) out[i] = row[i];
  int i = 3;
#ifdef GALLEY_PIXEL_ROWS_HAS_AVX2_KERNELS
  if (allow_simd && CpuHasAvx2() && end > 3) i = SmoothRowAvx2(above, row, below, 3, end, out);
#else
  (void)allow_simd;
#endif
  for (; i < end; ++i) out[i] = SmoothByte(above, row, below, i);
}

}  // namespace galley::image
