# The daemon's snapshots rendered as query replies (JSON) and as /metrics
# (Prometheus text), from snapshots with known numbers.
galley_add_test(snapshot_render_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/snapshot_render_test.cc
  LIBS galley_daemon_snapshots)
