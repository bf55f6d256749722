from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from ..core.config import DraftLimits
from ..core.ports import DRAFTER_PORTS
from ..engines.base import SamplingParams
from ..engines.settings import EngineSettings


class DrafterSettings(DraftLimits, EngineSettings):
    """Drafter: generates N candidate drafts in one batched engine call."""

    port: int = Field(DRAFTER_PORTS.grpc, description="gRPC port.")
    metrics_port: int = Field(
        DRAFTER_PORTS.metrics, ge=0, description="Port of the Prometheus GET /metrics endpoint; 0 = none."
    )
    max_in_flight: int = Field(
        16,
        ge=1,
        description="GenerateDrafts calls in flight at once; one beyond is refused at once with RESOURCE_EXHAUSTED "
        "and a retry hint (docs/reliability.md). Two Schedulers' worth of solves; drafts beyond the engine's slots "
        "wait in its queue.",
    )
    confidence_top_k: int = Field(
        20,
        ge=0,
        le=20,
        description="Candidates per token whose log-probabilities give a draft's token confidence "
        "(`Draft.confidence`, docs/selection.md); 0 = none. Costs ~4 % of decoding speed on llama.cpp "
        "(`make bench-confidence`).",
    )

    def default_sampling(self) -> SamplingParams:
        return replace(super().default_sampling(), top_logprobs=self.confidence_top_k)
