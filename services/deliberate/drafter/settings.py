from __future__ import annotations

from pydantic import Field

from ..core.config import CommonSettings


class DrafterSettings(CommonSettings):
    """Drafter: generates N candidate drafts in one batched engine call."""

    port: int = Field(50052, description="gRPC port.")
    engine: str = Field("transformers", description="LLM engine: transformers.")
    model: str = Field("embedded", description="Model: embedded (SmolLM2-135M-Instruct GGUF) or a local path.")
    max_drafts: int = Field(8, description="Largest num_drafts accepted per call.")
    max_prompt_chars: int = Field(8000, description="Longest prompt accepted, in characters.")
    max_hint_chars: int = Field(500, description="Longest strategy hint accepted, in characters.")
    max_new_tokens_limit: int = Field(1024, description="Largest max_new_tokens a request may ask for.")
    temperature: float = Field(0.3, description="Default sampling temperature.")
    top_p: float = Field(0.95, description="Default nucleus sampling top_p.")
    max_new_tokens: int = Field(256, description="Default new tokens per draft.")
    presence_penalty: float = Field(0.2, description="Default presence penalty (OpenAI semantics).")
    frequency_penalty: float = Field(0.1, description="Default frequency penalty (OpenAI semantics).")
