#!/usr/bin/env bash
# Installs what galley needs, builds everything, and runs every test:
# GoogleTest unit and integration tests (ctest), then the Python package's
# tests against a real galleyd (pytest, Debian's /usr/bin/python3).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
echo "== ctest"
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900 -j 2)
echo "== pytest"
GALLEYD="$BUILD_DIR/server/daemon/galleyd" PYTHONPATH="$ROOT/python" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider "$ROOT/tests/python"
echo "== all tests passed"
