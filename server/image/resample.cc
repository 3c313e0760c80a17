#include "galley/image/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GALLEY_RESAMPLE_HAS_AVX2_KERNELS 1
#endif

namespace galley::image {
namespace {

// Weights are integers scaled by 2^22: a uint8 times the weights of one
// window then sums to at most 2^30, inside int32 (PIL's 8-bit precision).
constexpr int kPrecisionBits = 22;
constexpr int32_t kHalf = int32_t{1} << (kPrecisionBits - 1);

// The horizontal AVX2 kernel multiplies 16-bit halves of each weight, split
// at this bit, so that it can use multiply-add on 16-bit lanes and still
// compute the exact 22-bit sum.
constexpr int kLowWeightBits = 11;

// Taps the horizontal AVX2 kernel handles per step.
constexpr int kTapsPerGroup = 4;

double Support(ResampleFilter filter) {
  switch (filter) {
    case ResampleFilter::kBox:
      return 0.5;
    case ResampleFilter::kBicubic:
      return 2.0;
    case ResampleFilter::kLanczos:
      return 3.0;
    default:
      return 1.0;
  }
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

// PIL's filters, with their half-open edges (box and lanczos are not
// symmetric at the edge of their support).
double Kernel(ResampleFilter filter, double x) {
  if (filter == ResampleFilter::kBox) return x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
  if (filter == ResampleFilter::kLanczos) {
    return -3.0 <= x && x < 3.0 ? Sinc(x) * Sinc(x / 3.0) : 0.0;
  }
  x = std::fabs(x);
  if (filter == ResampleFilter::kBilinear) return x < 1.0 ? 1.0 - x : 0.0;
  if (filter == ResampleFilter::kHamming) {
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x *= M_PI;
    return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
  }
  // Keys' cubic convolution kernel with a = -0.5.
  constexpr double a = -0.5;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

uint8_t Clip8(int32_t sum) {
  return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255));
}

template <typename T>
T* Grow(std::vector<T>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// The coefficient windows of one axis for the output pixels of the window:
// output pixel i reads source pixels first[i] .. first[i] + count[i] - 1 with
// weights[i * stride ...], zero beyond count[i].
struct AxisPlan {
  int stride = 0;
  int max_count = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
  std::vector<double> exact;  // one window's weights before rounding
};

// The arithmetic follows PIL's: the output pixel centre maps to
// box0 + (x + 0.5) * scale; the kernel is stretched by the scale factor when
// shrinking; the window is the source pixels within the stretched support,
// clipped to the view; weights are normalised to sum 1 in double and then
// rounded half away from zero to fixed point. Equal steps give equal
// integers, hence PIL's exact output.
void PlanAxis(int in_size, double box0, double box1, int out_size, int window_start,
              int window_size, ResampleFilter filter, AxisPlan& plan) {
  const double scale = (box1 - box0) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = Support(filter) * filter_scale;
  const double inverse = 1.0 / filter_scale;
  plan.stride = static_cast<int>(std::ceil(support)) * 2 + 1;
  plan.max_count = 0;
  int* first = Grow(plan.first, window_size);
  int* count = Grow(plan.count, window_size);
  int32_t* weights = Grow(plan.weights, static_cast<size_t>(window_size) * plan.stride);
  double* exact = Grow(plan.exact, plan.stride);
  for (int i = 0; i < window_size; ++i) {
    const double center = box0 + (window_start + i + 0.5) * scale;
    // PIL's window bounds (precompute_coeffs in Resample.c), truncating
    // x + 0.5 as it does, so the windows match it bit for bit.
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    const int low = std::max(0, static_cast<int>(center - support + 0.5));
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    const int high = std::min(in_size, static_cast<int>(center + support + 0.5));
    const int n = std::clamp(high - low, 0, plan.stride);
    double total = 0;
    for (int k = 0; k < n; ++k) {
      exact[k] = Kernel(filter, (low + k - center + 0.5) * inverse);
      total += exact[k];
    }
    int32_t* w = weights + static_cast<size_t>(i) * plan.stride;
    for (int k = 0; k < plan.stride; ++k) {
      if (k >= n) {
        w[k] = 0;
        continue;
      }
      const double normalised = total != 0.0 ? exact[k] / total : exact[k];
      const double scaled = normalised * (1 << kPrecisionBits);
      w[k] = static_cast<int32_t>(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
    }
    first[i] = low;
    count[i] = n;
    plan.max_count = std::max(plan.max_count, n);
  }
}

// Per-thread buffers, grown to the largest request and reused.
struct Scratch {
  AxisPlan horizontal;
  AxisPlan vertical;
  std::vector<uint8_t> rows;           // horizontal pass output
  std::vector<uint8_t> tail;           // right end of a source row, zero padded
  std::vector<int16_t> split_weights;  // horizontal weights for the AVX2 kernel
};

// Row padding so that the AVX2 kernels may store and load whole vectors.
constexpr int kRowPadding = 32;

// ---------------------------------------------------------------------------
// Portable kernels.

void HorizontalPixels(const uint8_t* src, const AxisPlan& plan, int begin, int end, uint8_t* out) {
  for (int i = begin; i < end; ++i) {
    const uint8_t* p = src + static_cast<ptrdiff_t>(plan.first[i]) * 3;
    const int32_t* w = plan.weights.data() + static_cast<size_t>(i) * plan.stride;
    int32_t r = kHalf, g = kHalf, b = kHalf;
    for (int k = 0; k < plan.count[i]; ++k) {
      r += p[3 * k] * w[k];
      g += p[3 * k + 1] * w[k];
      b += p[3 * k + 2] * w[k];
    }
    out[3 * i] = Clip8(r);
    out[3 * i + 1] = Clip8(g);
    out[3 * i + 2] = Clip8(b);
  }
}

// base is the window's first row; writes bytes [begin, end) of the output row.
void VerticalBytes(const uint8_t* base, ptrdiff_t stride, const int32_t* w, int count, int begin,
                   int end, uint8_t* out) {
  for (int i = begin; i < end; ++i) {
    int32_t sum = kHalf;
    for (int k = 0; k < count; ++k) sum += base[k * stride + i] * w[k];
    out[i] = Clip8(sum);
  }
}

// ---------------------------------------------------------------------------
// AVX2 kernels: the same integer arithmetic, vectorised.

#ifdef GALLEY_RESAMPLE_HAS_AVX2_KERNELS

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// Lays out each group of four taps as two 256-bit vectors of 16-bit weights
// (high bits, low bits), matching the byte shuffle in HorizontalSums: lane 0
// holds taps 0 and 1 as (w0 w1) for each of R, G, B, lane 1 taps 2 and 3.
void SplitHorizontalWeights(const AxisPlan& plan, int window_size, int groups,
                            std::vector<int16_t>& split) {
  int16_t* out = Grow(split, static_cast<size_t>(window_size) * groups * 32);
  for (int i = 0; i < window_size; ++i) {
    const int32_t* w = plan.weights.data() + static_cast<size_t>(i) * plan.stride;
    for (int g = 0; g < groups; ++g) {
      int16_t* high = out + (static_cast<size_t>(i) * groups + g) * 32;
      int16_t* low = high + 16;
      for (int lane = 0; lane < 2; ++lane) {
        for (int j = 0; j < 2; ++j) {
          const int tap = g * kTapsPerGroup + lane * 2 + j;
          const int32_t weight = tap < plan.count[i] ? w[tap] : 0;
          const auto high_part = static_cast<int16_t>(weight >> kLowWeightBits);
          const auto low_part = static_cast<int16_t>(weight & ((1 << kLowWeightBits) - 1));
          for (int c = 0; c < 3; ++c) {
            high[lane * 8 + c * 2 + j] = high_part;
            low[lane * 8 + c * 2 + j] = low_part;
          }
        }
        for (int pad = 6; pad < 8; ++pad) high[lane * 8 + pad] = low[lane * 8 + pad] = 0;
      }
    }
  }
}

// [R, G, B, 0] of one output pixel, shifted back to the pixel range but not
// yet clipped. p points at the window's first pixel; reads 12 * groups + 4
// bytes from it.
// kGroups > 0 fixes the number of groups at compile time (the common
// cases: 1 up to a 2x shrink, 2 up to about 3.5x); 0 takes `groups`.
template <int kGroups>
[[gnu::target("avx2")]] inline __m128i HorizontalSums(const uint8_t* p, const int16_t* weights,
                                                      int groups) {
  const __m256i shuffle =
      _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                       6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
  if constexpr (kGroups > 0) groups = kGroups;
  __m256i high = _mm256_setzero_si256();
  __m256i low = _mm256_setzero_si256();
  for (int g = 0; g < groups; ++g) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 12 * g));
    const __m256i pairs = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(bytes), shuffle);
    const auto* w = reinterpret_cast<const __m256i*>(weights + g * 32);
    high = _mm256_add_epi32(high, _mm256_madd_epi16(pairs, _mm256_loadu_si256(w)));
    low = _mm256_add_epi32(low, _mm256_madd_epi16(pairs, _mm256_loadu_si256(w + 1)));
  }
  const __m256i sum = _mm256_add_epi32(_mm256_slli_epi32(high, kLowWeightBits), low);
  const __m128i both = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  return _mm_srai_epi32(_mm_add_epi32(both, _mm_set1_epi32(kHalf)), kPrecisionBits);
}

[[gnu::target("avx2")]] inline void StorePixel(__m128i sums, uint8_t* out) {
  const __m128i words = _mm_packs_epi32(sums, sums);
  const __m128i packed = _mm_packus_epi16(words, words);
  const uint32_t pixel = static_cast<uint32_t>(_mm_cvtsi128_si32(packed));
  std::memcpy(out, &pixel, 3);
}

// One source row through the horizontal pass. Output pixels before
// `safe_end` read inside the row; the rest read from a zero-padded copy of
// the row's right end, so no load passes the end of the caller's image.
template <int kGroups>
[[gnu::target("avx2")]] void HorizontalRowAvx2(const uint8_t* src, const AxisPlan& plan,
                                               const int16_t* split, int groups, int window_size,
                                               int safe_end, int in_width,
                                               std::vector<uint8_t>& tail, uint8_t* out) {
  const __m128i compact = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const size_t pixel_weights = static_cast<size_t>(groups) * 32;
  int i = 0;
  for (; i + 4 <= safe_end; i += 4) {
    __m128i s[4];
    for (int j = 0; j < 4; ++j) {
      s[j] = HorizontalSums<kGroups>(src + static_cast<ptrdiff_t>(plan.first[i + j]) * 3,
                                     split + (i + j) * pixel_weights, groups);
    }
    const __m128i bytes =
        _mm_packus_epi16(_mm_packs_epi32(s[0], s[1]), _mm_packs_epi32(s[2], s[3]));
    // 16 bytes stored, 12 meant: the rest is overwritten by the next pixels
    // or lands in the row padding.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 3 * i), _mm_shuffle_epi8(bytes, compact));
  }
  for (; i < safe_end; ++i) {
    StorePixel(HorizontalSums<kGroups>(src + static_cast<ptrdiff_t>(plan.first[i]) * 3,
                                       split + i * pixel_weights, groups),
               out + 3 * i);
  }
  if (i == window_size) return;
  const int tail_first = plan.first[i];
  const size_t copied = static_cast<size_t>(in_width - tail_first) * 3;
  const size_t needed = static_cast<size_t>(plan.first[window_size - 1] - tail_first) * 3 +
                        12 * static_cast<size_t>(groups) + 16;
  uint8_t* padded = Grow(tail, std::max(copied, needed));
  std::memcpy(padded, src + static_cast<ptrdiff_t>(tail_first) * 3, copied);
  std::memset(padded + copied, 0, std::max(copied, needed) - copied);
  for (; i < window_size; ++i) {
    StorePixel(
        HorizontalSums<kGroups>(padded + static_cast<ptrdiff_t>(plan.first[i] - tail_first) * 3,
                                split + i * pixel_weights, groups),
        out + 3 * i);
  }
}

// Bytes [0, width) of one output row; whole 16-byte blocks only, the caller
// finishes the rest. base is the window's first source row.
[[gnu::target("avx2")]] int VerticalBytesAvx2(const uint8_t* base, ptrdiff_t stride,
                                              const int32_t* w, int count, int width,
                                              uint8_t* out) {
  int i = 0;
  for (; i + 16 <= width; i += 16) {
    __m256i low = _mm256_set1_epi32(kHalf);
    __m256i high = low;
    const uint8_t* p = base + i;
    for (int k = 0; k < count; ++k, p += stride) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const __m256i weight = _mm256_set1_epi32(w[k]);
      low = _mm256_add_epi32(low, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(bytes), weight));
      high = _mm256_add_epi32(
          high, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)), weight));
    }
    low = _mm256_srai_epi32(low, kPrecisionBits);
    high = _mm256_srai_epi32(high, kPrecisionBits);
    // packs works per 128-bit lane; the permute restores byte order.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(low, high), 0xD8);
    const __m128i bytes =
        _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), bytes);
  }
  return i;
}

#endif  // GALLEY_RESAMPLE_HAS_AVX2_KERNELS

// ---------------------------------------------------------------------------

// Writes into caller-provided rows.
class StridedRows : public RgbRowSink {
 public:
  StridedRows(uint8_t* dst, ptrdiff_t stride) : dst_(dst), stride_(stride) {}
  uint8_t* Row(int y) override { return dst_ + y * stride_; }

 private:
  uint8_t* dst_;
  ptrdiff_t stride_;
};

Status Validate(const RgbView& source, const ResizeGeometry& g) {
  if (source.data == nullptr || source.width <= 0 || source.height <= 0 ||
      source.stride < static_cast<ptrdiff_t>(source.width) * 3) {
    return Status::InvalidArgument("resize source is not a well-formed RGB view");
  }
  if (g.out_width <= 0 || g.out_height <= 0) {
    return Status::InvalidArgument("resize output size must be positive");
  }
  if (!(g.box_x0 >= 0 && g.box_x0 < g.box_x1 && g.box_x1 <= source.width && g.box_y0 >= 0 &&
        g.box_y0 < g.box_y1 && g.box_y1 <= source.height)) {
    return Status::InvalidArgument("resize box must be non-empty and inside the source");
  }
  if (g.window_x < 0 || g.window_y < 0 || g.window_width <= 0 || g.window_height <= 0 ||
      g.window_x > g.out_width - g.window_width || g.window_y > g.out_height - g.window_height) {
    return Status::InvalidArgument("resize window must be non-empty and inside the output");
  }
  return Status::Ok();
}

// Whether an axis maps the view onto itself pixel for pixel, where the
// resampling weights would be exactly 1 and 0 and the pass can be skipped.
bool IsIdentity(int in_size, double box0, double box1, int out_size) {
  return out_size == in_size && box0 == 0.0 && box1 == static_cast<double>(in_size);
}

}  // namespace

ResizeGeometry ResizeGeometry::Whole(const RgbView& source, int out_width, int out_height) {
  ResizeGeometry g;
  g.box_x1 = source.width;
  g.box_y1 = source.height;
  g.out_width = g.window_width = out_width;
  g.out_height = g.window_height = out_height;
  return g;
}

Status ResizeAntialiased(const RgbView& source, const ResizeGeometry& g,
                         const ResampleOptions& options, RgbRowSink& sink) {
  GALLEY_RETURN_IF_ERROR(Validate(source, g));
  thread_local Scratch scratch;
  const int window_bytes = g.window_width * 3;
  const bool horizontal = !IsIdentity(source.width, g.box_x0, g.box_x1, g.out_width);
  const bool vertical = !IsIdentity(source.height, g.box_y0, g.box_y1, g.out_height);
#ifdef GALLEY_RESAMPLE_HAS_AVX2_KERNELS
  const bool simd = options.allow_simd && CpuHasAvx2();
#else
  const bool simd = false;
#endif

  // Which source rows feed the window, and where the vertical pass reads them.
  AxisPlan& rows_plan = scratch.vertical;
  int row_begin = g.window_y;
  int row_end = g.window_y + g.window_height;
  if (vertical) {
    PlanAxis(source.height, g.box_y0, g.box_y1, g.out_height, g.window_y, g.window_height,
             options.filter, rows_plan);
    row_begin = source.height;
    row_end = 0;
    for (int y = 0; y < g.window_height; ++y) {
      if (rows_plan.count[y] == 0) continue;
      row_begin = std::min(row_begin, rows_plan.first[y]);
      row_end = std::max(row_end, rows_plan.first[y] + rows_plan.count[y]);
    }
    row_begin = std::min(row_begin, row_end);
  }

  const uint8_t* rows = source.data + static_cast<ptrdiff_t>(g.window_x) * 3;
  ptrdiff_t rows_stride = source.stride;
  int rows_origin = 0;  // source row held by rows[0]
  if (horizontal) {
    AxisPlan& plan = scratch.horizontal;
    PlanAxis(source.width, g.box_x0, g.box_x1, g.out_width, g.window_x, g.window_width,
             options.filter, plan);
    rows_stride = window_bytes + kRowPadding;
    const int produced = vertical ? row_end - row_begin : 1;
    uint8_t* out = Grow(scratch.rows, static_cast<size_t>(std::max(produced, 1)) * rows_stride);
#ifdef GALLEY_RESAMPLE_HAS_AVX2_KERNELS
    const int groups = (plan.max_count + kTapsPerGroup - 1) / kTapsPerGroup;
    int safe_end = 0;
    if (simd) {
      SplitHorizontalWeights(plan, g.window_width, groups, scratch.split_weights);
      // The kernel reads 12 * groups + 4 bytes from the window's start.
      while (safe_end < g.window_width &&
             (static_cast<int64_t>(plan.first[safe_end]) * 3 + 12 * groups + 4 <=
              static_cast<int64_t>(source.width) * 3)) {
        ++safe_end;
      }
    }
#endif
    auto horizontal_row = [&](int source_row, uint8_t* dst) {
      const uint8_t* src = source.data + static_cast<ptrdiff_t>(source_row) * source.stride;
#ifdef GALLEY_RESAMPLE_HAS_AVX2_KERNELS
      if (simd) {
        auto* row = groups == 1   ? &HorizontalRowAvx2<1>
                    : groups == 2 ? &HorizontalRowAvx2<2>
                                  : &HorizontalRowAvx2<0>;
        row(src, plan, scratch.split_weights.data(), groups, g.window_width, safe_end, source.width,
            scratch.tail, dst);
        return;
      }
#endif
      HorizontalPixels(src, plan, 0, g.window_width, dst);
    };
    if (!vertical) {
      // One row at a time through a padded buffer, since the kernel may
      // store past the row's end.
      for (int y = 0; y < g.window_height; ++y) {
        horizontal_row(g.window_y + y, out);
        std::memcpy(sink.Row(y), out, window_bytes);
        sink.Done(y);
      }
      return Status::Ok();
    }
    for (int r = row_begin; r < row_end; ++r) {
      horizontal_row(r, out + static_cast<ptrdiff_t>(r - row_begin) * rows_stride);
    }
    rows = out;
    rows_origin = row_begin;
  }

  if (!vertical) {
    for (int y = 0; y < g.window_height; ++y) {
      std::memcpy(sink.Row(y), rows + static_cast<ptrdiff_t>(g.window_y + y) * rows_stride,
                  window_bytes);
      sink.Done(y);
    }
    return Status::Ok();
  }
  for (int y = 0; y < g.window_height; ++y) {
    const uint8_t* base =
        rows + static_cast<ptrdiff_t>(rows_plan.first[y] - rows_origin) * rows_stride;
    const int32_t* w = rows_plan.weights.data() + static_cast<size_t>(y) * rows_plan.stride;
    const int count = rows_plan.count[y];
    uint8_t* out = sink.Row(y);
    int done = 0;
#ifdef GALLEY_RESAMPLE_HAS_AVX2_KERNELS
    if (simd) done = VerticalBytesAvx2(base, rows_stride, w, count, window_bytes, out);
#endif
    VerticalBytes(base, rows_stride, w, count, done, window_bytes, out);
    sink.Done(y);
  }
  return Status::Ok();
}

Status ResizeAntialiased(const RgbView& source, const ResizeGeometry& geometry,
                         const ResampleOptions& options, uint8_t* dst, ptrdiff_t dst_stride) {
  StridedRows rows(dst, dst_stride);
  return ResizeAntialiased(source, geometry, options, rows);
}

}  // namespace galley::image
