#!/usr/bin/env bash
# AIRLOCK_BINARY for tests/e2e that runs airlock inside the image, with the
# grants of scripts/podman.sh (scripts/image.sh test sets it):
#   AIRLOCK_BINARY=$PWD/tests/deploy/airlock_in_container.sh python3 -m unittest test_http_contract
# Host networking (the suite connects to 127.0.0.1:<port>); /tmp and the
# --profiles directory are mounted at the same paths (audit logs, custom
# profiles); the caller's environment is passed in (the kernel attacks check
# that a server secret does not reach runs). SIGTERM reaches airlock through
# podman's signal proxy, and podman exits with airlock's exit code. The tree's
# deploy/entrypoint.sh (mounted outside /usr: a mount under /usr breaks the
# runs' read-only bind of /usr) remounts the container's cgroups, then execs
# the image's airlock with exactly these arguments.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
source "$here/scripts/podman.sh"
IMAGE=${AIRLOCK_IMAGE:-localhost/airlock:0.1.0}
mounts=(-v /tmp:/tmp)
prev=""
for a in "$@"; do
  if [ "$prev" = --profiles ]; then mounts+=(-v "$a:$a:ro"); fi
  prev=$a
done
exec $PODMAN run --rm -i --network host --env-host --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  "${mounts[@]}" "${ULIMITS[@]}" "${GRANTS[@]}" \
  "${ENTRYPOINT_FROM_TREE[@]}" \
  "$IMAGE" airlock "$@"
