from __future__ import annotations

from pydantic import Field

from ..core.config import CommonSettings
from ..core.ports import RISK_PORTS


class RiskSettings(CommonSettings):
    """Risk model: scores credit offers (PD, LGD) for the Verifier's `credit` rule pack; deterministic, no model
    file."""

    port: int = Field(RISK_PORTS.grpc, description="gRPC port.")
    metrics_port: int = Field(
        RISK_PORTS.metrics, ge=0, description="Port of the Prometheus GET /metrics endpoint; 0 = none."
    )
    max_in_flight: int = Field(
        256,
        ge=1,
        description="Score calls in flight at once; one beyond is refused at once with RESOURCE_EXHAUSTED. A "
        "verification scores each offer of a draft at once: 16 drafts of 16 offers.",
    )
