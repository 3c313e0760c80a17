# The daemon's snapshots rendered as query replies (JSON) and as /metrics
# (Prometheus text), from snapshots with known numbers; and every reply's
# JSON byte for byte against its recorded copy.
galley_add_test(snapshot_render_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/snapshot_render_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/unit/snapshot_json_golden_test.cc
  LIBS galley_daemon_snapshots)
target_compile_definitions(snapshot_render_test PRIVATE
  GALLEY_SNAPSHOT_JSON_GOLDEN="${CMAKE_CURRENT_LIST_DIR}/unit/snapshot_json_golden.json")
