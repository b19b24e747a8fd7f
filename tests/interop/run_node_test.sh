#!/usr/bin/env bash
# Runs one node:test file of tests/interop. Without node or the pinned packages
# (scripts/setup.sh installs both) it skips (exit 77), or fails under
# AIRLOCK_MUST_WORK=1, where every client must really have run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
missing=""
command -v node >/dev/null || missing="node is not installed"
for pkg in @modelcontextprotocol/sdk @e2b/code-interpreter; do
  [ -n "$missing" ] || [ -d "$here/node_modules/$pkg" ] ||
    missing="the pinned npm clients are not installed ($pkg; cd tests/interop && npm ci)"
done
if [ -n "$missing" ]; then
  echo "interop: $missing" >&2
  [ "${AIRLOCK_MUST_WORK:-}" = 1 ] && exit 1
  exit 77
fi
exec node --test "$@"
