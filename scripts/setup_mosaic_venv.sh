#!/bin/bash
# Creates (once) the venv bench/object_store.py runs Mosaic Streaming in:
# ~/.cache/galley/venv-mosaic, with mosaicml-streaming and torch 2.13 CPU.
# Its own venv because mosaicml-streaming pins numpy<2.2, which the test
# venv (venv-torch2.14) does not hold. Running it again does nothing once
# streaming imports there.
set -euo pipefail
VENV="${GALLEY_MOSAIC_VENV:-$HOME/.cache/galley/venv-mosaic}"
PYTHON="${PYTHON:-/usr/bin/python3}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c \
    'import importlib.util, sys; sys.exit(importlib.util.find_spec("streaming") is None)'; then
  echo "$VENV already holds mosaicml-streaming"
  exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet torch==2.13.0 mosaicml-streaming
echo "mosaicml-streaming installed in $VENV"
