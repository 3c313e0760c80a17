# Sampler: policy contract, membership index, exactly-once property,
# uniformity statistics, sharing, the opportunistic policy, and the DDP
# split across ranks and nodes.
galley_add_test(galley_sampler_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/unit/sampler_policy_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/sampler_exactly_once_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/sampler_uniformity_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/sampler_sharing_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/sampler_ods_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/distributed_split_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/sampler_schedule.cc
  LIBS galley_sampler galley_cache)
