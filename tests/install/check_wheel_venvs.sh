#!/usr/bin/env bash
# Each wheel in a fresh venv of the CPython it is for (its cp3X tag; from
# pyenv, $PYENV_ROOT or ~/.pyenv, or python3.X on PATH: scripts/cpython.sh): pip installs it
# offline, `import galley` loads the extension, and the bundled galleyctl
# runs. Prints the install time of each.
#
#   tests/install/check_wheel_venvs.sh WHEEL...
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/cpython.sh"
WORK="$(mktemp -d -t galley-venvs.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
for wheel in "$@"; do
  name="$(basename "$wheel")"
  tag="$(grep -o -- '-cp3[0-9]*-' <<<"$name" | head -1 | tr -d '-')"
  version="3.${tag#cp3}"
  if ! python="$(cpython_for "$version")"; then
    echo "check_wheel_venvs: no CPython $version for $name" >&2
    exit 1
  fi
  venv="$WORK/$tag"
  "$python" -m venv "$venv"
  start="$(date +%s.%N)"
  "$venv/bin/python" -m pip install -q --no-index --disable-pip-version-check "$wheel" \
    2> >(grep -v "^WARNING: Location" >&2)
  seconds="$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  (cd "$WORK" && "$venv/bin/python" -c \
    "import sys, galley; print(sys.version.split()[0], 'galley', galley.__version__, 'protocol', galley.protocol_version)")
  "$venv/bin/galleyctl" --version
  echo "check_wheel_venvs: $name installed in $seconds s"
done
