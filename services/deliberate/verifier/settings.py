from __future__ import annotations

import os

from pydantic import Field

from ..core.config import CommonSettings, DownstreamTlsSettings, PromptLimits
from ..core.ports import RISK_PORTS, VERIFIER_PORTS
from ..engines import installed_engines


class VerifierSettings(PromptLimits, DownstreamTlsSettings, CommonSettings):
    """Verifier: checks drafts with deterministic rules (and optionally an LLM judge); never generates answers."""

    port: int = Field(VERIFIER_PORTS.grpc, description="gRPC port.")
    metrics_port: int = Field(
        VERIFIER_PORTS.metrics, ge=0, description="Port of the Prometheus GET /metrics endpoint; 0 = none."
    )
    max_in_flight: int = Field(
        160,
        ge=1,
        description="VerifyDrafts and CheckConstraints calls in flight at once; one beyond is refused at once "
        "with RESOURCE_EXHAUSTED and a retry hint (docs/reliability.md). A solve verifies each draft in a call of "
        "its own: two Schedulers' worth of 8 solves of up to 8 drafts, with their checks.",
    )
    http_port: int = Field(VERIFIER_PORTS.http, description="Port of the HTTP GET /health endpoint.")
    workers: int = Field(
        1,
        ge=0,
        description="Server processes sharing the gRPC port (SO_REUSEPORT; Linux); 0 = one per CPU core. The kernel "
        "spreads connections, not calls, so more than one helps only with several clients (Scheduler replicas); "
        "only the first serves /metrics (docs/verifier.md).",
    )
    max_drafts: int = Field(16, description="Most drafts accepted per VerifyDrafts call.")
    max_draft_chars: int = Field(1_000_000, description="Longest draft text accepted, in characters.")
    judge: str = Field(
        "off",
        description="LLM judge for drafts passing every hard rule: off, llamacpp or transformers (an engine, "
        "with --judge-model), or the directory of a judge `deliberate bench train-judge` saved (docs/judge.md).",
    )
    judge_model: str = Field("embedded", description="The judge's model: an embedded model's name or a local path.")
    judge_timeout_s: float = Field(10.0, description="Longest wait for one judge verdict.")
    judge_hard: bool = Field(False, description="When true, a judge saying invalid invalidates the draft.")
    reference_url: str = Field(
        "",
        description="Redis URL of the reference data rule packs read, e.g. the ad catalog (docs/verifier.md); "
        "empty: the packs' package data.",
    )
    reference_timeout_s: float = Field(
        0.3,
        description="Longest wait for one reference-data lookup; past it the check that needed it fails. "
        "Keep two lookups under the Scheduler's --verify-timeout-s.",
    )
    risk_address: str = Field(
        RISK_PORTS.local_address,
        description="host:port of the risk-model service the `credit` rule pack scores offers with "
        "(docs/business-cases.md); while it cannot be reached every offer fails (closed).",
    )
    risk_timeout_s: float = Field(
        0.25,
        gt=0,
        description="Longest wait for one offer's score; past it the offer fails. A draft's offers are scored at "
        "once: keep it under the Scheduler's --verify-timeout-s.",
    )
    risk_breaker_failures: int = Field(
        5,
        ge=1,
        description="Failed risk calls in a row that open the circuit breaker: then offers fail at once, without a "
        "call, until --risk-breaker-reset-s has passed and a trial call succeeds.",
    )
    risk_breaker_reset_s: float = Field(
        5.0, gt=0, description="Seconds the open circuit breaker refuses risk calls before it lets one trial through."
    )

    @property
    def worker_count(self) -> int:
        """`workers`, with 0 read as the cores this process may run on."""
        if self.workers:
            return self.workers
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    def judge_engine_and_model(self) -> tuple[str, str]:
        """(engine, model) of the judge: a trained judge's directory runs on transformers, as it was trained."""
        if self.judge in installed_engines():
            return self.judge, self.judge_model
        return "transformers", self.judge
