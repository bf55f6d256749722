#!/usr/bin/env bash
# The Debian packages the tests use, installed where they are missing: redis-server (the shared Scheduler state and
# the reference store run on a real one), prometheus (the metrics test scrapes a stack with it; promtool checks the
# alert rules) and the Go toolchain with grpc and the protoc plugins (clients/go builds offline from them; the Go
# drift test regenerates its contract code). `make test` and `.ci/run` both call this, so CI gets exactly what a
# newcomer gets. Without root or apt-get it installs nothing and says what to install; the tests that need a
# missing tool then skip, each with that reason, and `make test` lists them in its last lines.
set -euo pipefail
packages=(redis-server prometheus golang-go golang-google-grpc-dev golang-google-protobuf-dev
  golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "note: not installing ${missing[*]} (needs root and apt-get); the tests that need them will skip" >&2
  exit 0
fi
echo "installing Debian packages the tests use: ${missing[*]}" >&2
apt-get update -qq
# redis-server and prometheus without recommends (prometheus would pull in its web console's node exporter and
# more); the Go packages as CI always installed them.
servers=() go=()
for package in "${missing[@]}"; do
  case "$package" in redis-server | prometheus) servers+=("$package") ;; *) go+=("$package") ;; esac
done
if [ ${#servers[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${servers[@]}" >/dev/null
fi
if [ ${#go[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${go[@]}" >/dev/null
fi
