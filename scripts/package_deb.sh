#!/usr/bin/env bash
# Builds the galley .deb: galleyd, galleyctl, the systemd unit (running as the
# unprivileged user `galley`), the example config in /etc/galley, and the C++
# client library with its headers, CMake package and pkg-config file.
#
#   scripts/package_deb.sh            # -> build-deb/galley_<version>_amd64.deb
#
# The package is configured for prefix /usr in its own build folder
# (GALLEY_DEB_BUILD_DIR, default build-deb/), without tests, benchmarks or
# the Python module. Install with `sudo apt install ./build-deb/galley_*.deb`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_DEB_BUILD_DIR:-$ROOT/build-deb}"
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
fi
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  /usr/bin/cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" "${LAUNCHER[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DGALLEY_BUILD_TESTS=OFF -DGALLEY_BUILD_BENCH=OFF -DGALLEY_BUILD_PYTHON=OFF >/dev/null
fi
/usr/bin/cmake --build "$BUILD_DIR" --parallel "$(nproc)"
(cd "$BUILD_DIR" && /usr/bin/cpack -G DEB >"$BUILD_DIR/cpack.log" 2>&1) ||
  { cat "$BUILD_DIR/cpack.log" >&2; exit 1; }
ls "$BUILD_DIR"/galley_*_amd64.deb
