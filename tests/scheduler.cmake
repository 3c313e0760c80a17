# The scheduling library on its own (it links nothing of the daemon): its
# timing decisions with a hand-set clock, whole waves planned over fake
# rings, the drift simulations, listed jobs, the batch ring's memory, and
# the logging throttle it shares with the other libraries.
galley_add_test(scheduler_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_gate_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_wave_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_drift_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/drift_harness.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_listed_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/log_throttle_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/batch_ring_test.cc
  LIBS galley_scheduling galley_logging)
# How the daemon's job manager announces a job's life to the scheduler and
# the planner.
galley_add_test(job_lifecycle_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/job_lifecycle_test.cc
  LIBS galley_daemon)
