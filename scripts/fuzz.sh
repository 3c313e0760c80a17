#!/usr/bin/env bash
# Builds galley's libFuzzer targets with clang (ASan + UBSan) into
# build-fuzz/ and runs each for a bounded time, starting from the seed corpus
# committed under tests/fuzz/corpus. New inputs go to build-fuzz/corpus/<name>
# (merge interesting ones into the committed corpus by hand); a crash leaves
# its reproducer in build-fuzz/crashes/ and makes the script fail.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   default: 60 s each for frame_fuzzer segment_fuzzer image_decoder_fuzzer s3_reply_fuzzer
#
# Needs clang-14 and libclang-rt-14-dev (Debian). The ordinary build replays
# the committed corpus through the same targets as ctest tests *_corpus.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${GALLEY_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(frame_fuzzer segment_fuzzer image_decoder_fuzzer s3_reply_fuzzer)
CC_BIN="${CC:-clang-14}"
CXX_BIN="${CXX:-clang++-14}"
command -v "$CXX_BIN" >/dev/null || { echo "fuzz.sh: $CXX_BIN not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
GENERATOR=()
command -v ninja >/dev/null 2>&1 && GENERATOR=(-G Ninja)
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -g -O1"
  cmake -S "$ROOT" -B "$BUILD" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
    -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_CXX_FLAGS="$FLAGS" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF \
    -DGALLEY_FUZZ=ON -DGALLEY_BUILD_PYTHON=OFF -DGALLEY_BUILD_BENCH=OFF
fi
cmake --build "$BUILD" --parallel "$(nproc)" --target "${TARGETS[@]}"
mkdir -p "$BUILD/crashes"
status=0
for target in "${TARGETS[@]}"; do
  seeds="$ROOT/tests/fuzz/corpus/${target%_fuzzer}"
  [[ "$target" == image_decoder_fuzzer ]] && seeds="$ROOT/tests/fuzz/corpus/image"
  work="$BUILD/corpus/$target"
  mkdir -p "$work"
  echo "== $target: ${SECONDS_PER_TARGET}s from $seeds"
  # rss_limit bounds what one input may cost: the decoders must refuse bombs
  # from their headers, well below it.
  if ! "$BUILD/tests/$target" "$work" "$seeds" -max_total_time="$SECONDS_PER_TARGET" \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$BUILD/crashes/$target-" 2>"$BUILD/$target.log"; then
    echo "$target FAILED; see $BUILD/$target.log and $BUILD/crashes/" >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs" "$BUILD/$target.log" || true
done
exit $status
