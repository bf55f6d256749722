"""One Verifier process: its gRPC server, judge and reference store, and what its GET /health reports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core.server import ServiceSpec, method_names, run
from ..core.tls import channel_credentials
from ..decisions.packs import registry
from ..decisions.reference import ReferenceStore, store_name
from ..engines.service import open_engine
from ..risk.client import RiskClient
from .judge import Judge
from .program import PROGRAM
from .server import VerifierServicer
from .settings import VerifierSettings


def health_state(settings: VerifierSettings) -> dict:
    """What GET /health reports besides the service's name; `serve` fills it in."""
    reference = store_name(settings.reference_url) if settings.reference_url else "package data"
    return {
        "serving": False,
        "rule_packs": [],
        "judge": settings.judge,
        "reference": reference,
        "risk_model": settings.risk_address,
    }


def rule_pack_names() -> list[str]:
    """What `rule_pack` may name: the plugin registry and the built-in program check."""
    return sorted({*registry(), PROGRAM})


def pack_services(reference: ReferenceStore | None, risk: RiskClient) -> dict[str, object]:
    """What this Verifier offers rule packs, by the names they declare in `requires` and `uses`: `reference`, the
    reference store (--reference-url; absent without one), and `risk`, the risk-model service's client
    (--risk-address)."""
    return {"risk": risk} | ({"reference": reference} if reference is not None else {})


def serve(settings: VerifierSettings, state: dict, on_serving: Callable[[bool], None] | None = None) -> None:
    """Serves until SIGTERM or SIGINT, keeping `state` up to date. `on_serving`: a worker's report to its parent
    (workers.py), whose workers share the port."""
    reference = ReferenceStore(settings.reference_url, settings.reference_timeout_s) if settings.reference_url else None

    @asynccontextmanager
    async def rules_and_judge() -> AsyncIterator[VerifierServicer]:
        """Health turns SERVING only after this: the rule packs are loaded and the judge (if any) is ready.
        The risk client is made here, after tracing is set up, so its calls are traced."""
        state["rule_packs"] = rule_pack_names()
        risk = RiskClient(
            settings.risk_address,
            settings.risk_timeout_s,
            settings.risk_breaker_failures,
            settings.risk_breaker_reset_s,
            channel_credentials(
                settings.downstream_tls_ca_file, settings.downstream_tls_cert_file, settings.downstream_tls_key_file
            ),
        )
        services = pack_services(reference, risk)
        try:
            if settings.judge == "off":
                yield VerifierServicer(settings, services=services)
                return
            async with open_engine(*settings.judge_engine_and_model()) as engine:
                judge = Judge(engine, settings.judge_timeout_s, hard=settings.judge_hard)
                yield VerifierServicer(settings, judge, services=services)
        finally:
            risk.close()

    def health_changed(serving: bool) -> None:
        state.update(serving=serving)
        if on_serving is not None:
            on_serving(serving)

    service = verifier_service_pb2.DESCRIPTOR.services_by_name["VerifierService"]
    try:
        run(
            ServiceSpec(
                name="verifier",
                port=settings.port,
                metrics_port=settings.metrics_port,
                grpc_services=[service.full_name],
                dependencies=rules_and_judge,
                add_servicers=verifier_service_pb2_grpc.add_VerifierServiceServicer_to_server,
                work_methods=method_names(service, "VerifyDrafts", "CheckConstraints"),
                max_in_flight=settings.max_in_flight,
                on_health_change=health_changed,
                reuse_port=on_serving is not None,
            ),
            settings,
        )
    finally:
        if reference is not None:
            reference.close()
