#!/usr/bin/env bash
# The proof of a wheel's manylinux tag beyond its name: for every ELF file in
# the wheel (galleyd, galleyctl, the extension, any bundled library), the
# highest GLIBC_ and GLIBCXX_/CXXABI_ symbol versions it needs, from
# `objdump -T` (aarch64-linux-gnu-objdump for aarch64). Fails if any needs
# glibc newer than the tag's (2.28 for manylinux_2_28) or any libstdc++ at
# all: the wheels link libc++ statically.
#
#   tests/install/check_wheel_glibc.sh WHEEL...
set -euo pipefail
status=0
for wheel in "$@"; do
  tag="$(basename "$wheel" .whl | grep -o 'manylinux_[0-9]*_[0-9]*' | head -1)"
  if [[ -z "$tag" ]]; then
    echo "check_wheel_glibc: $(basename "$wheel") has no manylinux tag" >&2
    exit 1
  fi
  objdump=objdump  # the build machine's, for x86_64
  if [[ "$(basename "$wheel")" == *aarch64* ]]; then objdump=aarch64-linux-gnu-objdump; fi
  limit="$(echo "$tag" | sed 's/manylinux_\([0-9]*\)_\([0-9]*\)/\1.\2/')"
  work="$(mktemp -d -t galley-glibc.XXXXXX)"
  python3 -m zipfile -e "$wheel" "$work"
  echo "$(basename "$wheel"): needs at most GLIBC_$limit"
  while IFS= read -r -d '' file; do
    [[ "$(head -c 4 "$file" | od -An -c | tr -d ' ')" == '177ELF' ]] || continue
    # Only what the file imports (*UND*) counts, not what it defines.
    needed="$("$objdump" -T "$file" | awk '/\*UND\*/ { print $(NF-1), $NF }')"
    glibc="$(grep -o 'GLIBC_[0-9.]*' <<<"$needed" | sed 's/GLIBC_//' | sort -uV | tail -1)"
    cxx="$(grep -oE '(GLIBCXX|CXXABI)_[0-9.]*' <<<"$needed" | sort -uV | tail -1 || true)"
    printf '  %-48s GLIBC_%-6s %s\n' "${file#"$work"/}" "${glibc:-none}" "${cxx:-no libstdc++}"
    if [[ -n "$glibc" ]] && [[ "$(printf '%s\n%s\n' "$glibc" "$limit" | sort -V | tail -1)" != "$limit" ]]; then
      echo "check_wheel_glibc: ${file#"$work"/} needs GLIBC_$glibc, above $tag's $limit" >&2
      status=1
    fi
    if [[ -n "$cxx" ]]; then
      echo "check_wheel_glibc: ${file#"$work"/} needs the system's libstdc++ ($cxx)" >&2
      status=1
    fi
  done < <(find "$work" -type f -print0 | sort -z)
  rm -rf "$work"
done
exit "$status"
