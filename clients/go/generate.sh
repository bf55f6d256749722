#!/usr/bin/env bash
# Generates the Go code of the contract (every proto under protos/) into $1/gen (default: clients/go/gen) with
# `buf generate` and the plugins installed on this machine: protoc-gen-go and protoc-gen-go-grpc (Debian's
# packages of the same names, or `go install` of the versions below). `make proto-go` writes them in place;
# tests/repo/test_go_client.py generates into a temporary folder and fails when the committed files differ.
# Other plugin versions write other code, so they are refused rather than producing a drift.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here"}
buf=${BUF:-buf}
PROTOC_GEN_GO_VERSION="protoc-gen-go v1.28.1"
PROTOC_GEN_GO_GRPC_VERSION="protoc-gen-go-grpc 1.0"
for expected in "$PROTOC_GEN_GO_VERSION" "$PROTOC_GEN_GO_GRPC_VERSION"; do
  plugin=${expected%% *}
  found=$("$plugin" --version 2>/dev/null) || { echo "$plugin is not installed (apt-get install $plugin)" >&2; exit 3; }
  [[ $found == "$expected" ]] || { echo "$plugin: found '$found', the committed code is from '$expected'" >&2; exit 3; }
done
cd "$here"
rm -rf "$out/gen"
"$buf" generate "$here/../../protos" --template "$here/buf.gen.yaml" --output "$out"
