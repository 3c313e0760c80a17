#!/usr/bin/env bash
# galley's main job, from a fresh machine: installs what it needs, builds,
# makes an ImageNet-like demo dataset, starts galleyd, runs several concurrent
# training-style jobs against it and prints per-job and total images/s.
#
#   scripts/run.sh [--jobs N] [--images N] [--batch-size N] [--epochs N]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_BUILD_DIR:-$ROOT/build}"
JOBS=4
IMAGES=2000
BATCH=64
EPOCHS=2
while (($#)); do
  case "$1" in
    --jobs) JOBS="$2"; shift 2 ;;
    --images) IMAGES="$2"; shift 2 ;;
    --batch-size) BATCH="$2"; shift 2 ;;
    --epochs) EPOCHS="$2"; shift 2 ;;
    *) echo "usage: $0 [--jobs N] [--images N] [--batch-size N] [--epochs N]" >&2; exit 2 ;;
  esac
done

"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh" galleyd galleyctl _galley

DATA="$ROOT/.demo/imagenet-like-$IMAGES"
/usr/bin/python3 "$ROOT/scripts/make_demo_dataset.py" "$DATA" --images "$IMAGES" --classes 10

RUN_DIR="$(mktemp -d -t galley-run.XXXXXX)"
SOCKET="$RUN_DIR/galleyd.sock"
"$BUILD_DIR/server/daemon/galleyd" --socket "$SOCKET" --allowed-root "$ROOT/.demo" \
  >"$RUN_DIR/galleyd.log" 2>&1 &
DAEMON=$!
cleanup() {
  kill -TERM "$DAEMON" 2>/dev/null || true
  wait "$DAEMON" 2>/dev/null || true
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT
for _ in $(seq 100); do [[ -S "$SOCKET" ]] && break; sleep 0.1; done

PYTHONPATH="$ROOT/python" /usr/bin/python3 "$ROOT/scripts/demo_jobs.py" \
  --socket "$SOCKET" --dataset "$DATA" --jobs "$JOBS" --batch-size "$BATCH" --epochs "$EPOCHS"
echo
"$BUILD_DIR/server/daemon/galleyctl" --socket "$SOCKET" datasets
