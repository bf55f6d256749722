#!/usr/bin/env bash
# Runs a go command (`clients/go/offline.sh go test ./...`) on this module with no network: GOPATH mode over
# Debian's Go sources (/usr/share/gocode: golang-google-grpc-dev, golang-google-protobuf-dev,
# golang-github-golang-protobuf-1-5-dev), as Debian builds its own Go packages. The module is linked into a
# temporary GOPATH under its import path; go.mod is for module-mode builds with a team's own toolchain
# (docs/clients.md, "Go").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
module=$(sed -n 's/^module //p' "$here/go.mod")
debian=${DEBIAN_GOCODE:-/usr/share/gocode}
[[ -d $debian/src/google.golang.org/grpc ]] || {
  echo "no grpc-go under $debian: apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev" >&2
  exit 3
}
# grpc-go marshals through github.com/golang/protobuf: its v1.3 (Debian's default pick) panics on generated APIv2
# messages ("protobuf tag not enough fields"); v1.4+ wraps google.golang.org/protobuf.
[[ ! -e $debian/src/github.com/golang/protobuf/proto/table_unmarshal.go ]] || {
  echo "github.com/golang/protobuf under $debian is v1.3: apt-get install golang-github-golang-protobuf-1-5-dev" >&2
  exit 3
}
gopath=$(mktemp -d)
trap 'rm -rf "$gopath"' EXIT
mkdir -p "$gopath/src/$(dirname "$module")"
ln -s "$here" "$gopath/src/$module"
cd "$gopath/src/$module"
GO111MODULE=off GOPATH="$gopath:$debian" GOPROXY=off GOFLAGS= "$@"
