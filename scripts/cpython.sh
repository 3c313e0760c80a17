# Sourced by the wheel scripts: cpython_for 3.X prints that CPython's
# interpreter, from pyenv ($PYENV_ROOT, default ~/.pyenv: the newest
# versions/3.X.*) or a python3.X on PATH that runs, or says what to install
# and returns 1. Safe under `set -euo pipefail`: a version pyenv lacks is a
# message, not a silent exit.
cpython_for() {
  local found="" candidate
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python3; do
    [[ -x "$candidate" ]] || continue
    if [[ -z "$found" ]] ||
      [[ "$(printf '%s\n%s\n' "$found" "$candidate" | sort -V | tail -1)" == "$candidate" ]]; then
      found="$candidate"
    fi
  done
  # A pyenv shim on PATH answers only for the versions pyenv selects: ask it.
  if [[ -z "$found" ]] && command -v "python$1" > /dev/null &&
    "python$1" -c '' 2> /dev/null; then
    found="$(command -v "python$1")"
  fi
  if [[ -z "$found" ]]; then
    echo "no CPython $1 (pyenv install $1, or put python$1 on PATH)" >&2
    return 1
  fi
  echo "$found"
}
