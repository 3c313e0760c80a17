#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy, each finding an error) over
# galley's C++ sources in server/, client/ and cache/, and over the headers
# they include from there. It uses the compile commands of the clang build
# scripts/check_sanitized.sh makes (build-asan/, or
# $GALLEY_SANITIZED_BUILD_DIR), configuring it when it is not there yet, so
# flags and generated headers are those of a real build. CI runs it from
# scripts/test.sh after that build.
#
#   scripts/check_tidy.sh [FILE_REGEX]   e.g. server/daemon/scheduler
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_SANITIZED_BUILD_DIR:-$ROOT/build-asan}"
TIDY="${GALLEY_CLANG_TIDY:-clang-tidy-14}"
RUN_TIDY="${GALLEY_RUN_CLANG_TIDY:-run-clang-tidy-14}"
command -v "$RUN_TIDY" >/dev/null || {
  echo "check_tidy.sh: $RUN_TIDY not found (scripts/setup.sh installs clang-tidy-14)" >&2
  exit 2
}
if [[ ! -f "$BUILD_DIR/compile_commands.json" ]]; then
  GALLEY_SANITIZED_BUILD_DIR="$BUILD_DIR" "$ROOT/scripts/check_sanitized.sh" --configure-only
fi
FILTER="${1:-}"
echo "== clang-tidy: server/ client/ cache/ (${FILTER:-all files})"
"$RUN_TIDY" -p "$BUILD_DIR" -j "$(nproc)" -quiet -clang-tidy-binary "$(command -v "$TIDY")" \
  "^$ROOT/(server|client|cache)/.*${FILTER}.*\.cc\$"
echo "== clang-tidy: no findings"
