#!/usr/bin/env bash
# Builds the C/C++ libraries galleyd links, as static PIC archives, with Zig's
# C/C++ toolchain for glibc 2.28 (the manylinux_2_28 baseline), into a prefix
# cached outside the clone; prints the prefix. scripts/build_wheel.sh
# configures galley against it (docs/install.md, "The manylinux wheels").
#
#   scripts/build_wheel_deps.sh ARCH ZIG      # ARCH: x86_64 or aarch64
#   -> ~/.cache/galley/zig-deps/<ARCH>-<hash>  (GALLEY_ZIG_DEPS_CACHE for another folder)
#
# The sources are Debian 12's own source packages (the versions the .deb and
# the source build use, with Debian's security patches), fetched by
# `apt-get source` through a private deb-src list, so the system's apt
# configuration is not touched. The header-only dependencies (Boost,
# nlohmann-json, CLI11, xxHash, toml++) come from the installed -dev packages
# (scripts/setup.sh): only their headers, linked into the prefix's own include
# folder, so no other system header reaches the compiler.
#
# The prefix's name hashes this script, Zig's version and the architecture:
# any change to them builds a new one; an unchanged one is reused at once.
set -euo pipefail
ARCH="$1"
ZIG="$2"
case "$ARCH" in
  x86_64 | aarch64) ;;
  *) echo "build_wheel_deps: unknown architecture '$ARCH' (x86_64 or aarch64)" >&2; exit 2 ;;
esac
SELF="${BASH_SOURCE[0]}"
GLIBC=2.28
TARGET="$ARCH-linux-gnu.$GLIBC"
# Debian 12's source packages, pinned: the prefix's name depends on them.
SOURCES=(
  zlib=1:1.2.13.dfsg-1
  libpng1.6=1.6.39-2+deb12u5
  libjpeg-turbo=1:2.1.5-2
  libwebp=1.2.4-0.2+deb12u1
  libexif=0.6.24-1+deb12u1
  attr=1:2.5.1-4
  acl=2.3.1-3
  onetbb=2021.8.0-2+deb12u1
  fmtlib=9.1.0+ds1-2
  spdlog=1:1.10.0+ds-0.4
  libzstd=1.5.4+dfsg2-5
)
HASH="$( (cat "$SELF"; "$ZIG" version; echo "$ARCH") | sha256sum | cut -c1-12)"
CACHE="${GALLEY_ZIG_DEPS_CACHE:-$HOME/.cache/galley/zig-deps}"
# GALLEY_ZIG_DEPS_PREFIX names a fixed prefix instead, for working on this
# script: the libraries already built there are kept.
PREFIX="${GALLEY_ZIG_DEPS_PREFIX:-$CACHE/$ARCH-$HASH}"
if [[ -f "$PREFIX/.complete" ]]; then
  echo "$PREFIX"
  exit 0
fi

WORK="$(mktemp -d -t galley-zig-deps.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
if [[ -z "${GALLEY_ZIG_DEPS_PREFIX:-}" ]]; then rm -rf "$PREFIX"; fi
mkdir -p "$PREFIX"/{bin,include,lib/pkgconfig,lib/cmake}
log() { echo "build_wheel_deps [$ARCH]: $*" >&2; }

# The compilers: zig cc / zig c++ for the target, as plain executables that
# autotools and CMake can call. libc++ is Zig's, linked statically.
for tool in cc c++; do
  printf '#!/bin/sh\nexec "%s" %s -target %s "$@"\n' "$ZIG" "$tool" "$TARGET" >"$PREFIX/bin/$tool"
done
for tool in ar ranlib; do
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$ZIG" "$tool" >"$PREFIX/bin/$tool"
done
chmod +x "$PREFIX"/bin/*
CFLAGS="-O2 -fPIC -g0"
CROSS=""
if [[ "$ARCH" != "$(uname -m)" ]]; then
  CROSS="set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR $ARCH)"
fi
cat >"$PREFIX/toolchain.cmake" <<EOF
# Zig's toolchain for $TARGET and the libraries in this prefix.
$CROSS
set(CMAKE_C_COMPILER "$PREFIX/bin/cc")
set(CMAKE_CXX_COMPILER "$PREFIX/bin/c++")
set(CMAKE_AR "$PREFIX/bin/ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "$PREFIX/bin/ranlib" CACHE FILEPATH "")
list(PREPEND CMAKE_PREFIX_PATH "$PREFIX")
# Libraries named bare (-lacl) resolve here too, never in the build machine's
# /usr; what is linked is stripped (-s), as a distribution's binaries are.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-L$PREFIX/lib -s")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-L$PREFIX/lib -s")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-L$PREFIX/lib -s")
set(ENV{PKG_CONFIG_LIBDIR} "$PREFIX/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
EOF

# The header-only dependencies: headers linked in, a minimal CMake package each.
header_package() {  # NAME TARGET VERSION [COMPILE_DEFINITIONS]
  mkdir -p "$PREFIX/lib/cmake/$1"
  cat >"$PREFIX/lib/cmake/$1/$1Config.cmake" <<EOF
if(NOT TARGET $2)
  add_library($2 INTERFACE IMPORTED)
  set_target_properties($2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$PREFIX/include"
                        INTERFACE_COMPILE_DEFINITIONS "${4:-}")
endif()
set($1_FOUND TRUE)
EOF
  cat >"$PREFIX/lib/cmake/$1/$1ConfigVersion.cmake" <<EOF
set(PACKAGE_VERSION "$3")
set(PACKAGE_VERSION_COMPATIBLE TRUE)
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
EOF
}
deb_version() { dpkg-query -W -f='${Version}' "$1" | sed 's/^[0-9]*://; s/[-+~].*//'; }
for header in boost nlohmann CLI toml++ xxhash.h; do
  if [[ ! -e "/usr/include/$header" ]]; then
    echo "build_wheel_deps: /usr/include/$header is missing; run scripts/setup.sh" >&2
    exit 1
  fi
  ln -sfn "/usr/include/$header" "$PREFIX/include/$header"
done
# Boost 1.74's Asio takes std::invoke_result only from MSVC's library and
# otherwise std::result_of, which libc++ no longer has in C++20.
header_package Boost Boost::headers "$(deb_version libboost-dev)" BOOST_ASIO_HAS_STD_INVOKE_RESULT=1
header_package nlohmann_json nlohmann_json::nlohmann_json "$(deb_version nlohmann-json3-dev)"
header_package CLI11 CLI11::CLI11 "$(deb_version libcli11-dev)"
header_package tomlplusplus tomlplusplus::tomlplusplus "$(deb_version libtomlplusplus-dev)"

log "fetching ${SOURCES[*]}"
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/src"
for suite in bookworm bookworm-updates; do
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
done >"$WORK/apt/sources.list"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main" \
  >>"$WORK/apt/sources.list"
APT=(apt-get -q -o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
  -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache")
"${APT[@]}" update >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log" >&2; exit 1; }
(cd "$WORK/src" && "${APT[@]}" source "${SOURCES[@]}" >>"$WORK/apt.log" 2>&1) ||
  { tail -20 "$WORK/apt.log" >&2; echo "build_wheel_deps: apt-get source failed (a pinned version gone from the archive? update SOURCES)" >&2; exit 1; }
src() { find "$WORK/src" -maxdepth 1 -mindepth 1 -type d -name "$1-*" | head -1; }

export CC="$PREFIX/bin/cc" CXX="$PREFIX/bin/c++" AR="$PREFIX/bin/ar" RANLIB="$PREFIX/bin/ranlib"
export CFLAGS CXXFLAGS="$CFLAGS" CPPFLAGS="-I$PREFIX/include" LDFLAGS="-L$PREFIX/lib"
export PKG_CONFIG_LIBDIR="$PREFIX/lib/pkgconfig" PKG_CONFIG_PATH=""
JOBS=2
cmake_build() {  # SOURCE_DIR CMAKE_ARGS...
  local dir="$1"
  shift
  /usr/bin/cmake -S "$dir" -B "$dir/build-zig" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$PREFIX/toolchain.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR="$PREFIX/lib" \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF "$@" >"$dir/build.log" 2>&1 &&
    /usr/bin/cmake --build "$dir/build-zig" -j "$JOBS" >>"$dir/build.log" 2>&1 &&
    /usr/bin/cmake --install "$dir/build-zig" >>"$dir/build.log" 2>&1 ||
    { tail -40 "$dir/build.log" >&2; echo "build_wheel_deps: $(basename "$dir") failed" >&2; exit 1; }
}
autotools_build() {  # SOURCE_DIR CONFIGURE_ARGS...
  local dir="$1"
  shift
  # A source without a generated configure script (libexif's) gets one.
  if [[ ! -x "$dir/configure" ]]; then (cd "$dir" && autoreconf -fi >autoreconf.log 2>&1); fi
  (cd "$dir" && ./configure --host="$ARCH-linux-gnu" --prefix="$PREFIX" --libdir="$PREFIX/lib" \
    --enable-static --disable-shared --disable-nls "$@" >build.log 2>&1 &&
    make -j "$JOBS" >>build.log 2>&1 && make install >>build.log 2>&1) ||
    { tail -40 "$dir/build.log" >&2; echo "build_wheel_deps: $(basename "$dir") failed" >&2; exit 1; }
}

# step NAME COMMAND...: builds one library, once per prefix.
step() {
  local name="$1"
  shift
  if [[ -f "$PREFIX/.built-$name" ]]; then return; fi
  log "$name"
  "$@"
  touch "$PREFIX/.built-$name"
}
zlib_build() {
  local dir
  dir="$(src zlib)"
  (cd "$dir" && ./configure --static --prefix="$PREFIX" --libdir="$PREFIX/lib" >build.log 2>&1 &&
    make -j "$JOBS" libz.a >>build.log 2>&1 && make install >>build.log 2>&1) ||
    { tail -40 "$dir/build.log" >&2; echo "build_wheel_deps: zlib failed" >&2; exit 1; }
}
step zlib zlib_build
step libpng cmake_build "$(src libpng1.6)" -DPNG_SHARED=OFF -DPNG_STATIC=ON -DPNG_TESTS=OFF \
  -DPNG_EXECUTABLES=OFF -DZLIB_ROOT="$PREFIX"
step libjpeg-turbo cmake_build "$(src libjpeg-turbo)" -DENABLE_SHARED=OFF -DENABLE_STATIC=ON \
  -DWITH_TURBOJPEG=ON -DWITH_JAVA=OFF -DREQUIRE_SIMD=ON
step libwebp cmake_build "$(src libwebp)" -DWEBP_BUILD_ANIM_UTILS=OFF -DWEBP_BUILD_CWEBP=OFF \
  -DWEBP_BUILD_DWEBP=OFF -DWEBP_BUILD_GIF2WEBP=OFF -DWEBP_BUILD_IMG2WEBP=OFF -DWEBP_BUILD_VWEBP=OFF \
  -DWEBP_BUILD_WEBPINFO=OFF -DWEBP_BUILD_WEBPMUX=OFF -DWEBP_BUILD_EXTRAS=OFF -DWEBP_BUILD_LIBWEBPMUX=OFF
step libexif autotools_build "$(src libexif)" --disable-docs
# libacl's tools need libattr's headers; libacl itself links nothing of it.
step attr autotools_build "$(src attr)"
step acl autotools_build "$(src acl)"
step onetbb cmake_build "$(src onetbb)" -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBB_STRICT=OFF \
  -DTBBMALLOC_BUILD=OFF
step fmt cmake_build "$(src fmtlib)" -DFMT_DOC=OFF -DFMT_TEST=OFF
step spdlog cmake_build "$(src spdlog)" -DSPDLOG_FMT_EXTERNAL=ON -DSPDLOG_BUILD_EXAMPLE=OFF \
  -DSPDLOG_BUILD_TESTS=OFF
# Zstandard's CMake project is in build/cmake; the library alone, single-threaded
# (galleyd packs on its own worker threads), without its tracing hooks, which
# would leave weak undefined symbols in galleyd's dynamic table.
step zstd cmake_build "$(src libzstd)/build/cmake" -DZSTD_BUILD_PROGRAMS=OFF -DZSTD_BUILD_TESTS=OFF \
  -DZSTD_BUILD_SHARED=OFF -DZSTD_BUILD_STATIC=ON -DZSTD_MULTITHREAD_SUPPORT=OFF \
  -DZSTD_LEGACY_SUPPORT=OFF -DCMAKE_C_FLAGS="$CFLAGS -DZSTD_TRACE=0"

# Static archives: what a shared build names as private (libpng's zlib, the
# maths library) is needed by every consumer, so pkg-config lists it as public.
for pc in "$PREFIX"/lib/pkgconfig/*.pc; do
  private="$(sed -n 's/^Libs.private: *//p' "$pc")"
  if [[ -n "$private" ]]; then sed -i "s|^Libs: \(.*\)|Libs: \1 $private|; /^Libs.private:/d" "$pc"; fi
done
rm -rf "$PREFIX/share/man" "$PREFIX/share/doc"
touch "$PREFIX/.complete"
log "done: $PREFIX"
echo "$PREFIX"
