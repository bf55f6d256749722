from __future__ import annotations

from pydantic import Field

from ..core.config import CommonSettings, DownstreamTlsSettings
from ..core.ports import GATEWAY_PORT, SCHEDULER_PORTS


class GatewaySettings(DownstreamTlsSettings, CommonSettings):
    """Gateway: OpenAI-compatible HTTP (chat completions, models, health) in front of the Scheduler's gRPC API."""

    port: int = Field(GATEWAY_PORT, description="HTTP port of the OpenAI-compatible API.")
    scheduler_address: str = Field(SCHEDULER_PORTS.local_address, description="host:port of the Scheduler (gRPC).")
    request_timeout_s: float = Field(
        300.0, description="Deadline of one chat completion, passed to the Scheduler as the gRPC deadline."
    )
    model_name: str = Field("deliberate", description="The model id GET /v1/models lists and requests must name.")
    api_keys: str = Field(
        "", description="Comma-separated bearer tokens accepted (Authorization: Bearer …); empty: no authentication."
    )
    health_timeout_s: float = Field(2.0, description="How long GET /health waits for the Scheduler's gRPC health.")
