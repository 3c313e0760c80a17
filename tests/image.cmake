# Image decoding and transform tests. The decoder tests read image fixtures
# generated at build time by tests/fixtures/make_fixtures.py (PIL + numpy).
set(GALLEY_IMAGE_FIXTURE_DIR ${CMAKE_CURRENT_BINARY_DIR}/image_fixtures)
add_custom_command(
  OUTPUT ${GALLEY_IMAGE_FIXTURE_DIR}/stamp
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/make_fixtures.py
          ${GALLEY_IMAGE_FIXTURE_DIR}
  COMMAND ${CMAKE_COMMAND} -E touch ${GALLEY_IMAGE_FIXTURE_DIR}/stamp
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/make_fixtures.py
  COMMENT "Generating image test fixtures")
add_custom_target(galley_image_fixtures DEPENDS ${GALLEY_IMAGE_FIXTURE_DIR}/stamp)

galley_add_test(image_decoder_test
  SOURCES unit/image_decoder_test.cc
  LIBS galley_image PkgConfig::LibWebP PkgConfig::LibJpeg)
add_dependencies(image_decoder_test galley_image_fixtures)
target_compile_definitions(image_decoder_test PRIVATE
  GALLEY_IMAGE_FIXTURE_DIR="${GALLEY_IMAGE_FIXTURE_DIR}" GALLEY_TEST_PYTHON="/usr/bin/python3")

# PNG and BMP against PIL, variant by variant.
galley_add_test(image_png_bmp_test
  SOURCES unit/image_png_bmp_test.cc
  LIBS galley_image)
add_dependencies(image_png_bmp_test galley_image_fixtures)
target_compile_definitions(image_png_bmp_test PRIVATE
  GALLEY_IMAGE_FIXTURE_DIR="${GALLEY_IMAGE_FIXTURE_DIR}")

# Padding, copies and the eight turns under the pipeline, against hand-written values.
galley_add_test(image_rgb_span_test
  SOURCES unit/image_rgb_span_test.cc
  LIBS galley_image)

galley_add_test(image_transforms_test
  SOURCES unit/image_transforms_test.cc
  LIBS galley_image galley_image_testing galley_opencv)

# Resampler parity: the test runs PIL / torchvision through this interpreter
# to compute its references.
galley_add_test(image_resample_test
  SOURCES unit/image_resample_test.cc
  LIBS galley_image galley_image_testing)
target_compile_definitions(image_resample_test PRIVATE GALLEY_TEST_PYTHON="/usr/bin/python3")

# The max_resolution shrink: its sizes, and that it is the BOX resize.
galley_add_test(image_max_resolution_test
  SOURCES unit/image_max_resolution_test.cc
  LIBS galley_image)

# Region decoding must give the same samples as decoding the whole image.
galley_add_test(image_region_test
  SOURCES unit/image_region_test.cc
  LIBS galley_image galley_image_testing PkgConfig::TurboJPEG)

# Pixel ops (colour, AutoAugment's ops, warps, padding, blur) against
# torchvision.transforms.functional on PIL images, with forced parameters.
galley_add_test(image_pixel_ops_test
  SOURCES unit/image_pixel_ops_test.cc
  LIBS galley_image)
target_compile_definitions(image_pixel_ops_test PRIVATE GALLEY_TEST_PYTHON="/usr/bin/python3")

# torchvision's tensor kernels (AugMix's ops) and AugMix itself against
# torchvision with forced draws.
galley_add_test(image_tensor_ops_test
  SOURCES unit/image_tensor_ops_test.cc
  LIBS galley_image)
target_compile_definitions(image_tensor_ops_test PRIVATE GALLEY_TEST_PYTHON="/usr/bin/python3")

# Apply equals its described plan replayed op by op with the pixel ops.
galley_add_test(image_plan_replay_test
  SOURCES unit/image_plan_replay_test.cc
  LIBS galley_image galley_image_testing)

# The random draws of every op follow torchvision's distributions.
galley_add_test(image_draws_test
  SOURCES unit/image_draws_test.cc
  LIBS galley_image galley_image_testing)

# Packed pixels: lossless round trips, and damage refused (a short fuzz).
galley_add_test(image_pixel_codec_test
  SOURCES unit/image_pixel_codec_test.cc
  LIBS galley_image)
