#!/usr/bin/env bash
# Builds galley with a sanitizer into build-<kind>/ (or
# $GALLEY_SANITIZE_BUILD_DIR) and runs the GoogleTest suite, then the Python
# tests against the sanitized galleyd (the Python module comes from the
# normal build: the interpreter is not sanitized).
#
#   scripts/sanitize.sh address|thread|undefined
#
# A report fails the test that caused it: sanitized test programs exit
# non-zero, and the Python tests check that galleyd exits cleanly. ctest and
# this script pass tests/tsan.supp to ThreadSanitizer; it drops only reports
# inside libraries Debian builds without TSan (GDAL, TBB's partitioner).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIND="${1:-}"
case "$KIND" in
  address | thread | undefined) ;;
  *) echo "usage: $0 address|thread|undefined" >&2; exit 2 ;;
esac
BUILD_DIR="${GALLEY_SANITIZE_BUILD_DIR:-$ROOT/build-$KIND}"
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi

"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh" _galley
cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGALLEY_SANITIZE="$KIND" -DGALLEY_BUILD_PYTHON=OFF -DGALLEY_BUILD_BENCH=OFF
cmake --build "$BUILD_DIR" --parallel "$(nproc)"

echo "== ctest ($KIND)"
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900 -j 2)
echo "== pytest against galleyd ($KIND)"
export TSAN_OPTIONS="suppressions=$ROOT/tests/tsan.supp ${TSAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1 ${UBSAN_OPTIONS:-}"
GALLEYD="$BUILD_DIR/server/daemon/galleyd" PYTHONPATH="$ROOT/python" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider "$ROOT/tests/python"
echo "== no $KIND sanitizer reports"
