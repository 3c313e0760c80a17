#!/usr/bin/env bash
# The self-contained wheel runs where nothing else is installed: a minimal
# Debian root (debootstrap --variant=minbase with python3 and python3-venv
# only; cached outside the clone) gets a venv with the repaired wheel, and a
# torch-free job inside it starts the wheel's own galleyd (autostart, no
# GALLEYD set) and reads one epoch of JPEG, PNG and BMP files, exactly once. `ldd` on the host would not
# catch a library the minimal system lacks; this does.
#
# The root is Debian 12 (bookworm: glibc 2.36, Python 3.11) unless SUITE names
# another; bullseye (Debian 11: glibc 2.31, Python 3.9) is the oldest the
# archive serves, below the manylinux_2_35 of a wheel built on Debian 12.
#
#   tests/install/check_wheel_minimal_root.sh WHEEL [SUITE]   (needs root: chroot)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WHEEL="$(realpath "$1")"
SUITE="${2:-bookworm}"
ROOTFS="${GALLEY_MINIMAL_ROOT:-$HOME/.cache/galley/debootstrap-$SUITE}"
MIRROR="${GALLEY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if [[ ! -f "$ROOTFS/.galley-minimal-root" ]]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
  rm -rf "$ROOTFS"
  mkdir -p "$(dirname "$ROOTFS")"
  debootstrap --variant=minbase --include=python3,python3-venv "$SUITE" "$ROOTFS" "$MIRROR" \
    >"$ROOTFS.log" 2>&1 || { tail -20 "$ROOTFS.log" >&2; exit 1; }
  rm -f "$ROOTFS"/var/cache/apt/archives/*.deb  # 45 MB the cached root does not need
  touch "$ROOTFS/.galley-minimal-root"
fi
# The point of the exercise: no X11 (auditwheel counts libX11 as part of the
# manylinux baseline and never bundles it).
if compgen -G "$ROOTFS/usr/lib/x86_64-linux-gnu/libX11.so*" >/dev/null; then
  echo "check_wheel_minimal_root: $ROOTFS has libX11; it must be a minimal root" >&2
  exit 1
fi
WORK="$ROOTFS/tmp/galley-check"
rm -rf "$WORK"
mkdir -p "$WORK/data"
cp "$WHEEL" "$WORK/"
/usr/bin/python3 "$ROOT/tests/install/wheel_job.py" make "$WORK/data"
cp "$ROOT/tests/install/wheel_job.py" "$WORK/"
unshare --mount --fork sh -c "
  set -e
  mount -t proc proc '$ROOTFS/proc'
  mkdir -p '$ROOTFS/dev/shm' && mount -t tmpfs tmpfs '$ROOTFS/dev/shm'
  exec chroot '$ROOTFS' /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root /bin/sh -c '
    set -e
    python3 -m venv /tmp/galley-check/venv
    /tmp/galley-check/venv/bin/pip install -q --no-index /tmp/galley-check/$(basename "$WHEEL")
    /tmp/galley-check/venv/bin/python /tmp/galley-check/wheel_job.py run /tmp/galley-check/data
    test -x /tmp/galley-check/venv/bin/galleyctl
    /tmp/galley-check/venv/bin/galleyctl --version
    /tmp/galley-check/venv/bin/galleyctl stop
  '
"
rm -rf "$WORK"
echo "check_wheel_minimal_root: ok ($SUITE)"
