# The daemon's scheduler: its timing decisions with a hand-set clock, whole
# waves planned over fake rings, the batch ring's memory, and how the job
# manager announces a job's life to the scheduler and the planner.
galley_add_test(scheduler_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/unit/job_lifecycle_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_gate_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_wave_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_drift_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/drift_harness.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_listed_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/log_throttle_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/batch_ring_test.cc
  LIBS galley_daemon)
