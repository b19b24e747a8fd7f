#!/usr/bin/env bash
# Builds airlock's OCI image and tests it (docs/deploy.md, "Image"). Run as root.
#   scripts/image.sh            base image if absent, build, test
#   scripts/image.sh build      base image if absent, build only
#   scripts/image.sh test       test an image already built: `airlock check`, the fips
#                               contract and attacks (tests/e2e) against airlock in a
#                               container, and the Debian package installed with apt in a
#                               fresh container
#   scripts/image.sh grants     measures which container grants each layer needs
#                               (the table of docs/deploy.md)
# Needs podman, runc and mmdebstrap (installed here when absent); no registry:
# the base image is made from Debian's archive. Networking: --network host.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/podman.sh
VERSION=$(sed -n 's/^project(airlock VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
IMAGE=${AIRLOCK_IMAGE:-localhost/airlock:$VERSION}
export AIRLOCK_IMAGE=$IMAGE

need_tools() {
  local missing=()
  for t in podman runc mmdebstrap; do command -v "$t" >/dev/null || missing+=("$t"); done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

build() {
  ensure_base_image
  local t0=$SECONDS
  podman_ build --pull=never --network host --format docker "${ULIMITS[@]}" -t "$IMAGE" -f Containerfile .
  echo "image.sh: built $IMAGE in $((SECONDS - t0)) s" >&2
}

# `airlock check` in the container with the grants: every layer ok, exit 0.
test_check() {
  local out
  out=$(podman_ run --rm --network none "${ULIMITS[@]}" "${GRANTS[@]}" "${ENTRYPOINT_FROM_TREE[@]}" "$IMAGE" check 2>&1 | grep -v 'level=error')
  echo "$out"
  if grep -E '^\S.*\s(missing|failed|error)\s' <<<"$out"; then
    echo "image.sh: a layer is missing in the container" >&2; return 1
  fi
}

# The image as shipped (its own entrypoint and ENV defaults), a token from the
# environment: ready, 401 without the token, a run with every layer, a clean drain.
test_serve() {
  local name=airlock-image-test port=18765
  podman_ rm -f "$name" >/dev/null 2>&1 || true
  podman_ run -d --name "$name" --network host "${ULIMITS[@]}" "${GRANTS[@]}" --read-only \
    -e AIRLOCK_LISTEN=127.0.0.1:$port -e AIRLOCK_TOKENS=test:image-test-token "$IMAGE" >/dev/null
  local ok=0
  python3 - "$port" <<'PY' || ok=1
import json, sys, time, urllib.request, urllib.error
base = f"http://127.0.0.1:{sys.argv[1]}"
deadline = time.monotonic() + 180
while True:
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=5) as r:
            pools = json.load(r).get("pools", {})
        # Ready, and the data-science pool warm (a cold pandas import is slow on a loaded host).
        if pools.get("data-science", {}).get("ready", 0) > 0:
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("image: not ready (or data-science pool not warm) within 180 s")
    time.sleep(0.5)
def post(payload, token=None):
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request(base + "/v1/execute", data=json.dumps(payload).encode(), headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
assert post({"code": "print(1)"})[0] == 401
status, body = post({"code": "import pandas as pd\nprint(pd.Series([1, 2, 3]).sum())", "profile": "data-science",
                     "timeout": 30}, "image-test-token")
assert status == 200 and body["stdout"] == "6\n", body
off = [k for k, v in body["isolation"].items() if isinstance(v, dict) and v.get("enforced") is False]
assert not off, f"layers not enforced in the image: {off}"
print("image.sh: the image serves with every layer enforced")
PY
  podman_ stop -t 30 "$name" >/dev/null
  local code
  code=$(podman_ inspect -f '{{.State.ExitCode}}' "$name")
  if [ "$ok" != 0 ]; then podman_ logs "$name" 2>&1 | tail -20 >&2; fi
  podman_ rm "$name" >/dev/null
  [ "$ok" = 0 ] || return 1
  [ "$code" = 0 ] || { echo "image.sh: airlock exited $code after SIGTERM (expected 0: drained)" >&2; return 1; }
}

# The fips contract and attacks from tests/e2e, with airlock inside the image.
test_e2e() {
  local mode
  for mode in warm cold; do
    (cd tests/e2e && AIRLOCK_BINARY="$PWD/../deploy/airlock_in_container.sh" AIRLOCK_E2E_MODE=$mode \
       AIRLOCK_MUST_WORK=1 PYTHONDONTWRITEBYTECODE=1 \
       python3 -m unittest ${E2E_MODULES:-test_http_contract test_escape_vectors test_kernel_attacks})
  done
}

test_deb() {
  # The package built from build/ (scripts/build.sh), installed with apt in a fresh base container.
  bash scripts/deb.sh --test
}

# One line per configuration: the measured grants minus one, and common
# defaults, each with what `airlock check` says (the table of docs/deploy.md).
measure_grants() {
  local seccomp="seccomp=$PWD/deploy/seccomp/airlock.json"
  local caps="--cap-drop=all"
  local -a configs=(
    "all grants|--cgroupns=private $caps --cap-add=SYS_ADMIN,SETUID,SETGID --security-opt unmask=/proc/*"
    "all grants, read-only root|--read-only --cgroupns=private $caps --cap-add=SYS_ADMIN,SETUID,SETGID --security-opt unmask=/proc/*"
    "no SYS_ADMIN|--cgroupns=private $caps --cap-add=SETUID,SETGID --security-opt unmask=/proc/*"
    "no SYS_ADMIN, degraded=cgroup|--cgroupns=private $caps --cap-add=SETUID,SETGID --security-opt unmask=/proc/* -e AIRLOCK_ALLOW_DEGRADED=cgroup"
    "no SYS_ADMIN, airlock seccomp, degraded=cgroup|--security-opt $seccomp --cgroupns=private $caps --cap-add=SETUID,SETGID --security-opt unmask=/proc/* -e AIRLOCK_ALLOW_DEGRADED=cgroup"
    "no SETUID|--cgroupns=private $caps --cap-add=SYS_ADMIN,SETGID --security-opt unmask=/proc/*"
    "no SETGID|--cgroupns=private $caps --cap-add=SYS_ADMIN,SETUID --security-opt unmask=/proc/*"
    "masked /proc|--cgroupns=private $caps --cap-add=SYS_ADMIN,SETUID,SETGID"
    "host cgroup namespace|--cgroupns=host $caps --cap-add=SYS_ADMIN,SETUID,SETGID --security-opt unmask=/proc/*"
    "user-namespaced container|--uidmap 0:200000:70000 --gidmap 0:200000:70000 --cgroupns=private $caps --cap-add=SYS_ADMIN,SETUID,SETGID --security-opt unmask=/proc/*"
    "user-namespaced, no SYS_ADMIN, airlock seccomp, degraded=cgroup|--uidmap 0:200000:70000 --gidmap 0:200000:70000 --security-opt $seccomp --cgroupns=private $caps --cap-add=SETUID,SETGID --security-opt unmask=/proc/* -e AIRLOCK_ALLOW_DEGRADED=cgroup"
    "podman defaults|"
    "non-root uid 1000, no capabilities, degraded=cgroup|--user 1000:1000 $caps -e AIRLOCK_ALLOW_DEGRADED=cgroup"
  )
  local c name opts out verdict
  for c in "${configs[@]}"; do
    name=${c%%|*}
    opts=${c#*|}
    set -f  # unmask=/proc/* is podman's, not a glob
    # shellcheck disable=SC2086
    out=$(podman_ run --rm --network none "${ULIMITS[@]}" "${ENTRYPOINT_FROM_TREE[@]}" $opts "$IMAGE" check 2>&1 | grep -v 'level=error') || true
    set +f
    if grep -q "with every required layer" <<<"$out"; then verdict=runs; else verdict=refuses; fi
    printf '%s | %s | %s\n' "$name" "$verdict" \
      "$(grep -E '(MISSING|degraded) ' <<<"$out" | sed -E 's/ +/ /g' | cut -c1-150 | paste -sd';' -)"
  done
}

test_all() {
  local t0=$SECONDS
  test_check
  test_serve
  test_e2e
  test_deb
  echo "image.sh: tests passed in $((SECONDS - t0)) s" >&2
}

need_tools
case "${1:-all}" in
  build) build ;;
  test) test_all ;;
  test-serve) test_serve ;;
  grants) measure_grants ;;
  all) build; test_all ;;
  *) echo "usage: scripts/image.sh [build|test|grants|all]" >&2; exit 2 ;;
esac
