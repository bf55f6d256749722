"""Fixtures shared by unit and integration tests."""

from __future__ import annotations

import os

import pytest

# Tests run on the small, fast embedded model; services started by tests inherit it.
TEST_MODEL = "smollm2-135m"
os.environ.setdefault("DELIBERATE_MODEL", TEST_MODEL)


@pytest.fixture(scope="session")
def embedded_engine():
    """The embedded SmolLM2 engine, loaded once per test session (~10-30 s on 2 CPUs)."""
    from deliberate.engines.transformers_engine import TransformersEngine

    return TransformersEngine.load(TEST_MODEL)


@pytest.fixture(scope="session")
def llamacpp_engine():
    """The llama.cpp engine on the small embedded model, loaded once per test session (~2 s)."""
    from deliberate.engines.llamacpp_engine import LlamaCppEngine

    return LlamaCppEngine.load(TEST_MODEL, parallel=4, context_per_slot=2048)


@pytest.fixture
def redis_server(tmp_path):
    """A real redis-server of this test's own, on a free loopback port (tests/redis_server.py)."""
    from tests.redis_server import running_redis

    with running_redis(tmp_path / "redis") as server:
        yield server
