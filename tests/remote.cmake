# The remote cache tier's pieces without a server: value layout and checks,
# keys, the credentials file, server addresses, the storage throttle.
galley_add_test(remote_tier_unit_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/remote_tier_unit_test.cc
  LIBS galley_daemon)
