// Pixel ops: torchvision 0.14's functional image ops on PIL images, with
// explicit parameters, on interleaved RGB uint8 images (docs/transforms.md).
//
// Each op computes what torchvision's functional computes on a PIL image
// (which is Pillow 9's arithmetic): colour adjustments as ImageEnhance's
// blends, HSV as Pillow's conversion, AutoAugment's ops as ImageOps, affine
// warps and rotations as Image.transform / Image.rotate. GaussianBlur follows
// torchvision's tensor kernel, which torchvision uses for PIL images too.
// The random draws live in the sample's plan (sample_plan.h), which
// plan_runner.cc dispatches here; tests call these with forced parameters
// and compare them with torchvision on the same pixels.
//
// All functions read `src` (interleaved RGB) and write `dst`, which the caller
// allocates (same size unless stated) and which must not alias `src`.
// Stateless; safe to call from any thread.
#ifndef GALLEY_SERVER_IMAGE_PIXEL_OPS_H_
#define GALLEY_SERVER_IMAGE_PIXEL_OPS_H_

#include <array>
#include <cstdint>

#include "galley/image/affine_warp.h"
#include "galley/image/rgb_span.h"

namespace galley::image {

// Python's math.radians / math.degrees, rounding as they do.
double Radians(double degrees);
double Degrees(double radians);

// ImageEnhance.Brightness / Contrast / Color (saturation) / Sharpness:
// Image.blend(degenerate, image, factor) with Pillow's float arithmetic.
void AdjustBrightness(const RgbView& src, const RgbSpan& dst, double factor);
void AdjustContrast(const RgbView& src, const RgbSpan& dst, double factor);
// allow_simd false forces the portable code (pixel_rows.h), which gives the
// same bytes.
void AdjustSaturation(const RgbView& src, const RgbSpan& dst, double factor,
                      bool allow_simd = true);
void AdjustSharpness(const RgbView& src, const RgbSpan& dst, double factor, bool allow_simd = true);
// torchvision's adjust_hue: Pillow's RGB -> HSV, hue += uint8(factor * 255)
// modulo 256, HSV -> RGB. factor in [-0.5, 0.5].
void AdjustHue(const RgbView& src, const RgbSpan& dst, double factor);
// convert("L") (ITU-R 601-2 luma in 16-bit fixed point) copied to all three
// channels, as Grayscale(num_output_channels=3) gives.
void ToGrayscale(const RgbView& src, const RgbSpan& dst);

// A lookup table per channel (Image.point): what brightness, contrast and
// ImageOps' posterize, solarize, autocontrast, equalize and invert compute.
// The *Lut functions return the table an op applies (ContrastLut,
// AutoContrastLut and EqualizeLut derive it from src's histogram), so a
// pipeline can fold it into a later write instead of a pass of its own.
using ChannelLut = std::array<std::array<uint8_t, 256>, 3>;
void ApplyLut(const RgbView& src, const RgbSpan& dst, const ChannelLut& lut);
ChannelLut BrightnessLut(double factor);
ChannelLut ContrastLut(const RgbView& src, double factor);
ChannelLut PosterizeLut(int bits);
ChannelLut SolarizeLut(double threshold);
ChannelLut AutoContrastLut(const RgbView& src);
ChannelLut EqualizeLut(const RgbView& src);
ChannelLut InvertLut();

// ImageOps.posterize / solarize / autocontrast / equalize / invert.
void Posterize(const RgbView& src, const RgbSpan& dst, int bits);
void Solarize(const RgbView& src, const RgbSpan& dst, double threshold);
void AutoContrast(const RgbView& src, const RgbSpan& dst);
void Equalize(const RgbView& src, const RgbSpan& dst);
void Invert(const RgbView& src, const RgbSpan& dst);
void VerticalFlip(const RgbView& src, const RgbSpan& dst);

// torchvision's pad is PadPixels (rgb_span.h): its modes are torchvision's.

// Image.transform(size, AFFINE, ...) is AffineWarp (affine_warp.h).

// torchvision's _get_inverse_affine_matrix (the matrix AffineWarp takes) for
// F.affine: rotation `angle` degrees counter-clockwise about `center`,
// translation, scale and shear (degrees, x then y).
std::array<double, 6> InverseAffineMatrix(double center_x, double center_y, double angle,
                                          double translate_x, double translate_y, double scale,
                                          double shear_x, double shear_y);

// F.affine on a PIL image: the centre is the image centre, (w/2, h/2),
// unless center_at_origin (AutoAugment's shears use [0, 0]).
void Affine(const RgbView& src, const RgbSpan& dst, double angle, double translate_x,
            double translate_y, double scale, double shear_x, double shear_y,
            WarpInterpolation interpolation, const Fill& fill, bool center_at_origin = false);

// Image.rotate(angle, resample, expand=False, fillcolor): counter-clockwise
// about the centre, with Pillow's exact cases for multiples of 90 degrees.
void Rotate(const RgbView& src, const RgbSpan& dst, double angle, WarpInterpolation interpolation,
            const Fill& fill);

// torchvision's gaussian_blur: a normalised float32 Gaussian of
// kernel_width x kernel_height, reflect padding, rounded to uint8. galley
// sums in double, separably; torchvision's float32 2-D convolution rounds
// differently, so a value that lands on .5 may differ by one level.
void GaussianBlur(const RgbView& src, const RgbSpan& dst, int kernel_width, int kernel_height,
                  double sigma_x, double sigma_y);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_PIXEL_OPS_H_
