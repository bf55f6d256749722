"""Settings every engine-backed service (Drafter, Refiner) shares: which engine and model, and sampling defaults."""

from __future__ import annotations

from pydantic import Field, SecretStr

from ..core.config import CommonSettings
from .base import SamplingParams
from .remote_engine import RemoteConfig


class EngineSettings(CommonSettings):
    engine: str = Field(
        "llamacpp",
        description="LLM engine: llamacpp (GGUF, CPU), transformers (CPU, needs the `transformers` extra), "
        "vllm (GPU; HF-format model), remote (an OpenAI-compatible server at --remote-url) or recorded (replays "
        "the drafts of a JSONL file given as --model; tests and replays, docs/models.md).",
    )
    model: str = Field(
        "embedded",
        description="Model: embedded (= qwen2.5-coder-0.5b), smollm2-135m, or a path to a .gguf file or "
        "model directory. Unused by the remote engine (--remote-model).",
    )
    engine_threads: int = Field(
        0,
        ge=0,
        description="CPU threads of the llamacpp/transformers engine; 0 = every CPU the process may use. Give fewer "
        "where other busy processes share those CPUs: a thread waiting for a CPU stalls every decoding step.",
    )
    remote_url: str = Field(
        "",
        description="engine=remote: the server's OpenAI base URL, with its /v1 (vLLM, SGLang, llama.cpp's "
        "llama-server, Ollama: http://host:port/v1).",
    )
    remote_model: str = Field(
        "", description="engine=remote: the model name sent to the server; empty = the first one it lists."
    )
    remote_api_key: SecretStr = Field(
        SecretStr(""), description="engine=remote: API key sent as a bearer token (never logged); empty = none."
    )
    remote_max_parallel: int = Field(
        8, ge=1, description="engine=remote: requests in flight at once (the capacity the Drafter reports)."
    )
    remote_connect_timeout_s: float = Field(5.0, gt=0, description="engine=remote: connect timeout per try.")
    remote_read_timeout_s: float = Field(
        120.0,
        gt=0,
        description="engine=remote: longest silence of the server, before the first token (queue, prompt) or "
        "between two; then DEADLINE_EXCEEDED.",
    )
    remote_retries: int = Field(
        3,
        ge=0,
        description="engine=remote: retries of a connect error, 429 or 5xx before the first token (never after), "
        "with exponential backoff.",
    )
    remote_backoff_s: float = Field(0.5, ge=0, description="engine=remote: wait before the first retry; doubles.")
    max_prompt_chars: int = Field(8000, description="Longest prompt accepted, in characters.")
    max_new_tokens_limit: int = Field(1024, description="Largest max_new_tokens a request may ask for.")
    temperature: float = Field(0.3, description="Default sampling temperature.")
    top_p: float = Field(0.95, description="Default nucleus sampling top_p.")
    # 256 cut off 33-67 % of the default model's drafts before their final line (bench/results/eval-budget256.md).
    max_new_tokens: int = Field(384, description="Default new tokens per generated text.")
    presence_penalty: float = Field(0.2, description="Default presence penalty (OpenAI semantics).")
    frequency_penalty: float = Field(0.1, description="Default frequency penalty (OpenAI semantics).")

    def default_sampling(self) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
        )

    def remote_config(self) -> RemoteConfig | None:
        """The remote engine's settings, or None where none is configured."""
        if not self.remote_url:
            return None
        return RemoteConfig(
            url=self.remote_url,
            model=self.remote_model,
            api_key=self.remote_api_key.get_secret_value(),
            connect_timeout_s=self.remote_connect_timeout_s,
            read_timeout_s=self.remote_read_timeout_s,
            retries=self.remote_retries,
            backoff_s=self.remote_backoff_s,
            max_parallel=self.remote_max_parallel,
        )
