"""`python -m deliberate.verifier`: the Verifier service, with gRPC health and HTTP GET /health."""

from __future__ import annotations

import asyncio

from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core.config import parse_settings
from ..core.http_health import HttpHealthEndpoint
from ..core.server import ServiceSpec, run
from .judge import Judge
from .packs import registry
from .reference import ReferenceStore
from .server import VerifierServicer
from .settings import VerifierSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(VerifierSettings, argv, prog="deliberate.verifier")
    reference = ReferenceStore(settings.reference_url, settings.reference_timeout_s) if settings.reference_url else None
    servicer = VerifierServicer(settings, reference=reference)
    state = {
        "serving": False,
        "rule_packs": [],
        "judge": settings.judge,
        "reference": reference.name if reference else "package data",
    }
    http_health = HttpHealthEndpoint(settings.host, settings.http_port, lambda: {"service": "verifier", **state})
    http_health.start()

    async def load_rules_and_judge() -> None:
        """Health turns SERVING only after this: the rule packs are loaded and the judge (if any) is ready."""
        state["rule_packs"] = sorted(registry())
        if settings.judge != "off":
            from ..engines import load_engine

            engine = await asyncio.to_thread(load_engine, settings.judge, settings.judge_model)
            servicer.judge = Judge(engine, settings.judge_timeout_s, hard=settings.judge_hard)

    async def stop_http_health() -> None:
        http_health.stop()

    async def close_reference_store() -> None:
        if reference is not None:
            reference.close()

    run(
        ServiceSpec(
            name="verifier",
            port=settings.port,
            grpc_services=[verifier_service_pb2.DESCRIPTOR.services_by_name["VerifierService"].full_name],
            add_servicers=lambda server: verifier_service_pb2_grpc.add_VerifierServiceServicer_to_server(
                servicer, server
            ),
            prepare=load_rules_and_judge,
            on_health_change=lambda serving: state.update(serving=serving),
            on_shutdown=[stop_http_health, close_reference_store],
        ),
        settings,
    )


if __name__ == "__main__":
    main()
