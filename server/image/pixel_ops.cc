#include "galley/image/pixel_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "galley/image/pixel_rows.h"

namespace galley::image {
namespace {

using Histograms = std::array<std::array<int64_t, 256>, 3>;

Histograms ChannelHistograms(const RgbView& src) {
  // Four partial histograms per channel: neighbouring pixels often share a
  // value, and one counter incremented back to back waits on its own store.
  std::array<std::array<std::array<int32_t, 256>, 3>, 4> partial{};
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    int x = 0;
    for (; x + 4 <= src.width; x += 4, in += 12) {
      for (int k = 0; k < 4; ++k) {
        ++partial[k][0][in[3 * k]];
        ++partial[k][1][in[3 * k + 1]];
        ++partial[k][2][in[3 * k + 2]];
      }
    }
    for (; x < src.width; ++x, in += 3) {
      for (int c = 0; c < 3; ++c) ++partial[0][c][in[c]];
    }
  }
  Histograms histograms{};
  for (const auto& part : partial) {
    for (int c = 0; c < 3; ++c) {
      for (int v = 0; v < 256; ++v) histograms[c][v] += part[c][v];
    }
  }
  return histograms;
}

// Tables that give Pillow's HSV arithmetic bit for bit without a division
// or libm call per pixel: float quotients a / b of bytes, and per hue and
// saturation byte the float terms hsv2rgb derives from them.
struct HsvTables {
  std::vector<float> quotient;          // [a * 256 + b] = float(a) / float(b), b > 0
  std::array<int, 256> sector{};        // floor(h * 6 / 255)
  std::array<float, 256> fraction{};    // h * 6 / 255 - sector, as float
  std::array<float, 256> saturation{};  // s / 255, as float

  HsvTables() : quotient(256 * 256) {
    for (int a = 0; a < 256; ++a) {
      for (int b = 1; b < 256; ++b)
        quotient[a * 256 + b] = static_cast<float>(a) / static_cast<float>(b);
    }
    for (int v = 0; v < 256; ++v) {
      sector[v] = static_cast<int>(std::floor(static_cast<float>(v) * 6.0 / 255.0));
      fraction[v] =
          static_cast<float>(static_cast<float>(v) * 6.0 / 255.0 - static_cast<float>(sector[v]));
      saturation[v] = static_cast<float>(static_cast<float>(v) / 255.0);
    }
  }
};

const HsvTables& Hsv() {
  static const HsvTables tables;
  return tables;
}

// C's round() for a non-negative double, without a libm call: halves away
// from zero (x - trunc(x) is exact at these magnitudes).
inline int RoundNonNegative(double x) {
  const int t = static_cast<int>(x);
  return x - t >= 0.5 ? t + 1 : t;
}

void RgbToHsv(const uint8_t* rgb, uint8_t* hsv, const HsvTables& tables) {
  // Pillow's rgb2hsv_row: float variables, double constants.
  const uint8_t r = rgb[0], g = rgb[1], b = rgb[2];
  const uint8_t maxc = std::max(r, std::max(g, b));
  const uint8_t minc = std::min(r, std::min(g, b));
  hsv[2] = maxc;
  if (minc == maxc) {
    hsv[0] = hsv[1] = 0;
    return;
  }
  const int cr = maxc - minc;
  auto quotient = [&](int a, int d) { return tables.quotient[a * 256 + d]; };
  const float s = quotient(cr, maxc);
  float h;
  if (r == maxc) {
    h = quotient(maxc - b, cr) - quotient(maxc - g, cr);
  } else if (g == maxc) {
    h = static_cast<float>(2.0 + quotient(maxc - r, cr) - quotient(maxc - b, cr));
  } else {
    h = static_cast<float>(4.0 + quotient(maxc - g, cr) - quotient(maxc - r, cr));
  }
  // fmod(h / 6 + 1, 1) for h / 6 + 1 in [0, 2): subtract 1 at most once.
  double wrapped = h / 6.0 + 1.0;
  if (wrapped >= 1.0) wrapped -= 1.0;
  h = static_cast<float>(wrapped);
  hsv[0] = static_cast<uint8_t>(std::clamp(static_cast<int>(h * 255.0), 0, 255));
  hsv[1] = static_cast<uint8_t>(std::clamp(static_cast<int>(s * 255.0), 0, 255));
}

void HsvToRgb(const uint8_t* hsv, uint8_t* rgb, const HsvTables& tables) {
  // Pillow's hsv2rgb.
  const uint8_t h = hsv[0], s = hsv[1], v = hsv[2];
  if (s == 0) {
    rgb[0] = rgb[1] = rgb[2] = v;
    return;
  }
  const int i = tables.sector[h];
  const float f = tables.fraction[h];
  const float fs = tables.saturation[s];
  auto clip = [](double value) {
    return static_cast<uint8_t>(std::min(RoundNonNegative(value), 255));
  };
  const uint8_t p = clip(static_cast<float>(v) * (1.0 - fs));
  const uint8_t q = clip(static_cast<float>(v) * (1.0 - fs * f));
  const uint8_t t = clip(static_cast<float>(v) * (1.0 - fs * (1.0 - f)));
  switch (i % 6) {
    case 0:
      rgb[0] = v, rgb[1] = t, rgb[2] = p;
      break;
    case 1:
      rgb[0] = q, rgb[1] = v, rgb[2] = p;
      break;
    case 2:
      rgb[0] = p, rgb[1] = v, rgb[2] = t;
      break;
    case 3:
      rgb[0] = p, rgb[1] = q, rgb[2] = v;
      break;
    case 4:
      rgb[0] = t, rgb[1] = p, rgb[2] = v;
      break;
    default:
      rgb[0] = v, rgb[1] = p, rgb[2] = q;
      break;
  }
}

// Python's round(value, 15), which Image.rotate applies to its matrix: the
// correctly rounded decimal, read back as the nearest double.
double RoundTo15Places(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.15f", value);
  return std::strtod(text, nullptr);
}

}  // namespace

double Radians(double degrees) { return degrees * (M_PI / 180.0); }
double Degrees(double radians) { return radians * (180.0 / M_PI); }

void ApplyLut(const RgbView& src, const RgbSpan& dst, const ChannelLut& table) {
  // A local copy: the compiler then knows the stores to dst cannot change it.
  const ChannelLut lut = table;
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    uint8_t* out = dst.row(y);
    for (int x = 0; x < src.width * 3; x += 3) {
      const uint8_t r = lut[0][in[x]], g = lut[1][in[x + 1]], b = lut[2][in[x + 2]];
      out[x] = r;
      out[x + 1] = g;
      out[x + 2] = b;
    }
  }
}

namespace {

ChannelLut SameForEveryChannel(const std::array<uint8_t, 256>& table) {
  return {table, table, table};
}

// A blend against a constant degenerate value is a function of the byte
// alone: one 256-entry table instead of a float multiply-add per byte.
ChannelLut BlendWithConstantLut(double factor, int degenerate) {
  const float alpha = static_cast<float>(factor);
  std::array<uint8_t, 256> table{};
  for (int v = 0; v < 256; ++v) table[v] = BlendByte(degenerate, v, alpha);
  return SameForEveryChannel(table);
}

}  // namespace

ChannelLut BrightnessLut(double factor) { return BlendWithConstantLut(factor, 0); }

ChannelLut ContrastLut(const RgbView& src, double factor) {
  // ImageEnhance.Contrast: the degenerate image is the mean luma, rounded.
  std::array<std::array<int32_t, 256>, 2> histogram{};
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    for (int x = 0; x < src.width; ++x) ++histogram[x & 1][Luma(in + x * 3)];
  }
  double sum = 0.0;
  for (int i = 0; i < 256; ++i) sum += static_cast<double>(i) * (histogram[0][i] + histogram[1][i]);
  // PIL's ImageEnhance.Contrast: int(mean + 0.5) of a non-negative mean.
  // NOLINTNEXTLINE(bugprone-incorrect-roundings)
  const int mean = static_cast<int>(sum / (static_cast<double>(src.height) * src.width) + 0.5);
  return BlendWithConstantLut(factor, mean);
}

void AdjustBrightness(const RgbView& src, const RgbSpan& dst, double factor) {
  ApplyLut(src, dst, BrightnessLut(factor));
}

void AdjustContrast(const RgbView& src, const RgbSpan& dst, double factor) {
  ApplyLut(src, dst, ContrastLut(src, factor));
}

void AdjustSaturation(const RgbView& src, const RgbSpan& dst, double factor, bool allow_simd) {
  // ImageEnhance.Color: the degenerate image is the luma image.
  std::vector<uint8_t> degenerate(static_cast<size_t>(src.width) * 3);
  for (int y = 0; y < src.height; ++y) {
    LumaRow(src.row(y), src.width, degenerate.data());
    BlendRow(degenerate.data(), src.row(y), dst.row(y), src.width * 3, static_cast<float>(factor),
             allow_simd);
  }
}

void AdjustSharpness(const RgbView& src, const RgbSpan& dst, double factor, bool allow_simd) {
  // ImageEnhance.Sharpness: the degenerate image is ImageFilter.SMOOTH with
  // the border pixels left as they are (blending a byte with itself gives
  // it back, so border rows are copies).
  std::vector<uint8_t> degenerate(static_cast<size_t>(src.width) * 3);
  for (int y = 0; y < src.height; ++y) {
    if (y == 0 || y == src.height - 1) {
      std::memcpy(dst.row(y), src.row(y), static_cast<size_t>(src.width) * 3);
      continue;
    }
    SmoothRow(src.row(y - 1), src.row(y), src.row(y + 1), src.width, degenerate.data(), allow_simd);
    BlendRow(degenerate.data(), src.row(y), dst.row(y), src.width * 3, static_cast<float>(factor),
             allow_simd);
  }
}

void AdjustHue(const RgbView& src, const RgbSpan& dst, double factor) {
  // numpy's uint8 cast of hue_factor * 255 truncates toward zero and wraps.
  const auto shift = static_cast<uint8_t>(static_cast<int>(factor * 255.0));
  const HsvTables& tables = Hsv();
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    uint8_t* out = dst.row(y);
    for (int x = 0; x < src.width * 3; x += 3) {
      uint8_t hsv[3];
      RgbToHsv(in + x, hsv, tables);
      hsv[0] = static_cast<uint8_t>(hsv[0] + shift);
      HsvToRgb(hsv, out + x, tables);
    }
  }
}

void ToGrayscale(const RgbView& src, const RgbSpan& dst) {
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    uint8_t* out = dst.row(y);
    for (int x = 0; x < src.width * 3; x += 3) out[x] = out[x + 1] = out[x + 2] = Luma(in + x);
  }
}

ChannelLut PosterizeLut(int bits) {
  const auto mask = static_cast<uint8_t>(~((1 << (8 - std::clamp(bits, 0, 8))) - 1));
  std::array<uint8_t, 256> table{};
  for (int v = 0; v < 256; ++v) table[v] = static_cast<uint8_t>(v & mask);
  return SameForEveryChannel(table);
}

ChannelLut SolarizeLut(double threshold) {
  std::array<uint8_t, 256> table{};
  for (int v = 0; v < 256; ++v) table[v] = static_cast<uint8_t>(v < threshold ? v : 255 - v);
  return SameForEveryChannel(table);
}

ChannelLut AutoContrastLut(const RgbView& src) {
  const Histograms histograms = ChannelHistograms(src);
  ChannelLut lut{};
  for (int c = 0; c < 3; ++c) {
    int lo = 0, hi = 255;
    while (lo < 255 && histograms[c][lo] == 0) ++lo;
    while (hi > 0 && histograms[c][hi] == 0) --hi;
    for (int v = 0; v < 256; ++v) {
      if (hi <= lo) {
        lut[c][v] = static_cast<uint8_t>(v);
        continue;
      }
      const double scale = 255.0 / (hi - lo);
      const double offset = -lo * scale;
      lut[c][v] = static_cast<uint8_t>(std::clamp(static_cast<int>(v * scale + offset), 0, 255));
    }
  }
  return lut;
}

ChannelLut EqualizeLut(const RgbView& src) {
  const Histograms histograms = ChannelHistograms(src);
  ChannelLut lut{};
  for (int c = 0; c < 3; ++c) {
    const auto& h = histograms[c];
    int64_t total = 0, last = 0, nonzero = 0;
    for (int v = 0; v < 256; ++v) {
      if (h[v] == 0) continue;
      total += h[v];
      last = h[v];
      ++nonzero;
    }
    const int64_t step = nonzero <= 1 ? 0 : (total - last) / 255;
    int64_t n = step / 2;
    for (int v = 0; v < 256; ++v) {
      if (step == 0) {
        lut[c][v] = static_cast<uint8_t>(v);
        continue;
      }
      lut[c][v] = static_cast<uint8_t>(std::min<int64_t>(n / step, 255));
      n += h[v];
    }
  }
  return lut;
}

ChannelLut InvertLut() {
  std::array<uint8_t, 256> table{};
  for (int v = 0; v < 256; ++v) table[v] = static_cast<uint8_t>(255 - v);
  return SameForEveryChannel(table);
}

void Posterize(const RgbView& src, const RgbSpan& dst, int bits) {
  ApplyLut(src, dst, PosterizeLut(bits));
}
void Solarize(const RgbView& src, const RgbSpan& dst, double threshold) {
  ApplyLut(src, dst, SolarizeLut(threshold));
}
void AutoContrast(const RgbView& src, const RgbSpan& dst) {
  ApplyLut(src, dst, AutoContrastLut(src));
}
void Equalize(const RgbView& src, const RgbSpan& dst) { ApplyLut(src, dst, EqualizeLut(src)); }
void Invert(const RgbView& src, const RgbSpan& dst) { ApplyLut(src, dst, InvertLut()); }

void VerticalFlip(const RgbView& src, const RgbSpan& dst) {
  for (int y = 0; y < src.height; ++y) {
    std::memcpy(dst.row(src.height - 1 - y), src.row(y), static_cast<size_t>(src.width) * 3);
  }
}

std::array<double, 6> InverseAffineMatrix(double center_x, double center_y, double angle,
                                          double translate_x, double translate_y, double scale,
                                          double shear_x, double shear_y) {
  // torchvision: M = T * C * RotateScaleShear * C^-1, inverted in closed form.
  const double rot = Radians(angle);
  const double sx = Radians(shear_x);
  const double sy = Radians(shear_y);
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m = {d, -b, 0.0, -c, a, 0.0};
  for (double& v : m) v /= scale;
  m[2] += m[0] * (-center_x - translate_x) + m[1] * (-center_y - translate_y);
  m[5] += m[3] * (-center_x - translate_x) + m[4] * (-center_y - translate_y);
  m[2] += center_x;
  m[5] += center_y;
  return m;
}

void Affine(const RgbView& src, const RgbSpan& dst, double angle, double translate_x,
            double translate_y, double scale, double shear_x, double shear_y,
            WarpInterpolation interpolation, const Fill& fill, bool center_at_origin) {
  const double cx = center_at_origin ? 0.0 : src.width * 0.5;
  const double cy = center_at_origin ? 0.0 : src.height * 0.5;
  AffineWarp(src, dst,
             InverseAffineMatrix(cx, cy, angle, translate_x, translate_y, scale, shear_x, shear_y),
             interpolation, fill);
}

void Rotate(const RgbView& src, const RgbSpan& dst, double angle, WarpInterpolation interpolation,
            const Fill& fill) {
  // Python's %: the result has the sign of the divisor.
  angle = std::fmod(angle, 360.0);
  if (angle < 0) angle += 360.0;
  if (angle == 0) {
    CopyPixels(src, dst);
    return;
  }
  if (angle == 180) {
    ReorientPixels(src, dst, 3);
    return;
  }
  if ((angle == 90 || angle == 270) && src.width == src.height) {
    // Counter-clockwise is EXIF orientation 8's turn, clockwise 6's.
    ReorientPixels(src, dst, angle == 90 ? 8 : 6);
    return;
  }
  const double radians = -Radians(angle);
  std::array<double, 6> m = {
      RoundTo15Places(std::cos(radians)),  RoundTo15Places(std::sin(radians)), 0.0,
      RoundTo15Places(-std::sin(radians)), RoundTo15Places(std::cos(radians)), 0.0};
  const double cx = src.width / 2.0, cy = src.height / 2.0;
  m[2] = m[0] * -cx + m[1] * -cy + m[2];
  m[5] = m[3] * -cx + m[4] * -cy + m[5];
  m[2] += cx;
  m[5] += cy;
  AffineWarp(src, dst, m, interpolation, fill);
}

void GaussianBlur(const RgbView& src, const RgbSpan& dst, int kernel_width, int kernel_height,
                  double sigma_x, double sigma_y) {
  // torchvision's _get_gaussian_kernel1d, in float32 as it computes it.
  auto kernel1d = [](int size, double sigma) {
    std::vector<float> kernel(size);
    const float half = static_cast<float>((size - 1) * 0.5);
    const float step = size > 1 ? (2 * half) / static_cast<float>(size - 1) : 0.0f;
    float sum = 0.0f;
    for (int i = 0; i < size; ++i) {
      const float x = i < size / 2 ? -half + step * i : half - step * (size - 1 - i);
      const float r = x / static_cast<float>(sigma);
      kernel[i] = std::exp(-0.5f * (r * r));
      sum += kernel[i];
    }
    for (float& k : kernel) k /= sum;
    return kernel;
  };
  const std::vector<float> kx = kernel1d(kernel_width, sigma_x);
  const std::vector<float> ky = kernel1d(kernel_height, sigma_y);
  // Reflect padding (no edge repeat), then a separable pass in double.
  const int pad_x = kernel_width / 2, pad_y = kernel_height / 2;
  std::vector<uint8_t> padded_pixels(static_cast<size_t>(src.width + 2 * pad_x) *
                                     (src.height + 2 * pad_y) * 3);
  const RgbSpan padded =
      RgbSpan::Packed(padded_pixels.data(), src.width + 2 * pad_x, src.height + 2 * pad_y);
  PadPixels(src, padded, pad_x, pad_y, PadMode::kReflect, Fill{});
  const int width = src.width, height = src.height;
  std::vector<double> rows(static_cast<size_t>(padded.height) * width * 3);
  for (int y = 0; y < padded.height; ++y) {
    const uint8_t* in = padded.row(y);
    double* out = &rows[static_cast<size_t>(y) * width * 3];
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        double sum = 0.0;
        for (int k = 0; k < kernel_width; ++k)
          sum += static_cast<double>(kx[k]) * in[(x + k) * 3 + c];
        out[x * 3 + c] = sum;
      }
    }
  }
  for (int y = 0; y < height; ++y) {
    uint8_t* out = dst.row(y);
    for (int i = 0; i < width * 3; ++i) {
      double sum = 0.0;
      for (int k = 0; k < kernel_height; ++k) {
        sum += static_cast<double>(ky[k]) * rows[static_cast<size_t>(y + k) * width * 3 + i];
      }
      // torch.round: halves to even.
      out[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(sum), 0.0, 255.0));
    }
  }
}

}  // namespace galley::image
