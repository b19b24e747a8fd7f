#!/usr/bin/env bash
# The Debian package (docs/deploy.md, "Host install"):
#   scripts/deb.sh            build it from build/ (scripts/build.sh first) into dist/
#   scripts/deb.sh --test     also install it with apt in a fresh Debian 12 container
#                             (podman, the base image of scripts/image.sh) and run
#                             requests against the installed service's entrypoint
# Run as root. Prints the package's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
out=${DEB_OUT:-dist}
[ -f "$build_dir/CPackConfig.cmake" ] || { echo "deb.sh: $build_dir is not configured: run scripts/build.sh" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/airlock_*.deb
ninja -C "$build_dir" airlock >/dev/null
(cd "$build_dir" && cpack -G DEB -B "$out/.cpack" >/dev/null)
mv "$out"/.cpack/airlock_*.deb "$out"/
rm -rf "$out/.cpack"
deb=$(ls "$out"/airlock_*.deb)
if [ "${1:-}" = "--test" ]; then
  source scripts/podman.sh
  ensure_base_image
  echo "deb.sh: installing $deb in a fresh $BASE_IMAGE container" >&2
  # apt and dpkg need the file capabilities airlock does not (CHOWN, DAC_OVERRIDE, FOWNER, FSETID).
  podman_ run --rm --network host "${ULIMITS[@]}" "${GRANTS[@]}" --cap-add=CHOWN,DAC_OVERRIDE,FOWNER,FSETID \
    -v "$deb:/tmp/$(basename "$deb"):ro" -v "$PWD/tests/deploy:/tests:ro" \
    "$BASE_IMAGE" bash /tests/deb_install_test.sh "/tmp/$(basename "$deb")"
fi
echo "$deb"
