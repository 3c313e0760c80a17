# Unit tests of the cache library (tiers, eviction, demand, planner).
galley_add_test(galley_cache_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/unit/cache_arena_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/cache_augmented_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/cache_demand_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/cache_disk_tier_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/cache_eviction_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/cache_planner_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/cache_replay_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/cache_tier_test.cc
  LIBS galley_cache galley_disk_tier)
