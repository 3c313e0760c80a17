# Sampler: the policy simulator (with the real cache) and the per-round
# micro-benchmark.
add_executable(galley_sampler_sim ${CMAKE_CURRENT_LIST_DIR}/sampler_sim.cc)
target_link_libraries(galley_sampler_sim PRIVATE galley_sampler galley_cache)
# The workloads it shares with the sampler tests (tests/unit/sampler_workloads.h).
target_include_directories(galley_sampler_sim PRIVATE ${PROJECT_SOURCE_DIR})

add_executable(galley_sampler_bench ${CMAKE_CURRENT_LIST_DIR}/sampler_bench.cc)
target_link_libraries(galley_sampler_bench PRIVATE galley_sampler benchmark::benchmark)
