#!/usr/bin/env bash
# Installs galley into a scratch root and checks what users get:
#   1. `cmake --install` (DESTDIR) lays down the files docs/install.md lists;
#   2. the installed galleyctl and galleyd report the version;
#   3. a C++ program outside the tree builds against the installed client with
#      find_package(galley) and with pkg-config, and reads a batch from the
#      installed galleyd;
#   4. the .deb builds, `dpkg-deb -x` gives the same layout under /usr and
#      /etc, its unit runs galleyd as the user `galley`, and its galleyctl runs.
#
#   tests/install/check_install.sh [BUILD_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${1:-${GALLEY_BUILD_DIR:-$ROOT/build}}"
SCRATCH="$(mktemp -d -t galley-install.XXXXXX)"
DAEMON=""
cleanup() {
  if [[ -n "$DAEMON" ]]; then kill -TERM "$DAEMON" 2>/dev/null || true; wait "$DAEMON" || true; fi
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
fail() { echo "check_install: FAIL: $*" >&2; exit 1; }
expect_files() {
  local base="$1"; shift
  for f in "$@"; do [[ -e "$base/$f" ]] || fail "missing $base/$f"; done
}

PREFIX="$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$BUILD_DIR/CMakeCache.txt")"
LIBDIR="$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$BUILD_DIR/CMakeCache.txt")"
VERSION="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD_DIR/CMakeCache.txt")"
STAGE="$SCRATCH/root"
echo "== cmake --install (prefix $PREFIX, staged in DESTDIR)"
DESTDIR="$STAGE" /usr/bin/cmake --install "$BUILD_DIR" >/dev/null
P="$STAGE$PREFIX"
expect_files "$P" bin/galleyd bin/galleyctl lib/systemd/system/galleyd.service \
  lib/sysusers.d/galley.conf etc/galley/galleyd.toml \
  include/galley/client.h include/galley/batch.h include/galley/job_spec.h \
  include/galley/status.h include/galley/version.h include/galley/tensor_format.h \
  include/galley/sampling_policies.h include/galley/shard_members.h \
  "$LIBDIR/libgalley_client.so" "$LIBDIR/cmake/galley/galleyConfig.cmake" \
  "$LIBDIR/cmake/galley/galleyConfigVersion.cmake" "$LIBDIR/pkgconfig/galley.pc" \
  share/doc/galley/README.md share/doc/galley/LICENSE share/doc/galley/CHANGELOG.md
grep -q "^User=galley$" "$P/lib/systemd/system/galleyd.service" || fail "unit does not run as galley"
grep -q "^ExecStart=$PREFIX/bin/galleyd " "$P/lib/systemd/system/galleyd.service" ||
  fail "unit's ExecStart does not name the installed galleyd"
grep -q "^Type=notify$" "$P/lib/systemd/system/galleyd.service" || fail "unit is not Type=notify"
grep -q "^ExecReload=/bin/kill -HUP \$MAINPID$" "$P/lib/systemd/system/galleyd.service" ||
  fail "unit has no ExecReload"
# The shipped config is one galleyd accepts (its allowed root need not exist).
"$P/bin/galleyd" --check-config --config "$P/etc/galley/galleyd.toml" >/dev/null 2>&1 ||
  fail "the installed galleyd.toml does not pass galleyd --check-config"
[[ "$("$P/bin/galleyctl" --version)" == "galleyctl $VERSION (protocol "* ]] || fail "galleyctl --version"
[[ "$("$P/bin/galleyd" --version)" == "galleyd $VERSION (protocol "* ]] || fail "galleyd --version"

echo "== a C++ consumer outside the tree: find_package(galley)"
/usr/bin/cmake -S "$ROOT/tests/install/consumer" -B "$SCRATCH/consumer" \
  -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release >/dev/null
/usr/bin/cmake --build "$SCRATCH/consumer" >/dev/null
echo "== the same consumer with pkg-config"
PC=(env PKG_CONFIG_PATH="$P/$LIBDIR/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$STAGE" pkg-config)
[[ "$("${PC[@]}" --modversion galley)" == "$VERSION" ]] || fail "pkg-config --modversion"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 "$ROOT/tests/install/consumer/main.cc" -o "$SCRATCH/consumer_pc" \
  $("${PC[@]}" --cflags --libs galley)

echo "== both consumers read a batch from the installed galleyd"
DATA="$SCRATCH/data"
/usr/bin/python3 - "$DATA" <<'PY'
import pathlib, sys
from PIL import Image
root = pathlib.Path(sys.argv[1])
for c in range(2):
    (root / f"c{c}").mkdir(parents=True)
    for i in range(4):
        Image.new("RGB", (48 + i, 40), (60 * c, 20 * i, 90)).save(root / f"c{c}" / f"{i}.jpg")
PY
SOCKET="$SCRATCH/galleyd.sock"
"$P/bin/galleyd" --socket "$SOCKET" --allowed-root "$DATA" --cache-bytes 0 --log-level warn &
DAEMON=$!
for _ in $(seq 100); do [[ -S "$SOCKET" ]] && break; sleep 0.1; done
for consumer in "$SCRATCH/consumer/galley_consumer" "$SCRATCH/consumer_pc"; do
  out="$(LD_LIBRARY_PATH="$P/$LIBDIR" "$consumer" "$SOCKET" "$DATA")" || fail "$consumer failed"
  grep -q "^client $VERSION protocol" <<<"$out" || fail "$consumer: version line"
  grep -q "^batch of 4 samples$" <<<"$out" || fail "$consumer: no batch"
  # The consumer links the installed library, not a copy inside the tree.
  libs="$(LD_LIBRARY_PATH="$P/$LIBDIR" ldd "$consumer")"
  grep -q "$P/$LIBDIR/libgalley_client.so" <<<"$libs" ||
    fail "$consumer does not use the installed libgalley_client"
done
kill -TERM "$DAEMON"; wait "$DAEMON"; DAEMON=""

echo "== the client alone (GALLEY_BUILD_SERVER=OFF) looks for none of the daemon's libraries"
# Configured afresh each time, in a folder of the build tree rather than a
# temporary one: with ccache and CCACHE_BASEDIR its compiles are the same
# commands in every run and every clone, and hit the cache.
CLIENT_ONLY="$BUILD_DIR/install-check-client-only"
rm -rf "$CLIENT_ONLY"
LAUNCHER=()
command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_NOHASHDIR=true
/usr/bin/cmake -S "$ROOT" -B "$CLIENT_ONLY" -DGALLEY_BUILD_SERVER=OFF "${LAUNCHER[@]}" \
  -DGALLEY_BUILD_PYTHON=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
if grep -qiE "^(OpenCV|TBB|TurboJPEG|LibJpeg|LibExif|LibWebP|spdlog|tomlplusplus|CLI11)[_A-Za-z]*(DIR|LIBRARY|INCLUDE_DIR|_FOUND)" \
    "$CLIENT_ONLY/CMakeCache.txt"; then
  fail "the client-only configuration looked for a daemon library"
fi
/usr/bin/cmake --build "$CLIENT_ONLY" --target galley_client_shared >/dev/null
[[ -e "$CLIENT_ONLY/client/libgalley_client.so" ]] || fail "client-only build made no library"
[[ ! -e "$CLIENT_ONLY/server" ]] || fail "client-only build configured the server"
rm -rf "$CLIENT_ONLY"

echo "== the .deb"
DEB="$("$ROOT/scripts/package_deb.sh" | tail -1)"
dpkg-deb -x "$DEB" "$SCRATCH/deb"
dpkg-deb -e "$DEB" "$SCRATCH/deb-control"
D="$SCRATCH/deb"
expect_files "$D" usr/bin/galleyd usr/bin/galleyctl usr/lib/systemd/system/galleyd.service \
  usr/lib/sysusers.d/galley.conf etc/galley/galleyd.toml usr/include/galley/client.h \
  usr/lib/x86_64-linux-gnu/libgalley_client.so usr/lib/x86_64-linux-gnu/cmake/galley/galleyConfig.cmake \
  usr/lib/x86_64-linux-gnu/pkgconfig/galley.pc usr/share/doc/galley/LICENSE
grep -q "^ExecStart=/usr/bin/galleyd --config /etc/galley/galleyd.toml" \
  "$D/usr/lib/systemd/system/galleyd.service" || fail ".deb unit ExecStart"
grep -q "^User=galley$" "$D/usr/lib/systemd/system/galleyd.service" || fail ".deb unit user"
grep -q "^/etc/galley/galleyd.toml$" "$SCRATCH/deb-control/conffiles" || fail "config is no conffile"
grep -q "adduser --system" "$SCRATCH/deb-control/postinst" || fail "postinst makes no user"
dpkg-deb -f "$DEB" Depends | grep -q "adduser" || fail ".deb Depends lacks adduser"
[[ "$("$D/usr/bin/galleyctl" --version)" == "galleyctl $VERSION (protocol "* ]] ||
  fail ".deb galleyctl --version"
echo "check_install: ok ($(du -k "$DEB" | cut -f1) KiB .deb, $(basename "$DEB"))"
