#!/usr/bin/env bash
# Makes rootful podman usable on a Debian machine without a Docker engine or a registry (this project's
# CI and dev machines): podman, runc, debootstrap from Debian, runc as the runtime and lowered ulimits.
set -euo pipefail
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v runc >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null
fi
conf=/etc/containers/containers.conf
if ! grep -qs 'runtime = "runc"' "$conf"; then
  mkdir -p /etc/containers
  cat >"$conf" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
CONF
fi
podman --version
