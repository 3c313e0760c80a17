#!/usr/bin/env bash
# An aarch64 wheel served end to end on an x86_64 machine, under Debian's
# qemu-user-static: the arm64 CPython of a Debian 12 arm64 root runs the job
# of tests/install/wheel_job.py, and the job starts the wheel's own aarch64
# galleyd, also under qemu (GALLEYD names a wrapper that runs it there).
# Slow (every instruction emulated); it shows the wheel works, not how fast.
#
#   tests/install/check_wheel_qemu_aarch64.sh WHEEL     # the cp311 aarch64 wheel; needs root
#
# binfmt_misc need not be mounted: nothing arm64 is started by the kernel,
# every arm64 program runs as `qemu-aarch64-static -L ROOT program`. So the
# root is debootstrap's first stage alone (--foreign), with every package of
# it unpacked by dpkg-deb: the second stage would run dpkg inside the root,
# and each program dpkg starts there would be an arm64 binary the kernel
# cannot run without binfmt_misc. Nothing in the root needs configuring for
# Python to run. The root is cached in ~/.cache/galley/debootstrap-bookworm-arm64.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WHEEL="$(realpath "$1")"
ROOTFS="${GALLEY_ARM64_ROOT:-$HOME/.cache/galley/debootstrap-bookworm-arm64}"
MIRROR="${GALLEY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
QEMU="$(command -v qemu-aarch64-static || true)"
if [[ -z "$QEMU" ]]; then
  echo "check_wheel_qemu_aarch64: qemu-aarch64-static is missing (apt-get install qemu-user-static)" >&2
  exit 1
fi
if [[ ! -f "$ROOTFS/.galley-arm64-root" ]]; then
  rm -rf "$ROOTFS"
  mkdir -p "$(dirname "$ROOTFS")"
  debootstrap --foreign --arch arm64 --variant=minbase --include=python3 bookworm "$ROOTFS" "$MIRROR" \
    >"$ROOTFS.log" 2>&1 || { tail -20 "$ROOTFS.log" >&2; exit 1; }
  for deb in "$ROOTFS"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$ROOTFS"; done
  rm -f "$ROOTFS"/var/cache/apt/archives/*.deb
  touch "$ROOTFS/.galley-arm64-root"
fi
PYTHON="$(cd "$ROOTFS/usr/bin" && ls python3.[0-9]* | grep -E '^python3\.[0-9]+$' | head -1)"
WORK="$(mktemp -d -t galley-qemu.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
# The wheel unpacked for the root's Python, by this machine's pip.
python3 -m pip install -q --disable-pip-version-check --no-deps --no-index --only-binary=:all: \
  --platform manylinux_2_28_aarch64 --implementation cp \
  --python-version "${PYTHON#python}" --target "$WORK/site" "$WHEEL" 2> >(grep -v "^WARNING: Location" >&2)
file "$WORK/site/galley/bin/galleyd" | grep -q "ARM aarch64" ||
  { echo "check_wheel_qemu_aarch64: the wheel's galleyd is not an aarch64 program" >&2; exit 1; }
/usr/bin/python3 "$ROOT/tests/install/wheel_job.py" make "$WORK/data"
printf '#!/bin/sh\nexec "%s" -L "%s" "%s" "$@"\n' "$QEMU" "$ROOTFS" "$WORK/site/galley/bin/galleyd" \
  >"$WORK/galleyd"
chmod +x "$WORK/galleyd"
run_arm64() { env -i PATH=/usr/bin:/bin HOME="$WORK" "$@"; }
run_arm64 GALLEYD="$WORK/galleyd" PYTHONPATH="$WORK/site" XDG_RUNTIME_DIR="$WORK" \
  "$QEMU" -L "$ROOTFS" "$ROOTFS/usr/bin/$PYTHON" "$ROOT/tests/install/wheel_job.py" run "$WORK/data"
run_arm64 "$QEMU" -L "$ROOTFS" "$WORK/site/galley/bin/galleyctl" --version
run_arm64 XDG_RUNTIME_DIR="$WORK" "$QEMU" -L "$ROOTFS" "$WORK/site/galley/bin/galleyctl" stop
echo "check_wheel_qemu_aarch64: ok"
