#!/usr/bin/env bash
# Installs everything airlock needs to build, run and test, from Debian 12's
# archive only (nothing is downloaded from anywhere else). Run as root.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it calls apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  # build
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  libseccomp-dev libre2-dev libyaml-cpp-dev nlohmann-json3-dev libboost-dev libcli11-dev python3-dev
  # zlib: gzip upload bodies (Content-Encoding: gzip) inflated as they arrive (src/model/gzip_inflate.h)
  zlib1g-dev
  # the warm runs' init program is built against musl: its start-up runs no CPUID
  # (src/isolation/CMakeLists.txt; without it, glibc and ~0.3 ms more per warm run)
  musl-tools
  # tests
  libgtest-dev libgmock-dev googletest libbenchmark-dev python3-httpx
  # GET /v1/tools schemas validated as JSON Schema (tests/e2e/test_tool_schemas.py)
  python3-jsonschema
  # deployment tests (tests/deploy): rendered manifests read with PyYAML; nginx runs
  # the session routing config
  python3-yaml nginx-light
  # the web console's browser test (tests/e2e/test_console.py): headless Chromium
  # driven by Selenium
  chromium chromium-driver python3-selenium
  # what sandboxed programs use (the data-science and visualization profiles); PIL
  # (matplotlib's own dependency) is named too: images are shown as PNG (docs/api.md, Cells)
  python3 python3-numpy python3-pandas python3-scipy python3-matplotlib python3-pil
  # the interpreters of sessions in other languages (issue 22; docs/api.md, Sessions):
  # TypeScript's compiler for node (node runs it inside the sandbox), R, and Java's JShell
  node-typescript r-base-core default-jdk-headless
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# `kubectl kustomize` renders deploy/k8s (tests/deploy): Debian's kubernetes-client,
# unless a kubectl is already installed (another package's kubectl conflicts with it).
command -v kubectl >/dev/null || missing+=(kubernetes-client)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# JavaScript runs use /usr/bin/node (the sandbox binds the host's /usr), and the
# interop tests drive real clients from the npm registry, pinned in
# tests/interop/package-lock.json (Node >= 18: Debian 12's nodejs will do; a
# node already in /usr/bin is kept).
if [ ! -x /usr/bin/node ] || ! command -v npm >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm
fi
interop="$(cd "$(dirname "$0")/.." && pwd)/tests/interop"
if [ ! -f "$interop/node_modules/.package-lock.json" ] ||
   [ "$interop/package-lock.json" -nt "$interop/node_modules/.package-lock.json" ]; then
  (cd "$interop" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup.sh: all packages present"
