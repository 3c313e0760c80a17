# The S3 client against a local rclone serve s3 (tests/unit/rclone_s3_server.h).
if(GALLEY_OBJECT_STORE)
  add_executable(objectstore_bench ${CMAKE_CURRENT_LIST_DIR}/objectstore_bench.cc
                                   ${PROJECT_SOURCE_DIR}/tests/unit/rclone_s3_server.cc)
  target_link_libraries(objectstore_bench PRIVATE galley_objectstore CURL::libcurl benchmark::benchmark)
  target_include_directories(objectstore_bench PRIVATE ${PROJECT_SOURCE_DIR})
endif()
