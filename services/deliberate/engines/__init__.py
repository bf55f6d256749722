"""LLM engines behind one interface. `load_engine` picks one by name."""

from __future__ import annotations

from .base import Completion, Engine, GenerationEvent, SamplingParams, TextDelta

__all__ = ["Completion", "Engine", "GenerationEvent", "SamplingParams", "TextDelta", "load_engine"]


def load_engine(name: str, model: str = "embedded") -> Engine:
    """Builds the engine `name` ("transformers" or "vllm") on `model` ("embedded" or a local path).

    vllm needs an HF-format model directory; see `deliberate.engines.vllm_engine`.
    """
    if name == "transformers":
        from .transformers_engine import TransformersEngine

        return TransformersEngine.load(model)
    if name == "vllm":
        from .vllm_engine import VllmEngine

        return VllmEngine.load(model)
    raise ValueError(f"unknown engine {name!r}; available: transformers, vllm")
