#!/usr/bin/env bash
# Configures and builds galley (Release) into build/. Extra arguments are
# build targets (default: everything).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_BUILD_DIR:-$ROOT/build}"
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release
fi
JOBS="$(nproc)"
if (($# > 0)); then
  cmake --build "$BUILD_DIR" --parallel "$JOBS" --target "$@"
else
  cmake --build "$BUILD_DIR" --parallel "$JOBS"
fi
