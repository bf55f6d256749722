#!/usr/bin/env bash
# Generates the Python code of the contract (messages, .pyi, gRPC stubs) for every proto under protos/ into the
# `deliberate_api` package under $1 (default: protos/python/, the deliberate-api distribution). `make proto` writes
# them in place; tests/repo/test_contract.py generates into a temporary folder and fails when the committed files
# differ.
#
# protoc names a generated module after its proto file's path (deliberate/common/v1/common.proto ->
# `deliberate.common.v1.common_pb2`) and writes its imports that way. The files stay where they are (their paths
# and proto packages are the wire and descriptor contract), so the generated modules are moved under
# `deliberate_api/` and their imports of one another rewritten to match: `deliberate` is the server package's name.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/python"}
python=${PYTHON:-python}
generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
cd "$here"
mapfile -t files < <(find deliberate -name '*.proto' | sort)
"$python" -m grpc_tools.protoc -I . --python_out="$generated" --pyi_out="$generated" --grpc_python_out="$generated" \
  "${files[@]}"
cd "$generated/deliberate"
find . -type f -name '*_pb2*' | sort | while read -r file; do
  mkdir -p "$out/deliberate_api/$(dirname "$file")"
  sed -E 's/^from deliberate\.([a-z0-9_.]+) import /from deliberate_api.\1 import /' "$file" \
    >"$out/deliberate_api/$file"
done
