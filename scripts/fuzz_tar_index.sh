#!/usr/bin/env bash
# Fuzzes the tar indexer (server/dataset/tar_index.cc) with libFuzzer under
# AddressSanitizer and UBSan. Arguments go to the fuzzer, e.g.
#   scripts/fuzz_tar_index.sh -max_total_time=600
# Seeds: small tars made with Python's tarfile (ustar, GNU, PAX).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${GALLEY_FUZZ_DIR:-$ROOT/build/fuzz}"
CXX="${CXX_FUZZ:-$(command -v clang++ || command -v clang++-14)}"
mkdir -p "$OUT/corpus"
"$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I "$ROOT/server/dataset/include" \
  -I "$ROOT/client/common/include" \
  "$ROOT/tests/fuzz/tar_index_fuzz.cc" "$ROOT/server/dataset/tar_index.cc" \
  "$ROOT/client/common/src/status.cc" -o "$OUT/tar_index_fuzz"
python3 - "$OUT/corpus" <<'PY'
import io, sys, tarfile
for fmt, name in ((tarfile.USTAR_FORMAT, "ustar"), (tarfile.GNU_FORMAT, "gnu"),
                  (tarfile.PAX_FORMAT, "pax")):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for i, member in enumerate(["a.jpg", "a.cls", "d" * 120 + "/b.jpg", "b.cls"]):
            info = tarfile.TarInfo(member)
            data = bytes([i]) * (i * 300)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    open(f"{sys.argv[1]}/seed-{name}.tar", "wb").write(buf.getvalue())
PY
exec "$OUT/tar_index_fuzz" "$OUT/corpus" "$@"
