"""Settings every engine-backed service (Drafter, Refiner) shares: which engine and model, the engines' own
settings, and sampling defaults."""

from __future__ import annotations

from pydantic import Field

from ..core.config import CommonSettings, GenerationLimits, PromptLimits
from .base import SamplingParams
from .models import DEFAULT_EMBEDDED, EMBEDDED_MODELS
from .remote_engine import RemoteSettings

SAMPLING_DEFAULTS = SamplingParams()  # the sampling defaults, declared once (engines/interface.py)


MODEL_HELP = (
    f"Model: embedded (= {DEFAULT_EMBEDDED}), {', '.join(EMBEDDED_MODELS)}, or a path to a .gguf file or model "
    "directory. Unused by the remote engine (--remote-model)."
)


class EngineChoice(CommonSettings):
    """Which engine a service loads, on which model, with how many CPU threads."""

    engine: str = Field(
        "llamacpp",
        description="LLM engine: llamacpp (GGUF, CPU), transformers (CPU, needs the `transformers` extra), "
        "vllm (GPU; HF-format model), remote (an OpenAI-compatible server at --remote-url) or recorded (replays "
        "the drafts of a JSONL file given as --model; tests and replays, docs/models.md).",
    )
    model: str = Field(
        "embedded",
        description=MODEL_HELP,
    )
    engine_threads: int = Field(
        0,
        ge=0,
        description="CPU threads of the llamacpp/transformers engine; 0 = every CPU the process may use. Give fewer "
        "where other busy processes share those CPUs: a thread waiting for a CPU stalls every decoding step.",
    )


class EngineSettings(RemoteSettings, GenerationLimits, PromptLimits, EngineChoice):
    """What every engine-backed service (Drafter, Refiner) is configured with: its engine, each engine's own
        settings (`Engine.settings_class`: RemoteSettings for the remote engine), the request limits and the sampling
        defaults. An engine plugin's own settings class needs no place here: the fields these bases lack are read from
    their DELIBERATE_* variables (`engines.own_settings`)."""

    temperature: float = Field(SAMPLING_DEFAULTS.temperature, description="Default sampling temperature.")
    top_p: float = Field(SAMPLING_DEFAULTS.top_p, description="Default nucleus sampling top_p.")
    max_new_tokens: int = Field(SAMPLING_DEFAULTS.max_new_tokens, description="Default new tokens per generated text.")
    presence_penalty: float = Field(
        SAMPLING_DEFAULTS.presence_penalty, description="Default presence penalty (OpenAI semantics)."
    )
    frequency_penalty: float = Field(
        SAMPLING_DEFAULTS.frequency_penalty, description="Default frequency penalty (OpenAI semantics)."
    )

    def default_sampling(self) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
        )
