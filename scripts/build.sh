#!/usr/bin/env bash
# Configures and builds airlock into build/ (or $BUILD_DIR). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
ninja -C "$build_dir" -j"$(nproc)"
# ./airlock is the default (non-sanitized) build's binary.
if [ "$build_dir" = build ]; then ln -sf build/src/cli/airlock airlock; fi
