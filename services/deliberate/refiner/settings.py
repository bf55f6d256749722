from __future__ import annotations

from pydantic import Field

from ..core.ports import REFINER_PORTS
from ..engines.models import DEFAULT_REFINER_MODEL
from ..engines.settings import MODEL_HELP, EngineSettings


class RefinerSettings(EngineSettings):
    """Refiner: turns the best verified drafts into the streamed final answer."""

    port: int = Field(REFINER_PORTS.grpc, description="gRPC port.")
    # The smaller model by default: on the frontier it refined the 1.5B model's drafts as accurately, sooner and in
    # 1.5 GB less memory (docs/models.md#the-frontier-which-model-where).
    model: str = Field(DEFAULT_REFINER_MODEL, description=MODEL_HELP)
    metrics_port: int = Field(
        REFINER_PORTS.metrics, ge=0, description="Port of the Prometheus GET /metrics endpoint; 0 = none."
    )
    max_in_flight: int = Field(
        16,
        ge=1,
        description="Refine calls in flight at once; one beyond is refused at once with RESOURCE_EXHAUSTED and a "
        "retry hint (docs/reliability.md). Two Schedulers' worth of solves.",
    )
    max_selected: int = Field(2, description="Most selected drafts accepted per call.")
    max_draft_chars: int = Field(32_000, description="Longest draft text accepted, in characters.")
    temperature: float = Field(0.7, description="Default refinement temperature.")
    consensus_min_support: int = Field(
        3, description="Drafts that must share a leading line when the caller gives no prefix (clamped to N)."
    )
    budget_table: str = Field(
        "0.9:512,0.8:384,default:256", description="New-token budget by the best draft's score (score:tokens,…)."
    )
