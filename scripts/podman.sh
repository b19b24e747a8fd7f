# Sourced by scripts/image.sh and scripts/deb.sh: podman as this kind of host
# needs it, the local base image, and the grants a container needs to run
# airlock with every layer (measured: docs/deploy.md, "What a container must grant").

# crun refuses hybrid cgroup v1 hosts ("cgroups in hybrid mode not supported"):
# runc with the cgroupfs manager works everywhere. Override with PODMAN="podman".
PODMAN=${PODMAN:-podman --runtime runc --cgroup-manager cgroupfs}
# The Containerfile's FROM; with --pull=never podman finds it under this name.
BASE_IMAGE=docker.io/library/debian:bookworm-slim
# The default ulimits fail here ("setrlimit RLIMIT_NOFILE: Operation not permitted": the
# host's hard limit is 20000). nproc must leave room for the zygotes' RLIMIT_NPROC (4096
# or 4x a profile's pids): airlock has no CAP_SYS_RESOURCE to raise a hard limit.
ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)

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

# The smallest set of options with which every layer works (measured by
# `scripts/image.sh grants` on podman 4.3 + runc 1.1, kernel 6.18, cgroup v1;
# docs/deploy.md has the table and what each one is for):
#   --cgroupns=private     the container sees only its own cgroup subtree, which the
#                          entrypoint remounts read-write for the runs' cgroups
#   --cap-drop=all --cap-add=SYS_ADMIN,SETUID,SETGID
#                          SYS_ADMIN: that remount, and the runtime's seccomp profile
#                          allows sethostname only with it; SETUID/SETGID: each run's
#                          uid/gid map to 65534
#   --security-opt unmask=/proc/*   each run mounts its own /proc: a masked one forbids it
GRANTS=(--cgroupns=private --cap-drop=all --cap-add=SYS_ADMIN,SETUID,SETGID --security-opt 'unmask=/proc/*')
# Use as "${ULIMITS[@]}" "${GRANTS[@]}" (quoted: unmask=/proc/* must not be globbed).

# The tree's entrypoint in place of the image's (tests and measurements then hold
# for the entrypoint being committed, even with an image built before it). Outside
# /usr: a mount under /usr makes the runs' read-only bind of /usr fail (EINVAL).
ENTRYPOINT_FROM_TREE=(-v "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/deploy/entrypoint.sh:/opt/airlock-entrypoint:ro"
                      --entrypoint /opt/airlock-entrypoint)
