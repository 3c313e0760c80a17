# The daemon's use of the cache: tier hits skipping work in the item
# pipeline, demand bookkeeping (the DemandLedger, and the scheduler's use of
# it), planner inputs and options; and ServedJob's use of the DDP split and
# its batch arithmetic.
galley_add_test(daemon_cache_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/unit/daemon_cache_pipeline_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/daemon_cache_planner_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/daemon_memory_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/demand_ledger_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/served_job_split_test.cc
  LIBS galley_daemon galley_opencv)
