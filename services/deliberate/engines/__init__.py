"""LLM engines behind one interface. `load_engine` picks one by name."""

from __future__ import annotations

from .base import Completion, Engine, GenerationEvent, SamplingParams, TextDelta

__all__ = ["Completion", "Engine", "GenerationEvent", "SamplingParams", "TextDelta", "load_engine"]


def load_engine(name: str, model: str = "embedded") -> Engine:
    """Builds the engine `name` ("transformers") on `model` ("embedded" or a local path)."""
    if name == "transformers":
        from .transformers_engine import TransformersEngine

        return TransformersEngine.load(model)
    raise ValueError(f"unknown engine {name!r}; available: transformers")
