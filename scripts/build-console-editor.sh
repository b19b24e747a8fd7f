#!/usr/bin/env bash
# Rebuilds the console's code editor bundle, src/api/console/editor.js, from the
# npm packages pinned in tools/console-editor/package-lock.json (CodeMirror 6 and
# esbuild). The bundle is committed: building or running airlock never needs npm
# or the network; run this only to update the editor (then commit the bundle).
set -euo pipefail
cd "$(dirname "$0")/../tools/console-editor"
npm ci --no-audit --no-fund --loglevel=error
./node_modules/.bin/esbuild editor.mjs --bundle --minify --format=iife --target=es2020 --charset=ascii \
  --legal-comments=eof --outfile=../../src/api/console/editor.js
# The console is embedded as raw string literals (src/api/embed_console.cmake):
# no NUL byte may be in it.
if LC_ALL=C grep -qP '\x00' ../../src/api/console/editor.js; then
  echo "build-console-editor.sh: the bundle holds a NUL byte; it cannot be embedded" >&2
  exit 1
fi
echo "src/api/console/editor.js: $(wc -c < ../../src/api/console/editor.js) bytes"
