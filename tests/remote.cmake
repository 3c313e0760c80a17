# The remote cache tier's pieces without a server: value layout and MAC
# (with the remote tier), keys, the credentials file, server addresses, the
# storage throttle. XXH3 forges values as the unkeyed checksum made them.
galley_add_test(remote_tier_unit_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/remote_tier_unit_test.cc
  LIBS galley_daemon galley_xxhash)
