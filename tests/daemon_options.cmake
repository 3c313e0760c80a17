# galleyd's configuration: keys, values, sizes, errors, reload.
galley_add_test(daemon_options_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/daemon_options_test.cc
  LIBS galley_daemon)

# The registry over shard sets kept as objects: endpoints, the job's access,
# sharing across credentials.
galley_add_test(object_datasets_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/object_datasets_test.cc
  LIBS galley_daemon)

# A wave of objects prepared while the next wave's GETs are in flight: the
# scheduler plans one wave ahead, the pipeline fetches it behind the current.
galley_add_test(wave_ahead_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/wave_ahead_test.cc
  LIBS galley_daemon galley_opencv)
