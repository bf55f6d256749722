from __future__ import annotations

from pydantic import Field

from ..core.config import CommonSettings


class RefinerSettings(CommonSettings):
    """Refiner: turns the best verified drafts into the streamed final answer."""

    port: int = Field(50054, description="gRPC port.")
    engine: str = Field("transformers", description="LLM engine: transformers.")
    model: str = Field("embedded", description="Model: embedded (SmolLM2-135M-Instruct GGUF) or a local path.")
    max_prompt_chars: int = Field(8000, description="Longest prompt accepted, in characters.")
    max_selected: int = Field(2, description="Most selected drafts accepted per call.")
    max_draft_chars: int = Field(32_000, description="Longest draft text accepted, in characters.")
    max_new_tokens_limit: int = Field(1024, description="Largest max_new_tokens a request may ask for.")
    temperature: float = Field(0.7, description="Default refinement temperature.")
    top_p: float = Field(0.95, description="Default nucleus sampling top_p.")
    max_new_tokens: int = Field(256, description="Default new tokens of the final answer.")
    presence_penalty: float = Field(0.2, description="Default presence penalty; keeps the small model out of loops.")
    frequency_penalty: float = Field(0.1, description="Default frequency penalty (OpenAI semantics).")
