"""LLM engines behind one interface. `load_engine` picks one by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Completion, Engine, GenerationEvent, SamplingParams, TextDelta

if TYPE_CHECKING:
    from .remote_engine import RemoteConfig

__all__ = ["Completion", "Engine", "GenerationEvent", "SamplingParams", "TextDelta", "load_engine"]


ENGINES = ("llamacpp", "transformers", "vllm", "remote", "recorded")


def load_engine(name: str, model: str = "embedded", threads: int = 0, remote: RemoteConfig | None = None) -> Engine:
    """Builds the engine `name` (one of ENGINES) on `model` (an embedded model's name or a local path).

    llamacpp runs GGUF files; transformers GGUF or HF-format directories (the `transformers` extra);
    vllm needs an HF-format model directory (see `deliberate.engines.vllm_engine`). `threads` (CPU engines):
    0 means every CPU the process may use. remote talks to the OpenAI-compatible server `remote` describes
    (`deliberate.engines.remote_engine`); `model` is unused then. recorded generates nothing: it answers the drafts
    recorded in the JSONL file `model` (tests and replays; `deliberate.engines.recorded_engine`).
    """
    if name == "llamacpp":
        from .llamacpp_engine import LlamaCppEngine

        return LlamaCppEngine.load(model, threads=threads or None)
    if name == "transformers":
        from .transformers_engine import TransformersEngine

        return TransformersEngine.load(model, threads=threads or None)
    if name == "vllm":
        from .vllm_engine import VllmEngine

        return VllmEngine.load(model)
    if name == "remote":
        from .remote_engine import RemoteEngine

        if remote is None:
            raise ValueError("the remote engine needs the server's URL: --remote-url / DELIBERATE_REMOTE_URL")
        return RemoteEngine.load(remote)
    if name == "recorded":
        from .recorded_engine import RecordedEngine

        return RecordedEngine.load(model)
    raise ValueError(f"unknown engine {name!r}; available: {', '.join(ENGINES)}")
