#include "server/image/pixel_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace galley::image {
namespace {

// Pillow's ImagingBlend for one byte: in1 + alpha * (in2 - in1) in float,
// truncated; clamped only when alpha lies outside [0, 1].
inline uint8_t BlendByte(int in1, int in2, float alpha) {
  const float value = static_cast<float>(in1) + alpha * static_cast<float>(in2 - in1);
  if (alpha >= 0.0f && alpha <= 1.0f) return static_cast<uint8_t>(value);
  if (value <= 0.0f) return 0;
  if (value >= 255.0f) return 255;
  return static_cast<uint8_t>(value);
}

// Pillow's RGB -> L: ITU-R 601-2 in 16-bit fixed point, rounded.
inline uint8_t Luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

// Blends every byte of src against a degenerate image given per pixel by
// `degenerate(x, y, channel)`.
template <typename Degenerate>
void BlendWith(const RgbView& src, const RgbSpan& dst, double factor, Degenerate degenerate) {
  const float alpha = static_cast<float>(factor);
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    uint8_t* out = dst.row(y);
    for (int x = 0; x < src.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        out[x * 3 + c] = BlendByte(degenerate(in, x, y, c), in[x * 3 + c], alpha);
      }
    }
  }
}

// Applies a per-channel lookup table (Image.point).
void ApplyLut(const RgbView& src, const RgbSpan& dst,
              const std::array<std::array<uint8_t, 256>, 3>& lut) {
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    uint8_t* out = dst.row(y);
    for (int x = 0; x < src.width * 3; x += 3) {
      out[x] = lut[0][in[x]];
      out[x + 1] = lut[1][in[x + 1]];
      out[x + 2] = lut[2][in[x + 2]];
    }
  }
}

using Histograms = std::array<std::array<int64_t, 256>, 3>;

Histograms ChannelHistograms(const RgbView& src) {
  Histograms histograms{};
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    for (int x = 0; x < src.width * 3; x += 3) {
      ++histograms[0][in[x]];
      ++histograms[1][in[x + 1]];
      ++histograms[2][in[x + 2]];
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

// Pillow's FLOOR and COORD for coordinates.
inline int64_t FloorToInt(double v) { return static_cast<int64_t>(std::floor(v)); }
// Positions far outside (or NaN, from a degenerate matrix) read as outside.
inline int64_t Coord(double v) { return v >= 0.0 && v < 1e15 ? static_cast<int64_t>(v) : -1; }

void FillRow(uint8_t* out, int width, const Fill& fill) {
  for (int x = 0; x < width; ++x) std::memcpy(out + x * 3, fill.data(), 3);
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
// (xin, yin); false outside the image.
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

// A blend against a constant degenerate value is a function of the byte
// alone: one 256-entry table instead of a float multiply-add per byte.
static void BlendWithConstant(const RgbView& src, const RgbSpan& dst, double factor,
                              int degenerate) {
  const float alpha = static_cast<float>(factor);
  std::array<std::array<uint8_t, 256>, 3> lut{};
  for (int v = 0; v < 256; ++v) lut[0][v] = lut[1][v] = lut[2][v] = BlendByte(degenerate, v, alpha);
  ApplyLut(src, dst, lut);
}

void AdjustBrightness(const RgbView& src, const RgbSpan& dst, double factor) {
  BlendWithConstant(src, dst, factor, 0);
}

void AdjustContrast(const RgbView& src, const RgbSpan& dst, double factor) {
  // ImageEnhance.Contrast: the degenerate image is the mean luma, rounded.
  std::array<int64_t, 256> histogram{};
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    for (int x = 0; x < src.width; ++x) ++histogram[Luma(in + x * 3)];
  }
  double sum = 0.0;
  for (int i = 0; i < 256; ++i) sum += static_cast<double>(i) * histogram[i];
  const int mean = static_cast<int>(sum / (static_cast<double>(src.height) * src.width) + 0.5);
  BlendWithConstant(src, dst, factor, mean);
}

void AdjustSaturation(const RgbView& src, const RgbSpan& dst, double factor) {
  BlendWith(src, dst, factor, [](const uint8_t* row, int x, int, int) {
    return static_cast<int>(Luma(row + x * 3));
  });
}

void AdjustSharpness(const RgbView& src, const RgbSpan& dst, double factor) {
  // ImageEnhance.Sharpness: the degenerate image is ImageFilter.SMOOTH
  // (3x3, centre 5, others 1, divided by 13), with Pillow's float sums and
  // the border pixels left as they are.
  const float side = 1.0f / 13.0f;
  const float centre = 5.0f / 13.0f;
  auto smooth = [&](const uint8_t* row, int x, int y, int c) -> int {
    if (x == 0 || y == 0 || x == src.width - 1 || y == src.height - 1) return row[x * 3 + c];
    const uint8_t* above = src.row(y - 1);
    const uint8_t* below = src.row(y + 1);
    const int i = x * 3 + c;
    float ss = 0.5f;
    ss += static_cast<float>(below[i - 3]) * side + static_cast<float>(below[i]) * side +
          static_cast<float>(below[i + 3]) * side;
    ss += static_cast<float>(row[i - 3]) * side + static_cast<float>(row[i]) * centre +
          static_cast<float>(row[i + 3]) * side;
    ss += static_cast<float>(above[i - 3]) * side + static_cast<float>(above[i]) * side +
          static_cast<float>(above[i + 3]) * side;
    if (ss <= 0.0f) return 0;
    if (ss >= 255.0f) return 255;
    return static_cast<int>(static_cast<uint8_t>(ss));
  };
  BlendWith(src, dst, factor, smooth);
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

void Posterize(const RgbView& src, const RgbSpan& dst, int bits) {
  const auto mask = static_cast<uint8_t>(~((1 << (8 - std::clamp(bits, 0, 8))) - 1));
  std::array<std::array<uint8_t, 256>, 3> lut{};
  for (int v = 0; v < 256; ++v) lut[0][v] = lut[1][v] = lut[2][v] = static_cast<uint8_t>(v & mask);
  ApplyLut(src, dst, lut);
}

void Solarize(const RgbView& src, const RgbSpan& dst, double threshold) {
  std::array<std::array<uint8_t, 256>, 3> lut{};
  for (int v = 0; v < 256; ++v) {
    lut[0][v] = lut[1][v] = lut[2][v] = static_cast<uint8_t>(v < threshold ? v : 255 - v);
  }
  ApplyLut(src, dst, lut);
}

void AutoContrast(const RgbView& src, const RgbSpan& dst) {
  const Histograms histograms = ChannelHistograms(src);
  std::array<std::array<uint8_t, 256>, 3> lut{};
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
  ApplyLut(src, dst, lut);
}

void Equalize(const RgbView& src, const RgbSpan& dst) {
  const Histograms histograms = ChannelHistograms(src);
  std::array<std::array<uint8_t, 256>, 3> lut{};
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
  ApplyLut(src, dst, lut);
}

void Invert(const RgbView& src, const RgbSpan& dst) {
  std::array<std::array<uint8_t, 256>, 3> lut{};
  for (int v = 0; v < 256; ++v) lut[0][v] = lut[1][v] = lut[2][v] = static_cast<uint8_t>(255 - v);
  ApplyLut(src, dst, lut);
}

void VerticalFlip(const RgbView& src, const RgbSpan& dst) {
  for (int y = 0; y < src.height; ++y) {
    std::memcpy(dst.row(src.height - 1 - y), src.row(y), static_cast<size_t>(src.width) * 3);
  }
}

void AffineWarp(const RgbView& src, const RgbSpan& dst, const std::array<double, 6>& matrix,
                WarpInterpolation interpolation, const Fill& fill) {
  if (interpolation == WarpInterpolation::kNearest) {
    WarpNearest(src, dst, matrix, fill);
    return;
  }
  const bool bicubic = interpolation == WarpInterpolation::kBicubic;
  for (int y = 0; y < dst.height; ++y) {
    uint8_t* out = dst.row(y);
    for (int x = 0; x < dst.width; ++x) {
      const double xin = x + 0.5, yin = y + 0.5;
      const double sx = matrix[0] * xin + matrix[1] * yin + matrix[2];
      const double sy = matrix[3] * xin + matrix[4] * yin + matrix[5];
      if (!SampleFiltered(src, sx, sy, bicubic, out + x * 3)) {
        std::memcpy(out + x * 3, fill.data(), 3);
      }
    }
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
