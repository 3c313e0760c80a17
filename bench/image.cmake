# Decode and transform micro-benchmarks (Google Benchmark).
add_executable(decode_bench decode_bench.cc)
target_link_libraries(decode_bench PRIVATE galley_image PkgConfig::TurboJPEG PkgConfig::LibJpeg
                      PkgConfig::LibPng benchmark::benchmark)

# transforms_bench also times the OpenCV resize galley used before its own
# resampler, as the baseline.
add_executable(transforms_bench transforms_bench.cc)
target_link_libraries(transforms_bench
  PRIVATE galley_image galley_image_testing galley_opencv benchmark::benchmark)

# Forms for a max_resolution dataset's encoded tier, measured on a JPEG
# folder (packed pixels, Zstandard, LZ4 when its headers are here, JPEG).
add_executable(pixel_codec_bench pixel_codec_bench.cc)
target_link_libraries(pixel_codec_bench PRIVATE galley_image PkgConfig::TurboJPEG PkgConfig::Zstd)
pkg_check_modules(Lz4 QUIET IMPORTED_TARGET liblz4)
if(Lz4_FOUND)
  target_link_libraries(pixel_codec_bench PRIVATE PkgConfig::Lz4)
  target_compile_definitions(pixel_codec_bench PRIVATE GALLEY_BENCH_HAVE_LZ4)
endif()
