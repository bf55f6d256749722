#!/usr/bin/env bash
# The OpenAI SDK against the gateway of a running stack (make test-clients sets DELIBERATE_GATEWAY_URL):
# tests/integration/test_gateway.py, which runs against that URL instead of starting a stack of its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${DELIBERATE_GATEWAY_URL:?set DELIBERATE_GATEWAY_URL (make test-clients does), e.g. http://127.0.0.1:8080}"
exec "${PYTHON:-.venv/bin/python}" -m pytest -q -p no:cacheprovider tests/integration/test_gateway.py
