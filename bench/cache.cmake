# Cache micro-benchmarks and the cache replay simulator.
add_executable(galley_cache_bench ${CMAKE_CURRENT_LIST_DIR}/cache_bench.cc)
target_link_libraries(galley_cache_bench PRIVATE galley_cache benchmark::benchmark)

add_executable(galley_cache_sim ${CMAKE_CURRENT_LIST_DIR}/cache_sim.cc)
target_link_libraries(galley_cache_sim PRIVATE galley_cache)
