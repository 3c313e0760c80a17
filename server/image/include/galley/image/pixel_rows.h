// Row kernels of the pixel ops (pixel_ops.h): Pillow's per-byte arithmetic
// on one row of interleaved RGB bytes at a time, with AVX2 versions that
// evaluate the same float expressions in the same order (no fused
// multiply-add), so both give the same bytes. The AVX2 versions run when
// the CPU has AVX2 and allow_simd is true; tests compare the two.
//
// Stateless; safe to call from any thread. Outputs must not alias inputs
// unless stated.
#ifndef GALLEY_SERVER_IMAGE_PIXEL_ROWS_H_
#define GALLEY_SERVER_IMAGE_PIXEL_ROWS_H_

#include <cstdint>

namespace galley::image {

// Pillow's ImagingBlend for one byte: in1 + alpha * (in2 - in1) in float,
// truncated; clamped only when alpha lies outside [0, 1] (inside, the value
// cannot leave 0..255).
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

// out[i] = BlendByte(degenerate[i], image[i], alpha) for i < count.
void BlendRow(const uint8_t* degenerate, const uint8_t* image, uint8_t* out, int count, float alpha,
              bool allow_simd);

// The luma of each of `width` pixels, written three times (R, G, B), as
// convert("L") then back to RGB gives.
void LumaRow(const uint8_t* rgb, int width, uint8_t* out);

// ImageFilter.SMOOTH (3x3: centre 5, the others 1, over 13) of bytes
// [3, 3 * width - 3) of row `row`, with rows `above` and `below` around it,
// in Pillow's float order; the first and last pixel are copied, as Pillow
// leaves the border.
void SmoothRow(const uint8_t* above, const uint8_t* row, const uint8_t* below, int width,
               uint8_t* out, bool allow_simd);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_PIXEL_ROWS_H_
