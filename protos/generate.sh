#!/usr/bin/env bash
# Generates the Python stubs (messages, .pyi, gRPC) for every proto under protos/ into $1
# (default: services/). `make proto` writes them in place; tests/unit/test_contract.py
# generates into a temporary folder and fails when the committed stubs differ.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/../services"}
python=${PYTHON:-python}
cd "$here"
mapfile -t files < <(find deliberate -name '*.proto' | sort)
"$python" -m grpc_tools.protoc -I . --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "${files[@]}"
