from __future__ import annotations

from pydantic import Field

from ..core.config import CommonSettings


class SchedulerSettings(CommonSettings):
    """Scheduler: the client-facing service; draft → verify → select → refine."""

    port: int = Field(50051, description="gRPC port (the one clients call).")
    drafter_address: str = Field("127.0.0.1:50052", description="host:port of the Drafter.")
    verifier_address: str = Field("127.0.0.1:50053", description="host:port of the Verifier.")
    refiner_address: str = Field("127.0.0.1:50054", description="host:port of the Refiner.")
    default_num_drafts: int = Field(5, description="Drafts per request when the request leaves num_drafts at 0.")
    max_drafts: int = Field(8, description="Largest num_drafts a request may ask for.")
    max_prompt_chars: int = Field(8000, description="Longest prompt accepted, in characters.")
    max_hint_chars: int = Field(500, description="Longest strategy hint accepted, in characters.")
    max_new_tokens_limit: int = Field(1024, description="Largest max_new_tokens a request may ask for.")
    max_selected: int = Field(2, description="How many of the best drafts go to the Refiner.")
    default_deadline_s: float = Field(300.0, description="Deadline applied when the client sets none.")
