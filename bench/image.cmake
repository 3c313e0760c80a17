# Decode and transform micro-benchmarks (Google Benchmark).
add_executable(decode_bench decode_bench.cc)
target_link_libraries(decode_bench PRIVATE galley_image PkgConfig::TurboJPEG benchmark::benchmark)

add_executable(transforms_bench transforms_bench.cc)
target_link_libraries(transforms_bench PRIVATE galley_image benchmark::benchmark)
