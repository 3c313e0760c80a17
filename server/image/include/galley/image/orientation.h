// EXIF orientation: reading the tag from a JPEG and turning pixels upright.
//
// Cameras store pixels as the sensor saw them and record in EXIF tag 0x0112
// how to display them (1..8, see the EXIF 2.32 specification, section
// 4.6.5). galley applies the tag once, at decode time, so every later stage
// sees upright pixels. Stateless functions; safe from any thread.
#ifndef GALLEY_SERVER_IMAGE_ORIENTATION_H_
#define GALLEY_SERVER_IMAGE_ORIENTATION_H_

#include <cstdint>
#include <span>

#include "galley/image/decoder.h"

namespace galley::image {

// Returns the orientation 1..8 recorded in the JPEG's APP1 EXIF segment, or 1
// when there is none or the value is out of range (an unreadable tag must not
// make a readable image fail).
int ReadJpegOrientation(std::span<const uint8_t> jpeg);

// True for orientations 5..8, which swap width and height.
inline bool OrientationSwapsAxes(int orientation) { return orientation >= 5 && orientation <= 8; }

// Rewrites `image` so that it displays upright under `orientation`.
void ApplyOrientation(int orientation, RgbImage& image);

}  // namespace galley::image

#endif  // GALLEY_SERVER_IMAGE_ORIENTATION_H_
