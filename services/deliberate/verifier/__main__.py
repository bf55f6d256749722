"""`python -m deliberate.verifier`: the Verifier service, with gRPC health and HTTP GET /health."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core.config import parse_settings
from ..core.http_health import HttpHealthEndpoint
from ..core.server import ServiceSpec, method_names, run
from ..engines.service import open_engine
from .judge import Judge
from .packs import registry
from .reference import ReferenceStore
from .server import VerifierServicer
from .settings import VerifierSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(VerifierSettings, argv, prog="deliberate.verifier")
    reference = ReferenceStore(settings.reference_url, settings.reference_timeout_s) if settings.reference_url else None
    state = {
        "serving": False,
        "rule_packs": [],
        "judge": settings.judge,
        "reference": reference.name if reference else "package data",
    }
    http_health = HttpHealthEndpoint(settings.host, settings.http_port, lambda: {"service": "verifier", **state})
    http_health.start()

    @asynccontextmanager
    async def rules_and_judge() -> AsyncIterator[VerifierServicer]:
        """Health turns SERVING only after this: the rule packs are loaded and the judge (if any) is ready."""
        state["rule_packs"] = sorted(registry())
        if settings.judge == "off":
            yield VerifierServicer(settings, reference=reference)
            return
        async with open_engine(*settings.judge_engine_and_model()) as engine:
            judge = Judge(engine, settings.judge_timeout_s, hard=settings.judge_hard)
            yield VerifierServicer(settings, judge, reference=reference)

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
                on_health_change=lambda serving: state.update(serving=serving),
            ),
            settings,
        )
    finally:
        http_health.stop()
        if reference is not None:
            reference.close()


if __name__ == "__main__":
    main()
