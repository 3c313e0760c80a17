#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy, each finding an error) over
# galley's C++ sources in server/, client/ and cache/, and over the headers
# they include from there. It uses the compile commands of the clang build
# scripts/check_sanitized.sh makes (build-asan/, or
# $GALLEY_SANITIZED_BUILD_DIR), configuring it when it is not there yet, so
# flags and generated headers are those of a real build. CI runs it from
# scripts/test.sh after that build.
#
# A file that passed is not checked again while nothing its result depends
# on changes: scripts/tidy_with_cache.py keeps a hash of the tidy version,
# .clang-tidy, the file's compile command and its preprocessed text (the
# clone's path replaced, so a fresh clone on the same machine reuses it) in
# $GALLEY_TIDY_CACHE (default ~/.cache/galley/tidy; "off" checks every file).
# Findings are never kept: a file with one is checked on every run.
#
#   scripts/check_tidy.sh [FILE_REGEX]   relative to server/, client/, cache/: e.g. daemon/scheduler
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_SANITIZED_BUILD_DIR:-$ROOT/build-asan}"
TIDY="${GALLEY_CLANG_TIDY:-clang-tidy-14}"
CACHE="${GALLEY_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/galley/tidy}"
command -v "$TIDY" >/dev/null || {
  echo "check_tidy.sh: $TIDY not found (scripts/setup.sh installs clang-tidy-14)" >&2
  exit 2
}
if [[ ! -f "$BUILD_DIR/compile_commands.json" ]]; then
  GALLEY_SANITIZED_BUILD_DIR="$BUILD_DIR" "$ROOT/scripts/check_sanitized.sh" --configure-only
fi
FILTER="${1:-}"
echo "== clang-tidy: server/ client/ cache/ (${FILTER:-all files})"
GALLEY_CLANG_TIDY="$TIDY" python3 "$ROOT/scripts/tidy_with_cache.py" "$ROOT" "$BUILD_DIR" \
  "^$ROOT/(server|client|cache)/.*${FILTER}.*\.cc\$" "$CACHE"
echo "== clang-tidy: no findings"
