#!/usr/bin/env bash
# galley's main job, from a fresh machine: installs what it needs, builds,
# makes an ImageNet-like demo dataset, starts galleyd, runs several concurrent
# training-style jobs against it, then the same jobs through PyTorch's
# DataLoader (2 workers each; one epoch, since it is slower), and prints both
# sides' images/s, the ratio and what galleyd's loads per request mean. It
# writes a plot of each job's images/s over time to results/run.png.
#
#   scripts/run.sh [--jobs N] [--images N] [--batch-size N] [--epochs N] [--torch-epochs N]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GALLEY_BUILD_DIR:-$ROOT/build}"
JOBS=4
IMAGES=2000
BATCH=64
EPOCHS=2
TORCH_EPOCHS=1
while (($#)); do
  case "$1" in
    --jobs) JOBS="$2"; shift 2 ;;
    --images) IMAGES="$2"; shift 2 ;;
    --batch-size) BATCH="$2"; shift 2 ;;
    --epochs) EPOCHS="$2"; shift 2 ;;
    --torch-epochs) TORCH_EPOCHS="$2"; shift 2 ;;
    *) echo "usage: $0 [--jobs N] [--images N] [--batch-size N] [--epochs N] [--torch-epochs N]" >&2
       exit 2 ;;
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
  --socket "$SOCKET" --daemon-pid "$DAEMON" --dataset "$DATA" --jobs "$JOBS" \
  --batch-size "$BATCH" --epochs "$EPOCHS" --torch-epochs "$TORCH_EPOCHS" \
  --plot "$ROOT/results/run.png"
echo
"$BUILD_DIR/server/daemon/galleyctl" --socket "$SOCKET" datasets
