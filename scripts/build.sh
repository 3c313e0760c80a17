#!/usr/bin/env bash
# Configures and builds galley (Release) into build/: galleyd, galleyctl, the
# libraries, tests, benchmarks, and the Python extension for Debian's
# /usr/bin/python3 written into python/galley/ (PYTHONPATH=python). Extra
# arguments are build targets (default: everything). Uses ccache when present.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_BUILD_DIR:-$ROOT/build}"
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  LAUNCHER=()
  if command -v ccache >/dev/null 2>&1; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" "${LAUNCHER[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE=/usr/bin/python3
fi
# ccache shares objects between build folders (build/, build-deb/, worktrees).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_NOHASHDIR=true
JOBS="$(nproc)"
if (($# > 0)); then
  cmake --build "$BUILD_DIR" --parallel "$JOBS" --target "$@"
else
  cmake --build "$BUILD_DIR" --parallel "$JOBS"
fi
