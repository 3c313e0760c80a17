# The node-local disk tier in a real galleyd: epochs and restarts that read
# no file, changed and damaged files read again, one galleyd per folder.
galley_add_test(disk_tier_test
  SOURCES integration/disk_tier_test.cc integration/galleyd_process.cc integration/other_user.cc
          integration/metadata_clone.cc
  LIBS galley_client galley_opencv
  LABEL integration)
target_compile_definitions(disk_tier_test PRIVATE GALLEYD_PATH="$<TARGET_FILE:galleyd>")
add_dependencies(disk_tier_test galleyd)
