# The daemon's scheduler: its timing decisions with a hand-set clock, and
# whole waves planned over fake rings.
galley_add_test(scheduler_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_gate_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/scheduler_wave_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/unit/log_throttle_test.cc
  LIBS galley_daemon)
