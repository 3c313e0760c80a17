# Decode and transform micro-benchmarks (Google Benchmark).
add_executable(decode_bench decode_bench.cc)
target_link_libraries(decode_bench PRIVATE galley_image PkgConfig::TurboJPEG PkgConfig::LibJpeg
                      PkgConfig::LibPng benchmark::benchmark)

# transforms_bench also times the OpenCV resize galley used before its own
# resampler, as the baseline.
add_executable(transforms_bench transforms_bench.cc)
target_link_libraries(transforms_bench
  PRIVATE galley_image galley_image_testing galley_opencv benchmark::benchmark)
