#!/usr/bin/env bash
# One extra build that serves two checks (CI runs it from scripts/test.sh):
#   - clang's thread-safety analysis: every GUARDED_BY / REQUIRES / EXCLUDES
#     (galley/thread_annotations.h) is checked, and a violation fails the
#     build (-Werror=thread-safety, set for clang in CMakeLists.txt);
#   - AddressSanitizer + UndefinedBehaviorSanitizer over the unit and
#     integration tests (ctest labels `unit` and `integration`): a report
#     fails the test that caused it (UBSan does not recover; ASan aborts).
# Builds with clang-14 into build-asan/ (or $GALLEY_SANITIZED_BUILD_DIR),
# through ccache when present. The GoogleTest binaries, galleyd and the
# fuzz targets' corpus replays are built; the Python module and benchmarks
# are not (the interpreter is not sanitized; scripts/sanitize.sh runs the
# Python tests against a sanitized galleyd, and ThreadSanitizer).
#
#   scripts/check_sanitized.sh [CTEST_ARGS...]   e.g. -R Protocol
#   scripts/check_sanitized.sh --configure-only  (the compile commands
#                                                 scripts/check_tidy.sh uses)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_SANITIZED_BUILD_DIR:-$ROOT/build-asan}"
CXX_BIN="${GALLEY_CLANG:-clang++-14}"
CC_BIN="${CXX_BIN/clang++/clang}"
command -v "$CXX_BIN" >/dev/null || {
  echo "check_sanitized.sh: $CXX_BIN not found (scripts/setup.sh installs clang-14)" >&2
  exit 2
}
GENERATOR=()
command -v ninja >/dev/null 2>&1 && GENERATOR=(-G Ninja)
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  LAUNCHER=()
  command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # -O1 keeps the sanitized tests quick to run; line tables are enough for
  # symbolized reports and cost far less to compile than full debug info.
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" "${LAUNCHER[@]}" \
    -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
    -DCMAKE_BUILD_TYPE=Sanitized -DCMAKE_CXX_FLAGS_SANITIZED="-O1 -gline-tables-only" \
    -DGALLEY_SANITIZE=address,undefined \
    -DGALLEY_BUILD_PYTHON=OFF -DGALLEY_BUILD_BENCH=OFF
fi
[[ "${1:-}" == --configure-only ]] && exit 0
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_NOHASHDIR=true
echo "== clang build: -Wthread-safety, ASan + UBSan ($BUILD_DIR)"
cmake --build "$BUILD_DIR" --parallel "$(nproc)"

# Left to the ordinary build's ctest: the sampler's statistical uniformity
# tests, which repeat the same code paths hundreds of times to measure a
# distribution (three quarters of the sanitized test time; the exactly-once,
# sharing and ods tests run those paths here), and NodeProbeTest, which
# compares two measured speeds over 30 ms windows: instrumentation slows
# galley's code, not the uninstrumented libjpeg-turbo, so the ratio it
# checks does not hold under ASan on a loaded machine.
# HostilePeerProcessTest.MemoryOfLargeRequestsIsGivenBack measures galleyd's RSS
# after freeing large requests, which ASan's quarantine holds on purpose.
echo "== ctest -L 'unit|integration' under ASan + UBSan (uniformity statistics, node probe, RSS test left out)"
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
(cd "$BUILD_DIR" && ctest -L 'unit|integration' -E 'UniformityTest|UniformityHarnessTest|NodeProbeTest|MemoryOfLargeRequestsIsGivenBack' \
  --output-on-failure --timeout 900 -j 2 "$@")
echo "== no thread-safety warnings, no sanitizer reports"
