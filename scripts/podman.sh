# Sourced by scripts/image.sh and scripts/deb.sh: podman as this kind of host
# needs it, the local base image, and the grants a container needs to run
# airlock with every layer (measured: docs/deploy.md, "What a container must grant").

# crun refuses hybrid cgroup v1 hosts ("cgroups in hybrid mode not supported"):
# runc with the cgroupfs manager works everywhere. Override with PODMAN="podman".
PODMAN=${PODMAN:-podman --runtime runc --cgroup-manager cgroupfs}
# The Containerfile's FROM; with --pull=never podman finds it under this name.
BASE_IMAGE=docker.io/library/debian:bookworm-slim
# The default ulimits fail here ("setrlimit RLIMIT_NOFILE: Operation not permitted").
ULIMITS=(--ulimit nofile=1024:20000 --ulimit nproc=4096:4096)

podman_() {
  # shellcheck disable=SC2086
  $PODMAN "$@"
}

# Makes the base image from Debian's archive when it is absent (no registry is
# needed): a minbase bookworm imported under the name the Containerfile uses.
ensure_base_image() {
  if podman_ image exists "$BASE_IMAGE"; then return 0; fi
  command -v mmdebstrap >/dev/null || { echo "podman.sh: mmdebstrap is needed to make $BASE_IMAGE (apt-get install mmdebstrap)" >&2; return 1; }
  echo "podman.sh: making $BASE_IMAGE with mmdebstrap (Debian's archive)" >&2
  mmdebstrap --variant=minbase --quiet bookworm - | podman_ import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
}

# The smallest set of options with which every layer works (measured on podman
# 4.3 + runc 1.1, kernel 6.18, cgroup v1; docs/deploy.md has the table):
container_grants() {
  echo "${ULIMITS[@]}" GRANTS_TO_MEASURE
}
