#!/usr/bin/env bash
# Installs what galley needs, builds everything, and runs every test:
#   1. GoogleTest unit and integration tests (ctest);
#   2. the Python tests against a real galleyd under Debian's /usr/bin/python3
#      (torch 1.13 and torchvision 0.14, the oldest supported; NumPy 1),
#      with the package in place (PYTHONPATH=python);
#   3. the same tests in a venv of the PATH's python3 with PyTorch 2.x,
#      torchvision and NumPy 2 (scripts/setup_venv.sh), against galley's
#      self-contained wheel (scripts/build_wheel.sh: `pip wheel`, then
#      `auditwheel repair`) installed with pip;
#   4. the same wheel in a minimal Debian root that has nothing but python3
#      (tests/install/check_wheel_minimal_root.sh; needs root for chroot; the
#      root is made once by debootstrap and cached in ~/.cache/galley);
#   5. the install tree, a C++ consumer (find_package and pkg-config) and the
#      .deb (tests/install/check_install.sh).
# Safe to re-run; set GALLEY_VENV to use another venv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_BUILD_DIR:-$ROOT/build}"
GALLEYD="$BUILD_DIR/server/daemon/galleyd"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"

echo "== ctest"
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900 -j 2)

echo "== pytest: Debian's /usr/bin/python3, galley in place"
/usr/bin/python3 -c "import sys, torch, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__)"
GALLEYD="$GALLEYD" PYTHONPATH="$ROOT/python" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider "$ROOT/tests/python"

echo "== pytest: a venv with galley installed by pip"
VENV="$("$ROOT/scripts/setup_venv.sh")"
WHEEL="$(GALLEY_WHEEL_DIR="$BUILD_DIR/wheels" "$ROOT/scripts/build_wheel.sh" | tail -1)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
  "$WHEEL" 2> >(grep -v "^WARNING: Location" >&2)
"$VENV/bin/python" -c "import sys, torch, numpy, galley; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__, 'galley', galley.__version__)"
echo "wheel: $(basename "$WHEEL"), $(du -k "$WHEEL" | cut -f1) KiB"
# From outside the clone, so only the installed package can be imported.
(cd "$BUILD_DIR" && GALLEYD="$GALLEYD" GALLEY_EXPECT_INSTALLED=1 \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/tests/python")

echo "== the wheel in a minimal Debian root"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO "$ROOT/tests/install/check_wheel_minimal_root.sh" "$WHEEL"

echo "== install tree, C++ consumer, .deb"
"$ROOT/tests/install/check_install.sh" "$BUILD_DIR"
echo "== all tests passed"
