#include "server/image/tensor_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "server/image/pixel_ops.h"

namespace galley::image {
namespace {

// clamp(0, 255) then .to(torch.uint8), which truncates.
inline uint8_t ClampTruncate(float value) {
  return static_cast<uint8_t>(std::min(std::max(value, 0.0f), 255.0f));
}

// torchvision's _blend(img1, img2, ratio): ratio * img1 + (1.0 - ratio) *
// img2 in float32, the ratio and its complement computed in double first.
// degenerate(y, i) is img2's byte i of row y, as a float.
template <typename Degenerate>
void Blend(const RgbView& src, const RgbSpan& dst, double ratio, Degenerate degenerate) {
  const float a = static_cast<float>(ratio);
  const float b = static_cast<float>(1.0 - ratio);
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    uint8_t* out = dst.row(y);
    for (int i = 0; i < src.width * 3; ++i) {
      out[i] = ClampTruncate(a * static_cast<float>(in[i]) + b * degenerate(y, i));
    }
  }
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

// _gen_affine_grid + grid_sample(align_corners=False, padding "zeros") +
// the fill's mask channel + round to nearest even, for one image.
template <typename Fma>
[[gnu::always_inline]] inline void WarpImpl(const RgbView& src, const RgbSpan& dst,
                                            const std::array<double, 6>& m, bool bilinear,
                                            const TensorFill& fill) {
  const int width = src.width, height = src.height;
  // theta (float32) transposed and divided by [0.5 w, 0.5 h]; the grid is
  // base (x, y, 1) times it, a matrix product whose kernel accumulates
  // x * r0 + y * r1 with one fused multiply-add, then adds r2.
  const auto half_w = static_cast<float>(0.5 * width);
  const auto half_h = static_cast<float>(0.5 * height);
  const float r00 = static_cast<float>(m[0]) / half_w, r10 = static_cast<float>(m[1]) / half_w;
  const float r20 = static_cast<float>(m[2]) / half_w;
  const float r01 = static_cast<float>(m[3]) / half_h, r11 = static_cast<float>(m[4]) / half_h;
  const float r21 = static_cast<float>(m[5]) / half_h;
  // linspace(-n / 2 + 0.5, n / 2 - 0.5, n): steps of exactly 1.
  const auto x_start = static_cast<float>(-width * 0.5 + 0.5);
  const auto y_start = static_cast<float>(-height * 0.5 + 0.5);
  // grid_sample's unnormalisation: (g + 1) * (size / 2) - 0.5, fused.
  const float scale_x = static_cast<float>(width) / 2, scale_y = static_cast<float>(height) / 2;
  constexpr float kFar = 1 << 30;
  for (int y = 0; y < dst.height; ++y) {
    uint8_t* out = dst.row(y);
    const float gy_base = y_start + static_cast<float>(y);
    for (int x = 0; x < dst.width; ++x) {
      const float gx_base = x_start + static_cast<float>(x);
      const float gx = Fma::Apply(gy_base, r10, gx_base * r00) + r20;
      const float gy = Fma::Apply(gy_base, r11, gx_base * r01) + r21;
      const float ix = Fma::Apply(gx + 1.0f, scale_x, -0.5f);
      const float iy = Fma::Apply(gy + 1.0f, scale_y, -0.5f);
      std::array<float, 3> value{};
      float mask = 0.0f;
      if (!(std::fabs(ix) < kFar && std::fabs(iy) < kFar)) {
        // Far outside (or NaN): every tap reads zero.
      } else if (!bilinear) {
        const int xi = static_cast<int>(std::nearbyint(ix));
        const int yi = static_cast<int>(std::nearbyint(iy));
        if (xi >= 0 && xi < width && yi >= 0 && yi < height) {
          const uint8_t* p = src.row(yi) + xi * 3;
          value = {static_cast<float>(p[0]), static_cast<float>(p[1]), static_cast<float>(p[2])};
          mask = 1.0f;
        }
      } else {
        const float x_w = std::floor(ix), y_n = std::floor(iy);
        const float w = ix - x_w, e = 1.0f - w, n = iy - y_n, s = 1.0f - n;
        const float weights[4] = {s * e, s * w, n * e, n * w};  // nw, ne, sw, se
        const int x0 = static_cast<int>(x_w), y0 = static_cast<int>(y_n);
        const uint8_t* taps[4] = {};
        for (int k = 0; k < 4; ++k) {
          const int tx = x0 + (k & 1), ty = y0 + (k >> 1);
          if (tx >= 0 && tx < width && ty >= 0 && ty < height) taps[k] = src.row(ty) + tx * 3;
        }
        // (nw_val * nw) + (ne_val * ne) + (sw_val * sw) + (se_val * se),
        // which the AVX2 kernel computes as a chain of fused multiply-adds;
        // the fill's mask channel is the same sum over ones.
        std::array<float, 4> in_image{};
        for (int k = 0; k < 4; ++k) in_image[k] = taps[k] != nullptr ? 1.0f : 0.0f;
        for (int c = 0; c < 3; ++c) {
          std::array<float, 4> v{};
          for (int k = 0; k < 4; ++k)
            v[k] = taps[k] != nullptr ? static_cast<float>(taps[k][c]) : 0.0f;
          float sum = v[0] * weights[0];
          for (int k = 1; k < 4; ++k) sum = Fma::Apply(v[k], weights[k], sum);
          value[c] = sum;
        }
        if (fill) {
          mask = in_image[0] * weights[0];
          for (int k = 1; k < 4; ++k) mask = Fma::Apply(in_image[k], weights[k], mask);
        }
      }
      for (int c = 0; c < 3; ++c) {
        float v = value[c];
        if (fill) {
          if (!bilinear) {
            if (mask < 0.5f) v = (*fill)[c];
          } else {
            v = v * mask + (1.0f - mask) * (*fill)[c];
          }
        }
        out[x * 3 + c] = static_cast<uint8_t>(std::min(std::max(std::nearbyint(v), 0.0f), 255.0f));
      }
    }
  }
}

[[gnu::target("avx2,fma")]] void WarpWithFma(const RgbView& src, const RgbSpan& dst,
                                             const std::array<double, 6>& m, bool bilinear,
                                             const TensorFill& fill) {
  WarpImpl<HardwareFma>(src, dst, m, bilinear, fill);
}

void WarpWithLibm(const RgbView& src, const RgbSpan& dst, const std::array<double, 6>& m,
                  bool bilinear, const TensorFill& fill) {
  WarpImpl<LibmFma>(src, dst, m, bilinear, fill);
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
  Blend(src, dst, factor, [](int, int) { return 0.0f; });
}

void TensorAdjustSaturation(const RgbView& src, const RgbSpan& dst, double factor) {
  Blend(src, dst, factor,
        [&](int y, int i) { return static_cast<float>(TensorGray(src.row(y) + (i / 3) * 3)); });
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
  Blend(src, dst, factor, [mean](int, int) { return mean; });
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
  Blend(src, dst, factor, [&](int y, int i) { return degenerate[row_bytes * y + i]; });
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
                      bool bilinear, const TensorFill& fill) {
  if (CpuHasAvx2Fma()) {
    WarpWithFma(src, dst, matrix, bilinear, fill);
  } else {
    WarpWithLibm(src, dst, matrix, bilinear, fill);
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
  for (int y = 0; y < height; ++y) {
    const uint8_t* in = src.row(y);
    for (size_t i = 0; i < row_bytes; ++i) {
      mix[row_bytes * y + i] = draw.original_weight * static_cast<float>(in[i]);
    }
  }
  for (int c = 0; c < draw.width; ++c) {
    RgbView current = src;
    for (int d = 0; d < draw.depths[c]; ++d) {
      const RgbSpan next = RgbSpan::Packed(chain[d % 2].data(), width, height);
      AugMixApplyStep(current, next, draw.steps[c][d], bilinear, fill);
      current = next;
    }
    const float weight = draw.weights[c];
    for (int y = 0; y < height; ++y) {
      const uint8_t* in = current.row(y);
      float* out = &mix[row_bytes * y];
      for (size_t i = 0; i < row_bytes; ++i) out[i] = out[i] + weight * static_cast<float>(in[i]);
    }
  }
  // .to(torch.uint8) truncates; the weights sum to 1 within rounding.
  for (int y = 0; y < height; ++y) {
    uint8_t* out = dst.row(y);
    for (size_t i = 0; i < row_bytes; ++i) {
      out[i] = static_cast<uint8_t>(std::min(mix[row_bytes * y + i], 255.0f));
    }
  }
}

}  // namespace galley::image
