# galleyd's configuration: keys, values, sizes, errors, reload.
galley_add_test(daemon_options_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/daemon_options_test.cc
  LIBS galley_daemon)
