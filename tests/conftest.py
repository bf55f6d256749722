"""Fixtures shared by unit and integration tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def embedded_engine():
    """The embedded SmolLM2 engine, loaded once per test session (~10-30 s on 2 CPUs)."""
    from deliberate.engines.transformers_engine import TransformersEngine

    return TransformersEngine.load("embedded")
