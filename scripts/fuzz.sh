#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes each for a
# short while from its seed corpus (copied, so the repo is not modified).
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     default 30
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
build_dir=build-fuzz
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DAIRLOCK_FUZZ=ON >/dev/null
ninja -C "$build_dir" -j"$(nproc)" analyzer_fuzz profile_fuzz request_fuzz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
declare -A corpus=([analyzer_fuzz]=tests/fuzz/corpus/analyzer [profile_fuzz]=profiles [request_fuzz]=tests/fuzz/corpus/request)
for target in analyzer_fuzz profile_fuzz request_fuzz; do
  mkdir -p "$work/$target"
  cp -r "${corpus[$target]}"/. "$work/$target/"
  echo "fuzz: $target for ${seconds}s"
  "$build_dir/tests/fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$work/" "$work/$target" 2>&1 | tail -n 3
done
echo "fuzz: no crash in any target"
