# Wire protocol, client and daemon tests.
galley_add_test(protocol_test SOURCES unit/protocol_test.cc LIBS galley_client)
# The client against a fake daemon that passes crafted descriptors.
galley_add_test(untrusted_daemon_test SOURCES unit/untrusted_daemon_test.cc LIBS galley_client)

galley_add_test(galleyd_test
  SOURCES integration/galleyd_test.cc integration/hostile_peer_test.cc
          integration/admission_test.cc integration/kill_test.cc integration/config_test.cc
          integration/access_test.cc integration/daemon_trust_test.cc integration/log_file_test.cc
          integration/node_limits_test.cc integration/listing_stop_test.cc
          integration/user_memory_test.cc integration/galleyd_process.cc
          integration/in_process_daemon.cc integration/other_user.cc
          integration/two_user_daemon.cc
  LIBS galley_client galley_daemon galley_opencv acl
  LABEL integration)
target_compile_definitions(galleyd_test PRIVATE GALLEYD_PATH="$<TARGET_FILE:galleyd>"
  GALLEY_CLIENT_AS_PATH="$<TARGET_FILE:galley_client_as>")
add_dependencies(galleyd_test galleyd galley_client_as)
# A client run as another user, spawned by tests whose daemon is in their
# own process (other_user.h).
add_executable(galley_client_as integration/client_as_main.cc)
target_link_libraries(galley_client_as PRIVATE galley_client nlohmann_json::nlohmann_json)
target_include_directories(galley_client_as PRIVATE ${PROJECT_SOURCE_DIR})

# The remote cache tier: real memcached servers (SASL) and two galleyd
# processes standing for nodes.
if(GALLEY_REMOTE_TIER)
  galley_add_test(remote_tier_test
    SOURCES integration/remote_tier_test.cc integration/memcached_cluster.cc
            integration/galleyd_process.cc integration/other_user.cc integration/metadata_clone.cc
    LIBS galley_client galley_opencv PkgConfig::LibMemcached OpenSSL::Crypto galley_xxhash
    LABEL integration)
  target_compile_definitions(remote_tier_test PRIVATE GALLEYD_PATH="$<TARGET_FILE:galleyd>")
  add_dependencies(remote_tier_test galleyd)
endif()
