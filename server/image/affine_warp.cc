#include "galley/image/affine_warp.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "galley/image/rgb_lanes_avx2.h"
#ifdef GALLEY_HAS_RGB_LANES_AVX2
#define GALLEY_WARP_HAS_AVX2_KERNELS 1
#endif

namespace galley::image {
namespace {

// Pillow's FLOOR and COORD for coordinates.
inline int64_t FloorToInt(double v) { return static_cast<int64_t>(std::floor(v)); }
// Positions far outside (or NaN, from a degenerate matrix) read as outside.
inline int64_t Coord(double v) { return v >= 0.0 && v < 1e15 ? static_cast<int64_t>(v) : -1; }

void FillRow(uint8_t* out, int width, const Fill& fill) {
  for (int x = 0; x < width; ++x) std::memcpy(out + x * 3, fill.data(), 3);
}

// Whether the matrix moves every pixel by whole pixels and nothing else:
// then output (x, y) is source (x + tx, y + ty), for every filter. Nearest
// samples that pixel; bilinear and bicubic sample it at distance 0, where
// Pillow's polynomials reduce to the pixel itself (p1 + 0 * (...) = p1).
bool WholePixelShift(const std::array<double, 6>& a, int& tx, int& ty) {
  constexpr double kLimit = 1 << 30;
  if (a[0] != 1.0 || a[1] != 0.0 || a[3] != 0.0 || a[4] != 1.0) return false;
  if (!(std::fabs(a[2]) < kLimit && std::fabs(a[5]) < kLimit)) return false;  // NaN too
  if (a[2] != std::trunc(a[2]) || a[5] != std::trunc(a[5])) return false;
  tx = static_cast<int>(a[2]);
  ty = static_cast<int>(a[5]);
  return true;
}

void Shift(const RgbView& src, const RgbSpan& dst, int tx, int ty, const Fill& fill) {
  // Output columns [x0, x1) read source columns [x0 + tx, x1 + tx).
  const int x0 = std::clamp(-tx, 0, dst.width);
  const int x1 = std::clamp(src.width - tx, x0, dst.width);
  for (int y = 0; y < dst.height; ++y) {
    uint8_t* out = dst.row(y);
    const int source_row = y + ty;
    if (source_row < 0 || source_row >= src.height || x0 == x1) {
      FillRow(out, dst.width, fill);
      continue;
    }
    FillRow(out, x0, fill);
    std::memcpy(out + x0 * 3, src.row(source_row) + static_cast<ptrdiff_t>(x0 + tx) * 3,
                static_cast<size_t>(x1 - x0) * 3);
    FillRow(out + x1 * 3, dst.width - x1, fill);
  }
}

void WarpNearest(const RgbView& src, const RgbSpan& dst, const std::array<double, 6>& a,
                 const Fill& fill) {
  const int64_t xsize = src.width, ysize = src.height;
  const int width = dst.width, height = dst.height;
  auto copy = [&](uint8_t* out, int64_t xin, int64_t yin) {
    if (xin >= 0 && xin < xsize && yin >= 0 && yin < ysize) {
      std::memcpy(out, src.row(static_cast<int>(yin)) + xin * 3, 3);
    }
  };
  if (a[1] == 0 && a[3] == 0) {
    // ImagingScaleAffine: positions accumulate in double.
    std::vector<int64_t> xintab(width);
    double xo = a[2] + a[0] * 0.5;
    double yo = a[5] + a[4] * 0.5;
    for (int x = 0; x < width; ++x, xo += a[0]) xintab[x] = Coord(xo);
    for (int y = 0; y < height; ++y, yo += a[4]) {
      uint8_t* out = dst.row(y);
      FillRow(out, width, fill);
      const int64_t yi = Coord(yo);
      for (int x = 0; x < width; ++x) copy(out + x * 3, xintab[x], yi);
    }
    return;
  }
  auto fits = [&](double x, double y) {
    return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 &&
           std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
  };
  if (fits(0, 0) && fits(width, height) && fits(0, height) && fits(width, 0)) {
    // affine_fixed: 16.16 fixed point, positions accumulate exactly.
    auto fix = [](double v) { return FloorToInt(v * 65536.0 + 0.5); };
    const int64_t a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
    int64_t a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5);
    int64_t a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
    for (int y = 0; y < height; ++y, a2 += a1, a5 += a4) {
      uint8_t* out = dst.row(y);
      FillRow(out, width, fill);
      int64_t xx = a2, yy = a5;
      for (int x = 0; x < width; ++x, xx += a0, yy += a3) {
        // Arithmetic shift of a 32-bit int is a floor division by 65536.
        copy(out + x * 3, xx >> 16, yy >> 16);
      }
    }
    return;
  }
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
  double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  for (int y = 0; y < height; ++y, xo += a[1], yo += a[4]) {
    uint8_t* out = dst.row(y);
    FillRow(out, width, fill);
    double xx = xo, yy = yo;
    for (int x = 0; x < width; ++x, xx += a[0], yy += a[3]) copy(out + x * 3, Coord(xx), Coord(yy));
  }
}

// Pillow's bilinear_filter32RGB / bicubic_filter32RGB at source position
// (xin, yin); false outside the image. Pillow's rows past an edge repeat the
// previous row, which is the same as clamping the row index (the AVX2
// kernels clamp).
bool SampleFiltered(const RgbView& src, double xin, double yin, bool bicubic, uint8_t* out) {
  if (!(xin >= 0.0 && xin < src.width && yin >= 0.0 && yin < src.height)) return false;  // NaN too
  xin -= 0.5;
  yin -= 0.5;
  int x = static_cast<int>(FloorToInt(xin));
  int y = static_cast<int>(FloorToInt(yin));
  const double dx = xin - x;
  const double dy = yin - y;
  auto xclip = [&](int v) { return std::clamp(v, 0, src.width - 1); };
  auto row_ok = [&](int v) { return v >= 0 && v < src.height; };
  if (!bicubic) {
    const int x0 = xclip(x) * 3, x1 = xclip(x + 1) * 3;
    for (int c = 0; c < 3; ++c) {
      const uint8_t* in = src.row(std::clamp(y, 0, src.height - 1));
      double v1 = in[x0 + c] + (in[x1 + c] - in[x0 + c]) * dx;
      double v2 = v1;
      if (row_ok(y + 1)) {
        in = src.row(y + 1);
        v2 = in[x0 + c] + (in[x1 + c] - in[x0 + c]) * dx;
      }
      v1 = v1 + (v2 - v1) * dy;
      out[c] = static_cast<uint8_t>(v1);
    }
    return true;
  }
  auto cubic = [](double v1, double v2, double v3, double v4, double d) {
    const double p1 = v2;
    const double p2 = -v1 + v3;
    const double p3 = 2 * (v1 - v2) + v3 - v4;
    const double p4 = -v1 + v2 - v3 + v4;
    return p1 + d * (p2 + d * (p3 + d * p4));
  };
  --x;
  --y;
  const int xs[4] = {xclip(x) * 3, xclip(x + 1) * 3, xclip(x + 2) * 3, xclip(x + 3) * 3};
  for (int c = 0; c < 3; ++c) {
    auto row = [&](const uint8_t* in) {
      return cubic(in[xs[0] + c], in[xs[1] + c], in[xs[2] + c], in[xs[3] + c], dx);
    };
    double v[4];
    v[0] = row(src.row(std::clamp(y, 0, src.height - 1)));
    for (int k = 1; k < 4; ++k) v[k] = row_ok(y + k) ? row(src.row(y + k)) : v[k - 1];
    const double value = cubic(v[0], v[1], v[2], v[3], dy);
    out[c] = value <= 0.0 ? 0 : value >= 255.0 ? 255 : static_cast<uint8_t>(value);
  }
  return true;
}

// Output pixels [x_begin, x_end) of row y, one at a time, as Pillow's
// ImagingGenericTransform with affine_transform computes them.
void WarpFilteredRow(const RgbView& src, uint8_t* out, int y, int x_begin, int x_end,
                     const std::array<double, 6>& m, bool bicubic, const Fill& fill) {
  for (int x = x_begin; x < x_end; ++x) {
    const double xin = x + 0.5, yin = y + 0.5;
    const double sx = m[0] * xin + m[1] * yin + m[2];
    const double sy = m[3] * xin + m[4] * yin + m[5];
    if (!SampleFiltered(src, sx, sy, bicubic, out + x * 3)) {
      std::memcpy(out + x * 3, fill.data(), 3);
    }
  }
}

#ifdef GALLEY_WARP_HAS_AVX2_KERNELS

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// Eight output pixels' sampling positions: the lanes' source pixel indices
// (floor(s - 0.5), as int32) and fractions (s - 0.5 - floor, two halves of
// four doubles), and which lanes fall inside the source. Lanes outside get
// index 0 so that later clamping and loads stay in range.
struct Positions {
  __m256i index;
  __m256d fraction[2];
  __m256i inside;
};

[[gnu::target("avx2")]] inline Positions Locate(const __m256d s[2], double size) {
  const __m256d zero = _mm256_setzero_pd();
  const __m256d limit = _mm256_set1_pd(size);
  const __m256d half = _mm256_set1_pd(0.5);
  Positions p{};
  __m128i index[2];
  __m128i inside[2];
  for (int h = 0; h < 2; ++h) {
    // Ordered comparisons: NaN lanes are outside.
    const __m256d in = _mm256_and_pd(_mm256_cmp_pd(s[h], zero, _CMP_GE_OQ),
                                     _mm256_cmp_pd(s[h], limit, _CMP_LT_OQ));
    const __m256d shifted = _mm256_and_pd(_mm256_sub_pd(s[h], half), in);
    const __m256d floor = _mm256_floor_pd(shifted);
    p.fraction[h] = _mm256_sub_pd(shifted, floor);
    index[h] = _mm256_cvttpd_epi32(floor);
    // 64-bit lane masks to 32-bit ones: take the low halves.
    const __m256i in_bits = _mm256_castpd_si256(in);
    inside[h] = _mm256_castsi256_si128(
        _mm256_permutevar8x32_epi32(in_bits, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)));
  }
  p.index = _mm256_set_m128i(index[1], index[0]);
  p.inside = _mm256_set_m128i(inside[1], inside[0]);
  return p;
}

// Lanes 0-3 (h = 0) or 4-7 (h = 1) of int32 lanes, as doubles.
[[gnu::target("avx2")]] inline __m256d Half(__m256i v, int h) {
  return _mm256_cvtepi32_pd(h == 0 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1));
}

// Pillow's BICUBIC macro on integer samples v0..v3 (int32 lanes): its p1..p4
// are computed in int there too, then the polynomial in double, for both
// halves.
[[gnu::target("avx2")]] inline void CubicOfBytes(const __m256i v[4], const __m256d d[2],
                                                 __m256d out[2]) {
  const __m256i p1 = v[1];
  const __m256i p2 = _mm256_sub_epi32(v[2], v[0]);
  const __m256i diff = _mm256_sub_epi32(v[0], v[1]);
  const __m256i p3 = _mm256_sub_epi32(_mm256_add_epi32(_mm256_add_epi32(diff, diff), v[2]), v[3]);
  const __m256i p4 = _mm256_add_epi32(_mm256_sub_epi32(_mm256_sub_epi32(v[1], v[0]), v[2]), v[3]);
  for (int h = 0; h < 2; ++h) {
    __m256d r = _mm256_mul_pd(d[h], Half(p4, h));
    r = _mm256_mul_pd(d[h], _mm256_add_pd(Half(p3, h), r));
    r = _mm256_mul_pd(d[h], _mm256_add_pd(Half(p2, h), r));
    out[h] = _mm256_add_pd(Half(p1, h), r);
  }
}

// The same polynomial on double samples, in Pillow's order of operations:
// p2 = -v1 + v3, p3 = 2 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4.
[[gnu::target("avx2")]] inline __m256d CubicOfDoubles(__m256d v0, __m256d v1, __m256d v2,
                                                      __m256d v3, __m256d d) {
  const __m256d p2 = _mm256_sub_pd(v2, v0);  // -v0 + v2 rounds the same
  const __m256d two_diff = _mm256_add_pd(_mm256_sub_pd(v0, v1), _mm256_sub_pd(v0, v1));
  const __m256d p3 = _mm256_sub_pd(_mm256_add_pd(two_diff, v2), v3);
  const __m256d p4 = _mm256_add_pd(_mm256_sub_pd(_mm256_sub_pd(v1, v0), v2), v3);
  __m256d r = _mm256_mul_pd(d, p4);
  r = _mm256_mul_pd(d, _mm256_add_pd(p3, r));
  r = _mm256_mul_pd(d, _mm256_add_pd(p2, r));
  return _mm256_add_pd(v1, r);
}

// Truncates two halves of doubles (already within 0..255) to int32 lanes.
[[gnu::target("avx2")]] inline __m256i Truncate(const __m256d v[2]) {
  return _mm256_set_m128i(_mm256_cvttpd_epi32(v[1]), _mm256_cvttpd_epi32(v[0]));
}

// Which source axes a warp's samples move along. With a matrix row of
// (0, 1, whole number) every sample's vertical fraction is exactly 0, where
// Pillow's vertical polynomial returns its second sample unchanged
// (p1 + 0 * (...) = p1): the result is the horizontal filter on one source
// row (AutoAugment's ShearX). Likewise (1, 0, whole number) in the first
// row makes the horizontal fraction 0, so the horizontal filter returns the
// source pixel itself and only the vertical one remains (ShearY).
enum class WarpAxes { kBoth, kHorizontal, kVertical };

WarpAxes AxesOf(const std::array<double, 6>& m) {
  auto whole = [](double v) { return std::fabs(v) < (1 << 30) && v == std::trunc(v); };
  if (m[3] == 0.0 && m[4] == 1.0 && whole(m[5])) return WarpAxes::kHorizontal;
  if (m[0] == 1.0 && m[1] == 0.0 && whole(m[2])) return WarpAxes::kVertical;
  return WarpAxes::kBoth;
}

// Source offsets (row * stride + column * 3) of the filter's taps: `taps`
// consecutive indices from index + first, clamped to [0, max].
[[gnu::target("avx2")]] inline void Taps(__m256i index, int first, int taps, int max, int scale,
                                         __m256i* out) {
  for (int k = 0; k < taps; ++k) {
    const __m256i tap = _mm256_add_epi32(index, _mm256_set1_epi32(first + k));
    const __m256i clamped =
        _mm256_min_epi32(_mm256_max_epi32(tap, _mm256_setzero_si256()), _mm256_set1_epi32(max));
    out[k] = _mm256_mullo_epi32(clamped, _mm256_set1_epi32(scale));
  }
}

// One channel of the one-axis filter: taps[k] are the gathered pixels along
// the moving axis, d its fraction. Bicubic is clamped to 0..255 as Pillow
// does; bilinear stays inside by construction.
template <bool kBicubic>
[[gnu::target("avx2")]] inline __m256i FilterChannel(const __m256i* taps, int c,
                                                     const __m256d d[2]) {
  __m256d value[2];
  if constexpr (kBicubic) {
    const __m256i v[4] = {PixelChannel(taps[0], c), PixelChannel(taps[1], c),
                          PixelChannel(taps[2], c), PixelChannel(taps[3], c)};
    CubicOfBytes(v, d, value);
    for (__m256d& h : value) {
      h = _mm256_min_pd(_mm256_max_pd(h, _mm256_setzero_pd()), _mm256_set1_pd(255.0));
    }
  } else {
    // a + (b - a) * d, b - a in int as Pillow's UINT8 operands promote.
    const __m256i a = PixelChannel(taps[0], c);
    const __m256i delta = _mm256_sub_epi32(PixelChannel(taps[1], c), a);
    for (int h = 0; h < 2; ++h)
      value[h] = _mm256_add_pd(Half(a, h), _mm256_mul_pd(Half(delta, h), d[h]));
  }
  return Truncate(value);
}

// Row y of the warp with Pillow's bilinear or bicubic filter, eight pixels
// at a time; the last width % 8 pixels go through WarpFilteredRow. The
// caller checks that every source offset fits in int32 and that the matrix
// fits kAxes (AxesOf).
template <bool kBicubic, WarpAxes kAxes>
[[gnu::target("avx2")]] void WarpFilteredRowAvx2(const RgbView& src, uint8_t* out, int y, int width,
                                                 const std::array<double, 6>& m, const Fill& fill) {
  constexpr int kTaps = kBicubic ? 4 : 2;
  constexpr int kFirstTap = kBicubic ? -1 : 0;
  const int stride = static_cast<int>(src.stride);
  const LastPixel last = LastPixelOf(src);
  const __m256i all = _mm256_set1_epi32(-1);
  const __m256i fill_word = _mm256_set1_epi32(fill[0] | fill[1] << 8 | fill[2] << 16);
  const double yin = y + 0.5;
  // (m0 * xin + m1 * yin) + m2 as Pillow's affine_transform adds them;
  // m1 * yin is the same product for the whole row.
  const __m256d m0 = _mm256_set1_pd(m[0]), m3 = _mm256_set1_pd(m[3]);
  const __m256d row_x = _mm256_set1_pd(m[1] * yin), row_y = _mm256_set1_pd(m[4] * yin);
  const __m256d m2 = _mm256_set1_pd(m[2]), m5 = _mm256_set1_pd(m[5]);
  const __m256d lane_offsets[2] = {_mm256_setr_pd(0.5, 1.5, 2.5, 3.5),
                                   _mm256_setr_pd(4.5, 5.5, 6.5, 7.5)};
  int x = 0;
  for (; x + 8 <= width; x += 8) {
    __m256d sx[2], sy[2];
    for (int h = 0; h < 2; ++h) {
      const __m256d xin = _mm256_add_pd(_mm256_set1_pd(x), lane_offsets[h]);
      sx[h] = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(m0, xin), row_x), m2);
      sy[h] = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(m3, xin), row_y), m5);
    }
    const Positions px = Locate(sx, src.width);
    const Positions py = Locate(sy, src.height);
    const __m256i inside = _mm256_and_si256(px.inside, py.inside);
    if (_mm256_testz_si256(inside, inside)) {
      StorePixelLanes(fill_word, out + x * 3);
      continue;
    }
    __m256i result = _mm256_setzero_si256();
    if constexpr (kAxes == WarpAxes::kBoth) {
      __m256i columns[kTaps], rows[kTaps];
      Taps(px.index, kFirstTap, kTaps, src.width - 1, 3, columns);
      Taps(py.index, kFirstTap, kTaps, src.height - 1, stride, rows);
      __m256i pixels[kTaps][kTaps];  // [row][column]
      for (int r = 0; r < kTaps; ++r) {
        for (int k = 0; k < kTaps; ++k) {
          pixels[r][k] = GatherPixels(src.data, _mm256_add_epi32(rows[r], columns[k]), all, last);
        }
      }
      for (int c = 0; c < 3; ++c) {
        __m256d value[2];
        if constexpr (kBicubic) {
          __m256d row_values[4][2];
          for (int r = 0; r < 4; ++r) {
            const __m256i v[4] = {PixelChannel(pixels[r][0], c), PixelChannel(pixels[r][1], c),
                                  PixelChannel(pixels[r][2], c), PixelChannel(pixels[r][3], c)};
            CubicOfBytes(v, px.fraction, row_values[r]);
          }
          for (int h = 0; h < 2; ++h) {
            const __m256d v = CubicOfDoubles(row_values[0][h], row_values[1][h], row_values[2][h],
                                             row_values[3][h], py.fraction[h]);
            value[h] = _mm256_min_pd(_mm256_max_pd(v, _mm256_setzero_pd()), _mm256_set1_pd(255.0));
          }
        } else {
          // v = a + (b - a) * d per row (b - a in int, as Pillow's UINT8
          // operands promote), then between the rows.
          __m256i a[2], delta[2];
          for (int r = 0; r < 2; ++r) {
            a[r] = PixelChannel(pixels[r][0], c);
            delta[r] = _mm256_sub_epi32(PixelChannel(pixels[r][1], c), a[r]);
          }
          for (int h = 0; h < 2; ++h) {
            const __m256d v1 =
                _mm256_add_pd(Half(a[0], h), _mm256_mul_pd(Half(delta[0], h), px.fraction[h]));
            const __m256d v2 =
                _mm256_add_pd(Half(a[1], h), _mm256_mul_pd(Half(delta[1], h), px.fraction[h]));
            value[h] = _mm256_add_pd(v1, _mm256_mul_pd(_mm256_sub_pd(v2, v1), py.fraction[h]));
          }
        }
        result = _mm256_or_si256(result, _mm256_slli_epi32(Truncate(value), 8 * c));
      }
    } else {
      constexpr bool kHorizontal = kAxes == WarpAxes::kHorizontal;
      const Positions& moving = kHorizontal ? px : py;
      __m256i fixed, offsets[kTaps];
      if constexpr (kHorizontal) {
        Taps(py.index, 0, 1, src.height - 1, stride, &fixed);
        Taps(px.index, kFirstTap, kTaps, src.width - 1, 3, offsets);
      } else {
        Taps(px.index, 0, 1, src.width - 1, 3, &fixed);
        Taps(py.index, kFirstTap, kTaps, src.height - 1, stride, offsets);
      }
      __m256i pixels[kTaps];
      for (int k = 0; k < kTaps; ++k) {
        pixels[k] = GatherPixels(src.data, _mm256_add_epi32(fixed, offsets[k]), all, last);
      }
      for (int c = 0; c < 3; ++c) {
        const __m256i value = FilterChannel<kBicubic>(pixels, c, moving.fraction);
        result = _mm256_or_si256(result, _mm256_slli_epi32(value, 8 * c));
      }
    }
    StorePixelLanes(_mm256_blendv_epi8(fill_word, result, inside), out + x * 3);
  }
  WarpFilteredRow(src, out, y, x, width, m, kBicubic, fill);
}

template <bool kBicubic>
[[gnu::target("avx2")]] void WarpFilteredAvx2(const RgbView& src, const RgbSpan& dst,
                                              const std::array<double, 6>& m, const Fill& fill) {
  const WarpAxes axes = AxesOf(m);
  for (int y = 0; y < dst.height; ++y) {
    switch (axes) {
      case WarpAxes::kHorizontal:
        WarpFilteredRowAvx2<kBicubic, WarpAxes::kHorizontal>(src, dst.row(y), y, dst.width, m,
                                                             fill);
        break;
      case WarpAxes::kVertical:
        WarpFilteredRowAvx2<kBicubic, WarpAxes::kVertical>(src, dst.row(y), y, dst.width, m, fill);
        break;
      case WarpAxes::kBoth:
        WarpFilteredRowAvx2<kBicubic, WarpAxes::kBoth>(src, dst.row(y), y, dst.width, m, fill);
        break;
    }
  }
}

#endif  // GALLEY_WARP_HAS_AVX2_KERNELS

void WarpFiltered(const RgbView& src, const RgbSpan& dst, const std::array<double, 6>& m,
                  bool bicubic, const Fill& fill, bool allow_simd) {
#ifdef GALLEY_WARP_HAS_AVX2_KERNELS
  // Gathers take int32 offsets: the whole source must lie within 2 GiB.
  const int64_t extent = static_cast<int64_t>(src.height - 1) * src.stride + int64_t{src.width} * 3;
  if (allow_simd && CpuHasAvx2() && src.stride > 0 && extent < (int64_t{1} << 31)) {
    if (bicubic) {
      WarpFilteredAvx2<true>(src, dst, m, fill);
    } else {
      WarpFilteredAvx2<false>(src, dst, m, fill);
    }
    return;
  }
#else
  (void)allow_simd;
#endif
  for (int y = 0; y < dst.height; ++y)
    WarpFilteredRow(src, dst.row(y), y, 0, dst.width, m, bicubic, fill);
}

}  // namespace

void AffineWarp(const RgbView& src, const RgbSpan& dst, const std::array<double, 6>& matrix,
                WarpInterpolation interpolation, const Fill& fill, bool allow_simd) {
  int tx = 0, ty = 0;
  if (allow_simd && WholePixelShift(matrix, tx, ty)) {
    Shift(src, dst, tx, ty, fill);
    return;
  }
  if (interpolation == WarpInterpolation::kNearest) {
    WarpNearest(src, dst, matrix, fill);
    return;
  }
  WarpFiltered(src, dst, matrix, interpolation == WarpInterpolation::kBicubic, fill, allow_simd);
}

}  // namespace galley::image
