# Sampler: the policy simulator (with the real cache) and the per-round
# micro-benchmark.
add_executable(galley_sampler_sim ${CMAKE_CURRENT_LIST_DIR}/sampler_sim.cc)
target_link_libraries(galley_sampler_sim PRIVATE galley_sampler galley_cache)
# The workloads it shares with the sampler tests (tests/unit/sampler_workloads.h).
target_include_directories(galley_sampler_sim PRIVATE ${PROJECT_SOURCE_DIR})

add_executable(galley_sampler_bench ${CMAKE_CURRENT_LIST_DIR}/sampler_bench.cc)
target_link_libraries(galley_sampler_bench PRIVATE galley_sampler benchmark::benchmark)

# Loads per request when jobs fall out of step: the real scheduler and
# decoded tier under scripted drift, in simulated time.
add_executable(galley_drift_sim ${CMAKE_CURRENT_LIST_DIR}/drift_sim.cc
                                ${PROJECT_SOURCE_DIR}/tests/unit/drift_harness.cc)
target_link_libraries(galley_drift_sim PRIVATE galley_scheduling galley_cache)
target_include_directories(galley_drift_sim PRIVATE ${PROJECT_SOURCE_DIR})
