# The data plane: hand-off of a published batch to the client.
add_executable(ring_bench ring_bench.cc)
target_link_libraries(ring_bench PRIVATE galley_client galley_scheduling benchmark::benchmark)
target_include_directories(ring_bench PRIVATE ${PROJECT_SOURCE_DIR})
