// AVX2 helpers for kernels that compute eight output pixels of interleaved
// RGB uint8 images at once, one pixel per 32-bit lane (R | G << 8 | B << 16):
// gathering source pixels at arbitrary offsets without reading past the
// image, taking a channel out, and storing eight pixels as 24 bytes. Used
// by the warps (affine_warp.cc, tensor_ops.cc). Internal to galley_image;
// x86-64 with GCC or clang only (callers check GALLEY_HAS_RGB_LANES_AVX2 and
// the CPU). Stateless inline functions, safe from any thread.
#ifndef GALLEY_SERVER_IMAGE_RGB_LANES_AVX2_H_
#define GALLEY_SERVER_IMAGE_RGB_LANES_AVX2_H_

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#include "galley/image/rgb_span.h"

#define GALLEY_HAS_RGB_LANES_AVX2 1

namespace galley::image {

// What a gather needs to avoid reading past a view: a four-byte load at the
// view's last pixel would take one byte beyond it, so lanes at that offset
// take the pixel from `last` instead.
struct LastPixel {
  __m256i offset;
  __m256i word;
};

[[gnu::target("avx2")]] inline LastPixel LastPixelOf(const RgbView& view) {
  const uint8_t* p = view.row(view.height - 1) + (view.width - 1) * 3;
  return {_mm256_set1_epi32(static_cast<int>(p - view.data)),
          _mm256_set1_epi32(p[0] | p[1] << 8 | p[2] << 16)};
}

// The pixel at each lane's byte offset from base where `wanted` is set
// (all ones), zero elsewhere; the fourth byte of a lane is unspecified.
[[gnu::target("avx2")]] inline __m256i GatherPixels(const uint8_t* base, __m256i offsets,
                                                    __m256i wanted, const LastPixel& last) {
  const __m256i at_last = _mm256_cmpeq_epi32(offsets, last.offset);
  const __m256i load = _mm256_andnot_si256(at_last, wanted);
  const __m256i fallback = _mm256_and_si256(_mm256_and_si256(at_last, wanted), last.word);
  return _mm256_mask_i32gather_epi32(fallback, reinterpret_cast<const int*>(base), offsets, load,
                                     1);
}

// Channel c of gathered pixels, as int32 lanes.
[[gnu::target("avx2")]] inline __m256i PixelChannel(__m256i pixels, int c) {
  return _mm256_and_si256(_mm256_srlv_epi32(pixels, _mm256_set1_epi32(8 * c)),
                          _mm256_set1_epi32(0xFF));
}

// Writes eight pixels (R | G << 8 | B << 16 per lane) as 24 bytes.
[[gnu::target("avx2")]] inline void StorePixelLanes(__m256i words, uint8_t* out) {
  const __m256i compact =
      _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,  //
                       0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(words, compact),
                                                     _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(packed));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 16), _mm256_extracti128_si256(packed, 1));
}

}  // namespace galley::image

#endif  // x86-64 with GCC or clang

#endif  // GALLEY_SERVER_IMAGE_RGB_LANES_AVX2_H_
