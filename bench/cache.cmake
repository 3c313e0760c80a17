# Cache micro-benchmarks and the cache replay simulator.
add_executable(galley_cache_bench ${CMAKE_CURRENT_LIST_DIR}/cache_bench.cc)
target_link_libraries(galley_cache_bench PRIVATE galley_cache benchmark::benchmark)

add_executable(galley_cache_sim ${CMAKE_CURRENT_LIST_DIR}/cache_sim.cc)
target_link_libraries(galley_cache_sim PRIVATE galley_cache)

# The disk tier's layout at ImageNet's entry count (one file per entry against
# one pack file), and the index scan a restart pays.
add_executable(galley_disk_tier_bench ${CMAKE_CURRENT_LIST_DIR}/disk_tier_bench.cc)
target_link_libraries(galley_disk_tier_bench PRIVATE galley_disk_tier)
