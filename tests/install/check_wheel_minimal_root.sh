#!/usr/bin/env bash
# The self-contained wheel runs where nothing else is installed: a minimal
# Debian root (debootstrap --variant=minbase with python3 and python3-venv
# only; cached outside the clone) gets a venv with the repaired wheel, and a
# torch-free job inside it starts the wheel's own galleyd (autostart, no
# GALLEYD set) and reads one epoch of JPEG, PNG and BMP files, exactly once. `ldd` on the host would not
# catch a library the minimal system lacks; this does.
#
#   tests/install/check_wheel_minimal_root.sh WHEEL       (needs root: chroot)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WHEEL="$(realpath "$1")"
ROOTFS="${GALLEY_MINIMAL_ROOT:-$HOME/.cache/galley/debootstrap-bookworm}"
MIRROR="${GALLEY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if [[ ! -f "$ROOTFS/.galley-minimal-root" ]]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
  rm -rf "$ROOTFS"
  mkdir -p "$(dirname "$ROOTFS")"
  debootstrap --variant=minbase --include=python3,python3-venv bookworm "$ROOTFS" "$MIRROR" \
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
/usr/bin/python3 - "$WORK/data" <<'PY'
import pathlib, sys
from PIL import Image
root = pathlib.Path(sys.argv[1])
# One class per decoder in the wheel: TurboJPEG, libpng, the BMP reader.
for c, ext in enumerate(("jpg", "png", "bmp")):
    (root / f"c{c}").mkdir(parents=True)
    for i in range(7):
        Image.new("RGB", (40 + 3 * i, 36), (80 * c, 30 * i, 120)).save(root / f"c{c}" / f"{i}.{ext}")
PY
cat >"$WORK/job.py" <<'PY'
# One epoch through the low-level client, without torch.
import array, json, sys
import galley
from galley import _autostart, transforms as T
client = _autostart.client(None, True)
spec = {"dataset": "/tmp/galley-check/data", "batch_size": 5, "epochs": 1, "shuffle": True,
        "transform_json": json.dumps(T.build_spec(T.Compose([T.Resize(32), T.CenterCrop(32)])))}
job = client.open_job(spec)
ids = []
while True:
    memory, labels, item_ids, meta = job.next(60)
    ids.extend(array.array("q", bytes(item_ids)))
    assert memoryview(memory).nbytes == len(labels) // 8 * 3 * 32 * 32
    if meta["last_in_epoch"]:
        break
assert sorted(ids) == list(range(21)), ids
status = galley.query("status")
print("ok", galley.__version__, status["version"], status["socket"])
PY
unshare --mount --fork sh -c "
  set -e
  mount -t proc proc '$ROOTFS/proc'
  mkdir -p '$ROOTFS/dev/shm' && mount -t tmpfs tmpfs '$ROOTFS/dev/shm'
  exec chroot '$ROOTFS' /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root /bin/sh -c '
    set -e
    python3 -m venv /tmp/galley-check/venv
    /tmp/galley-check/venv/bin/pip install -q --no-index /tmp/galley-check/$(basename "$WHEEL")
    /tmp/galley-check/venv/bin/python /tmp/galley-check/job.py
    test -x /tmp/galley-check/venv/bin/galleyctl
    /tmp/galley-check/venv/bin/galleyctl --version
    /tmp/galley-check/venv/bin/galleyctl stop
  '
"
rm -rf "$WORK"
echo "check_wheel_minimal_root: ok"
